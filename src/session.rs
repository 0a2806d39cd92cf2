//! The embedding API. A [`Runtime`] is a model loaded onto one GPU with its
//! tokenizer; a [`Session`] is one conversation or document over it, owning
//! its KV cache, so several sessions share one copy of the weights. A
//! session is fed text or tokens (prefilled in batches) and generates
//! tokens through an iterator or a callback; either can be cancelled.
//!
//! ```no_run
//! use glmw::{LoadOptions, Runtime, SamplerOptions};
//!
//! fn main() -> glmw::Result<()> {
//!     let rt = Runtime::load("model.gguf", LoadOptions::default(), &mut |_, _| {})?;
//!     let mut s = rt.session(SamplerOptions { temperature: 0.0, ..Default::default() })?;
//!     s.feed_text("And God said")?;
//!     for token in s.tokens(32) {
//!         print!("{}", token?.text);
//!     }
//!     println!("\n(stopped: {:?})", s.stop());
//!     Ok(())
//! }
//! ```

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use crate::engine::{Candidates, Engine, EngineOptions, Resident, DEFAULT_UBATCH};
use crate::error::{Error, Result};
use crate::gpu::{Gpu, GpuOptions};
use crate::model::{Config, Model};
use crate::sample::{Sampler, SamplerOptions};
use crate::tokenizer::{ChatMessage, StreamDecoder, Tokenizer};

mod stops;
use stops::StopStrings;

/// How to load a model.
#[derive(Clone, Copy, Debug)]
pub struct LoadOptions {
    /// Which GPU backend and kernel variant (`no_subgroups`).
    pub gpu: GpuOptions,
    /// Context length (KV cache rows) of each session; `None` takes
    /// [`default_n_ctx`].
    pub n_ctx: Option<usize>,
    /// Most prompt tokens prefilled at once.
    pub ubatch: usize,
}

impl Default for LoadOptions {
    fn default() -> Self {
        LoadOptions {
            gpu: GpuOptions::default(),
            n_ctx: None,
            ubatch: DEFAULT_UBATCH,
        }
    }
}

/// Decode steps in `Session::warm_up`: on an H200 after the upload, 4
/// (~145 ms) left `generate -n 256` at 264-269 tok/s and its 24-token
/// prompt at 204-305; 32 (~290-360 ms) gave 269 and ~800, as 128 did
/// (docs/perf-journal.md, session 39).
const WARM_UP_STEPS: usize = 32;

/// The context a session gets when none is asked for: 4096 tokens, or the
/// model's training context if that is shorter.
pub fn default_n_ctx(config: &Config) -> usize {
    4096.min(config.n_ctx_train.max(1))
}

/// A model, its tokenizer and its weights resident on one GPU. A runtime
/// is a shared handle: cloning one is cheap (the weights are not copied),
/// and each `Session` holds a clone, so sessions can live anywhere, on any
/// thread, for as long as they are wanted (a server keeps them beside
/// the runtime it serves from).
#[derive(Clone)]
pub struct Runtime {
    model: Arc<Model>,
    tokenizer: Arc<Tokenizer>,
    gpu: Arc<Gpu>,
    resident: Resident,
    opts: EngineOptions,
}

impl Runtime {
    /// Open the GGUF file at `path`, pick a GPU and upload the weights;
    /// `progress(done, total)` counts weight bytes.
    pub fn load(
        path: impl AsRef<Path>,
        opts: LoadOptions,
        progress: &mut dyn FnMut(u64, u64),
    ) -> Result<Runtime> {
        let t0 = std::time::Instant::now();
        let model = Model::open(path)?;
        log::info!("model file: {:.2} s", t0.elapsed().as_secs_f64());
        Self::from_model(model, opts, progress)
    }

    /// The built-in model (glmw-tiny, [`crate::builtin`]: a small model of
    /// GLM-4.7-Flash's architecture trained on the King James Bible),
    /// loaded as `load` does: for trying the API with no model file.
    pub fn load_builtin(opts: LoadOptions, progress: &mut dyn FnMut(u64, u64)) -> Result<Runtime> {
        Self::from_model(crate::builtin::model()?, opts, progress)
    }

    /// A model already opened (`Model::open`, `builtin::model`), loaded as
    /// `load` does.
    pub fn from_model(
        model: Model,
        opts: LoadOptions,
        progress: &mut dyn FnMut(u64, u64),
    ) -> Result<Runtime> {
        let t0 = std::time::Instant::now();
        let tokenizer = Tokenizer::from_gguf(&model.file)?;
        log::info!("tokenizer: {:.2} s", t0.elapsed().as_secs_f64());
        let t0 = std::time::Instant::now();
        let gpu = Gpu::new(opts.gpu)?;
        log::info!("device: {:.2} s", t0.elapsed().as_secs_f64());
        let opts = EngineOptions {
            n_ctx: opts.n_ctx.unwrap_or_else(|| default_n_ctx(&model.config)),
            ubatch: opts.ubatch,
            ..Default::default()
        };
        let resident = Resident::upload(&model, &gpu, &opts, progress)?;
        Ok(Runtime {
            model: Arc::new(model),
            tokenizer: Arc::new(tokenizer),
            gpu: Arc::new(gpu),
            resident,
            opts,
        })
    }

    /// A new session with an empty KV cache of `n_ctx` tokens; it holds a
    /// clone of this runtime.
    pub fn session(&self, sampling: SamplerOptions) -> Result<Session> {
        let engine = Engine::open(
            self.model.clone(),
            self.gpu.clone(),
            &self.resident,
            self.opts,
        )?;
        Session::new(self.clone(), engine, sampling)
    }

    /// Each session's context length (`LoadOptions::n_ctx` or the default).
    pub fn n_ctx(&self) -> usize {
        self.opts.n_ctx
    }

    pub fn tokenizer(&self) -> &Tokenizer {
        &self.tokenizer
    }

    pub fn config(&self) -> &Config {
        &self.model.config
    }

    /// The adapter's name and backend, e.g. "NVIDIA H200 (Vulkan)".
    pub fn adapter(&self) -> String {
        format!("{} ({:?})", self.gpu.info.name, self.gpu.info.backend)
    }

    /// The kernel variant the weights were loaded for ("subgroup" or
    /// "shared-memory").
    pub fn kernels(&self) -> &'static str {
        self.gpu.caps.variant.name()
    }
}

/// Why generation stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stop {
    /// The model produced an end-of-turn / end-of-generation token.
    EndOfTurn,
    /// The requested number of tokens was generated.
    Length,
    /// The callback returned false, or a `CancelHandle` was used.
    Cancelled,
    /// The context is full: `reset` to go on.
    ContextFull,
    /// The text reached a stop string (`Session::set_stop_strings`).
    StopString,
}

/// Where a session's time went, as llama.cpp's context timings count it:
/// tokens prefilled (`feed`) and tokens generated (sampled and decoded),
/// with the seconds each took. Zeroed by `reset`.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Perf {
    pub prompt_tokens: usize,
    pub prompt_s: f64,
    pub gen_tokens: usize,
    pub gen_s: f64,
}

impl Perf {
    pub fn prompt_tok_s(&self) -> f64 {
        self.prompt_tokens as f64 / self.prompt_s.max(1e-9)
    }

    pub fn gen_tok_s(&self) -> f64 {
        self.gen_tokens as f64 / self.gen_s.max(1e-9)
    }
}

/// One generated token and the text it releases: empty while a UTF-8
/// character is split across tokens, or while the text may still become a
/// stop string (`Session::held_text`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Token {
    pub id: u32,
    pub text: String,
}

/// Stops a session's work from another thread: a prompt being fed stops
/// at the next prefill chunk (`Error::Cancelled`), a generation before its
/// next token (`Stop::Cancelled`). A cancel that arrives while the session
/// is idle is forgotten when the next feed or generation starts.
#[derive(Clone, Debug, Default)]
pub struct CancelHandle(Arc<AtomicBool>);

impl CancelHandle {
    pub fn new() -> CancelHandle {
        CancelHandle::default()
    }

    pub fn cancel(&self) {
        self.0.store(true, Ordering::SeqCst);
    }

    pub fn is_cancelled(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }

    /// Whether a cancel arrived, forgetting it.
    fn take(&self) -> bool {
        self.0.swap(false, Ordering::SeqCst)
    }

    fn clear(&self) {
        self.0.store(false, Ordering::SeqCst);
    }
}

/// A conversation or document over a model: its KV cache, sampler and the
/// tokens seen so far. A session holds its runtime (a clone of the
/// handle) and is `Send`: it can move to the thread that serves it.
pub struct Session {
    rt: Runtime,
    engine: Engine<'static>,
    opts: SamplerOptions,
    sampler: Sampler,
    decoder: StreamDecoder<'static>,
    /// The next token's candidates (empty until something is fed).
    cands: Candidates,
    history: Vec<u32>,
    cancel: CancelHandle,
    stop: Option<Stop>,
    stops: StopStrings,
    /// A generated token did not fit the full context: it was returned but
    /// not fed, so nothing more can be generated until `reset`.
    full: bool,
    perf: Perf,
}

impl Session {
    /// A session over `engine` (its cache is reset), opened over `rt`.
    fn new(rt: Runtime, mut engine: Engine<'static>, sampling: SamplerOptions) -> Result<Session> {
        let sampler = Sampler::new(sampling)?;
        engine.set_candidates(sampler.candidates())?;
        engine.reset();
        Ok(Session {
            decoder: StreamDecoder::new(rt.tokenizer.clone()),
            rt,
            engine,
            opts: sampling,
            sampler,
            cands: Vec::new(),
            history: Vec::new(),
            cancel: CancelHandle::default(),
            stop: None,
            stops: StopStrings::default(),
            full: false,
            perf: Perf::default(),
        })
    }

    /// The ids `feed_text` would feed now: `text` tokenized (special
    /// tokens such as `<|user|>` are recognised), and at the start of the
    /// sequence with the model's prompt prefix (`Tokenizer::prompt_prefix`,
    /// `[gMASK]<sop>` for GLM) unless the text begins with it.
    pub fn tokenize(&self, text: &str) -> Result<Vec<u32>> {
        let ids = self.rt.tokenizer.encode(text, true)?;
        Ok(match self.history.is_empty() {
            true => self.rt.tokenizer.with_prompt_prefix(ids),
            false => ids,
        })
    }

    /// Tokenize `text` as `tokenize` does and feed it; returns the number
    /// of tokens fed. Special-token text is read as those tokens: this is
    /// the caller's own prompt, as llama.cpp reads one. For text that comes
    /// from users, use `feed_messages` or `chat::Chat`, which keep it from
    /// being read as markers.
    pub fn feed_text(&mut self, text: &str) -> Result<usize> {
        let ids = self.tokenize(text)?;
        self.feed(&ids)?;
        Ok(ids.len())
    }

    /// Feed `tokens` through the batched prefill. A bad token id or a
    /// context overflow (`Error::ContextFull`) is found before anything is
    /// fed. A `CancelHandle` stops the feed between prefill chunks
    /// (`Error::Cancelled`); the chunks fed by then stay (`history`).
    pub fn feed(&mut self, tokens: &[u32]) -> Result<()> {
        self.cancel.clear();
        self.check_room(tokens)?;
        for chunk in tokens.chunks(self.engine.ubatch()) {
            if self.cancel.take() {
                return Err(Error::Cancelled);
            }
            let t0 = Instant::now();
            self.cands = self.engine.prefill(chunk)?;
            self.fed(chunk, t0);
        }
        Ok(())
    }

    /// `tokens` are in the vocabulary and fit in the cache after what it
    /// holds.
    fn check_room(&self, tokens: &[u32]) -> Result<()> {
        let n_vocab = self.engine.model.config.n_vocab;
        if let Some(t) = tokens.iter().find(|&&t| t as usize >= n_vocab) {
            return Err(Error::InvalidArgument(format!(
                "token id {t} is outside the vocabulary (0..{n_vocab})"
            )));
        }
        match self.pos().checked_add(tokens.len()) {
            Some(end) if end <= self.n_ctx() => Ok(()),
            _ => Err(Error::ContextFull {
                n_ctx: self.n_ctx(),
            }),
        }
    }

    /// Make the session hold exactly `tokens`: keep the longest prefix the
    /// cache shares with them, drop the rest and feed only the remainder
    /// (a server's follow-up request, or a regenerated reply, re-feeds
    /// just its new text). Returns how many tokens were reused. Errors as
    /// `feed`; on one found before feeding the session is unchanged.
    pub fn feed_reusing(&mut self, tokens: &[u32]) -> Result<usize> {
        if tokens.is_empty() {
            return Err(Error::InvalidArgument("the prompt is empty".into()));
        }
        let common = self
            .history
            .iter()
            .zip(tokens)
            .take_while(|(a, b)| a == b)
            .count();
        // The last token is fed again whatever the cache holds: its
        // candidates are the ones to sample from.
        let keep = common.min(tokens.len() - 1);
        if tokens.len() > self.n_ctx() {
            return Err(Error::ContextFull {
                n_ctx: self.n_ctx(),
            });
        }
        self.truncate(keep)?;
        self.feed(&tokens[keep..])?;
        Ok(keep)
    }

    /// Render `messages` with the model's chat template, ending with the
    /// assistant's turn (`thinking`: let the model reason first, GLM's
    /// `<think>`), and make the session hold that prompt as
    /// `feed_reusing` does, so a conversation sent again with one more
    /// message feeds only that message. Message text is never read as
    /// template markers. Returns the prompt's length in tokens.
    pub fn feed_messages(&mut self, messages: &[ChatMessage], thinking: bool) -> Result<usize> {
        let ids = self.rt.tokenizer.encode_messages(messages, thinking)?;
        self.feed_reusing(&ids)?;
        Ok(ids.len())
    }

    /// Feed `tokens` and return the logits after each of them (row i, of
    /// n_vocab floats, predicts the token after `tokens[i]`): perplexity's
    /// path. Generation may follow as after `feed`.
    pub fn feed_logits(&mut self, tokens: &[u32]) -> Result<Vec<f32>> {
        if tokens.is_empty() {
            return Ok(Vec::new());
        }
        let t0 = Instant::now();
        let rows = self.engine.prefill_all_logits(tokens)?;
        let n_vocab = self.engine.model.config.n_vocab;
        let last = &rows[rows.len() - n_vocab..];
        self.cands = top_candidates(last, self.sampler.candidates());
        self.fed(tokens, t0);
        Ok(rows)
    }

    fn fed(&mut self, tokens: &[u32], t0: Instant) {
        for &t in tokens {
            self.history.push(t);
            self.sampler.accept(t);
        }
        self.perf.prompt_tokens += tokens.len();
        self.perf.prompt_s += t0.elapsed().as_secs_f64();
    }

    /// Generation stops when the text reaches one of `stops`; the stop
    /// string and what follows it are never returned, and text that may
    /// still become one is held back (`held_text`). Empty strings are
    /// ignored, as llama.cpp does.
    pub fn set_stop_strings(&mut self, stops: &[String]) {
        self.stops = StopStrings::new(stops);
    }

    /// Sample with `opts` from now on (the penalties still see every token
    /// in the cache). Set it before feeding: the candidates already read
    /// back were chosen for the old settings.
    pub fn set_sampling(&mut self, opts: SamplerOptions) -> Result<()> {
        let sampler = Sampler::new(opts)?;
        self.engine.set_candidates(sampler.candidates())?;
        self.opts = opts;
        self.restart_sampler()
    }

    /// A fresh sampler that has seen the cache's tokens.
    fn restart_sampler(&mut self) -> Result<()> {
        self.sampler = Sampler::new(self.opts)?;
        for &t in &self.history {
            self.sampler.accept(t);
        }
        Ok(())
    }

    /// Text generated but not yet returned in a `Token` because it could
    /// begin a stop string; print it once generation has ended.
    pub fn held_text(&self) -> &str {
        self.stops.held()
    }

    /// Sample the next token, feed it back and return it; `None` when
    /// generation stops (`stop` says why). Decoding needs something fed
    /// first.
    pub fn next_token(&mut self) -> Result<Option<Token>> {
        if let Some(why) = self.stopped()? {
            self.stop = Some(why);
            return Ok(None);
        }
        let t0 = Instant::now();
        let id = self.sampler.sample(&self.cands)?;
        if self.rt.tokenizer.is_eog(id) {
            self.stop = Some(Stop::EndOfTurn);
            return Ok(None);
        }
        self.sampler.accept(id);
        let stepped = match self.sampler.pick_ahead() {
            Some(pick) => self.engine.step_ahead(id, pick),
            None => self.engine.step(id),
        };
        match stepped {
            Ok(c) => {
                self.cands = c;
                self.history.push(id);
                self.perf.gen_tokens += 1;
                self.perf.gen_s += t0.elapsed().as_secs_f64();
            }
            // The token is still the model's answer; it just cannot be fed.
            Err(Error::ContextFull { .. }) => self.full = true,
            Err(e) => return Err(e),
        }
        let piece = self.decoder.push(id)?;
        let text = self.stops.push(&piece);
        Ok(Some(Token { id, text }))
    }

    /// Why no token can be generated now, if so.
    fn stopped(&mut self) -> Result<Option<Stop>> {
        if self.cancel.take() {
            return Ok(Some(Stop::Cancelled));
        }
        if self.stops.take_hit() {
            return Ok(Some(Stop::StopString));
        }
        if self.full {
            return Ok(Some(Stop::ContextFull));
        }
        if self.cands.is_empty() {
            return Err(Error::InvalidArgument(
                "feed a prompt before generating".into(),
            ));
        }
        Ok(None)
    }

    /// An iterator over up to `max` generated tokens. An error (nothing
    /// fed yet, a GPU failure, corrupt logits) is yielded once and ends
    /// the iteration, so `for t in s.tokens(n)` never spins on it.
    pub fn tokens(&mut self, max: usize) -> Tokens<'_> {
        self.stop = None;
        self.stops.restart();
        self.cancel.clear();
        Tokens {
            session: self,
            left: max,
            failed: false,
        }
    }

    /// Generate up to `max` tokens, calling `on_token` with each; it returns
    /// false to stop. Returns the generated text (held-back text included)
    /// and why it stopped.
    pub fn generate(
        &mut self,
        max: usize,
        on_token: &mut dyn FnMut(&Token) -> bool,
    ) -> Result<(String, Stop)> {
        let mut text = String::new();
        let mut it = self.tokens(max);
        for t in &mut it {
            let t = t?;
            text.push_str(&t.text);
            if !on_token(&t) {
                it.session.stop = Some(Stop::Cancelled);
                break;
            }
        }
        text.push_str(self.held_text());
        Ok((text, self.stop.unwrap_or(Stop::Length)))
    }

    /// Why the last generation stopped (`None` while it runs or before any).
    pub fn stop(&self) -> Option<Stop> {
        self.stop
    }

    /// A handle that stops this session's feed or generation from any
    /// thread.
    pub fn cancel_handle(&self) -> CancelHandle {
        self.cancel.clone()
    }

    /// Listen to `handle` from now on instead of the session's own: a
    /// server makes one per request before a session takes it up.
    pub fn set_cancel_handle(&mut self, handle: CancelHandle) {
        self.cancel = handle;
    }

    /// Run the model on a throwaway token and forget it, as llama.cpp's
    /// warm-up does: a one-token prefill and `WARM_UP_STEPS` decode steps,
    /// so the driver's first-submission work and the GPU's clock ramp after
    /// the weights' upload happen here, not in the first prompt and tokens
    /// (without it, on an H200, `glmw generate -n 256` ran at 235 tok/s
    /// against 269 and its 24-token prompt at 190 against ~800). Only on
    /// an empty session: it would overwrite the cache.
    pub fn warm_up(&mut self) -> Result<()> {
        if !self.history.is_empty() {
            return Err(Error::InvalidArgument(
                "warm_up runs on an empty session (reset it first)".into(),
            ));
        }
        let t0 = Instant::now();
        let steps = WARM_UP_STEPS.min(self.n_ctx().saturating_sub(1));
        let result = self
            .engine
            .prefill(&[0])
            .and_then(|_| (0..steps).try_for_each(|_| self.engine.step(0).map(|_| ())));
        self.engine.reset();
        result?;
        log::info!(
            "warm-up ({steps} steps): {:.0} ms",
            t0.elapsed().as_secs_f64() * 1e3
        );
        Ok(())
    }

    /// Forget everything fed and generated; the sampler starts over.
    pub fn reset(&mut self) -> Result<()> {
        self.truncate(0)?;
        self.perf = Perf::default();
        Ok(())
    }

    /// Keep only the first `n` tokens of the cache (no change if it holds
    /// fewer); generation needs a feed after it.
    pub fn truncate(&mut self, n: usize) -> Result<()> {
        if n >= self.history.len() && !self.full {
            return Ok(());
        }
        self.engine.truncate(n);
        self.history.truncate(n);
        self.cands.clear();
        self.decoder = StreamDecoder::new(self.rt.tokenizer.clone());
        self.stop = None;
        self.stops.restart();
        self.full = false;
        self.restart_sampler()
    }

    /// Every token in the cache, in order.
    pub fn history(&self) -> &[u32] {
        &self.history
    }

    /// The next token's candidates (token id, logit), best first.
    pub fn candidates(&self) -> &Candidates {
        &self.cands
    }

    /// Tokens in the cache, and its capacity.
    pub fn pos(&self) -> usize {
        self.engine.pos()
    }

    pub fn n_ctx(&self) -> usize {
        self.engine.n_ctx()
    }

    pub fn tokenizer(&self) -> &Tokenizer {
        &self.rt.tokenizer
    }

    /// The runtime this session runs on.
    pub fn runtime(&self) -> &Runtime {
        &self.rt
    }

    /// Prompt and generation timings since the last reset.
    pub fn perf(&self) -> Perf {
        self.perf
    }

    /// GPU dispatches recorded per generated token.
    pub fn dispatches_per_token(&self) -> usize {
        self.engine.dispatches_per_token()
    }

    /// GPU memory: the runtime's weights, this session's KV cache, and all
    /// that glmw holds on the device.
    pub fn memory(&self) -> crate::engine::Memory {
        self.engine.memory()
    }
}

/// The `k` largest logits as candidates, best first (ties to the lower id).
fn top_candidates(logits: &[f32], k: usize) -> Candidates {
    let mut idx: Vec<u32> = (0..logits.len() as u32).collect();
    idx.sort_by(|&a, &b| {
        logits[b as usize]
            .total_cmp(&logits[a as usize])
            .then(a.cmp(&b))
    });
    idx.into_iter()
        .take(k)
        .map(|i| (i, logits[i as usize]))
        .collect()
}

/// Generated tokens, pulled one at a time (`Session::tokens`); ends at an
/// end-of-turn token, a full context, cancellation, the token limit, or
/// after yielding an error.
pub struct Tokens<'s> {
    session: &'s mut Session,
    left: usize,
    failed: bool,
}

impl Iterator for Tokens<'_> {
    type Item = Result<Token>;

    fn next(&mut self) -> Option<Result<Token>> {
        if self.failed {
            return None;
        }
        if self.left == 0 {
            self.session.stop.get_or_insert(Stop::Length);
            return None;
        }
        self.left -= 1;
        let next = self.session.next_token().transpose();
        self.failed = matches!(next, Some(Err(_)));
        next
    }
}

/// A session and its runtime move between threads (a server's workers).
#[allow(dead_code)]
fn assert_send() {
    fn is_send<T: Send>() {}
    fn is_send_sync<T: Send + Sync>() {}
    is_send::<Session>();
    is_send_sync::<Runtime>();
}
