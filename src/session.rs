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

use crate::engine::{Candidates, Engine, EngineOptions, Resident, DEFAULT_UBATCH};
use crate::error::{Error, Result};
use crate::gpu::{Gpu, GpuOptions};
use crate::model::{Config, Model};
use crate::sample::{Sampler, SamplerOptions};
use crate::tokenizer::{StreamDecoder, Tokenizer};

/// How to load a model.
#[derive(Clone, Copy, Debug)]
pub struct LoadOptions {
    /// Which GPU backend and kernel variant (`no_subgroups`).
    pub gpu: GpuOptions,
    /// Context length (KV cache rows) of each session.
    pub n_ctx: usize,
    /// Most prompt tokens prefilled at once.
    pub ubatch: usize,
}

impl Default for LoadOptions {
    fn default() -> Self {
        LoadOptions {
            gpu: GpuOptions::default(),
            n_ctx: 4096,
            ubatch: DEFAULT_UBATCH,
        }
    }
}

/// A model, its tokenizer and its weights resident on one GPU.
pub struct Runtime {
    model: Model,
    tokenizer: Tokenizer,
    gpu: Gpu,
    resident: Resident,
    opts: LoadOptions,
}

impl Runtime {
    /// Open the GGUF file at `path`, pick a GPU and upload the weights;
    /// `progress(done, total)` counts weight bytes.
    pub fn load(
        path: impl AsRef<Path>,
        opts: LoadOptions,
        progress: &mut dyn FnMut(u64, u64),
    ) -> Result<Runtime> {
        Self::from_model(Model::open(path)?, opts, progress)
    }

    /// The built-in model (glmw-tiny, [`crate::builtin`]: a small model of
    /// GLM-4.7-Flash's architecture trained on the King James Bible),
    /// loaded as `load` does: for trying the API with no model file.
    pub fn load_builtin(opts: LoadOptions, progress: &mut dyn FnMut(u64, u64)) -> Result<Runtime> {
        Self::from_model(crate::builtin::model()?, opts, progress)
    }

    fn from_model(
        model: Model,
        opts: LoadOptions,
        progress: &mut dyn FnMut(u64, u64),
    ) -> Result<Runtime> {
        let tokenizer = Tokenizer::from_gguf(&model.file)?;
        let gpu = Gpu::new(opts.gpu)?;
        let resident = Resident::upload(&model, &gpu, &engine_options(&opts), progress)?;
        Ok(Runtime {
            model,
            tokenizer,
            gpu,
            resident,
            opts,
        })
    }

    /// A new session with an empty KV cache of `LoadOptions::n_ctx` tokens.
    pub fn session(&self, sampling: SamplerOptions) -> Result<Session<'_>> {
        let engine = Engine::open(
            &self.model,
            &self.gpu,
            &self.resident,
            engine_options(&self.opts),
        )?;
        Session::new(engine, &self.tokenizer, sampling)
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
}

fn engine_options(o: &LoadOptions) -> EngineOptions {
    EngineOptions {
        n_ctx: o.n_ctx,
        ubatch: o.ubatch,
        ..Default::default()
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
}

/// One generated token and the text it completes (empty while a UTF-8
/// character is split across tokens).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Token {
    pub id: u32,
    pub text: String,
}

/// Stops a session's generation from another thread: the next token is not
/// produced (`Stop::Cancelled`). A cancel before generation starts is
/// forgotten.
#[derive(Clone, Debug, Default)]
pub struct CancelHandle(Arc<AtomicBool>);

impl CancelHandle {
    pub fn cancel(&self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

/// A conversation or document over a model: its KV cache, sampler and the
/// tokens seen so far.
pub struct Session<'a> {
    engine: Engine<'a>,
    tok: &'a Tokenizer,
    opts: SamplerOptions,
    sampler: Sampler,
    decoder: StreamDecoder<'a>,
    /// The next token's candidates (empty before anything is fed).
    cands: Candidates,
    history: Vec<u32>,
    cancel: CancelHandle,
    stop: Option<Stop>,
}

impl<'a> Session<'a> {
    /// A session over `engine` (its cache is reset), for callers that build
    /// engines themselves; `Runtime::session` is the usual way.
    pub fn new(
        mut engine: Engine<'a>,
        tok: &'a Tokenizer,
        sampling: SamplerOptions,
    ) -> Result<Session<'a>> {
        let sampler = Sampler::new(sampling)?;
        engine.set_candidates(sampler.candidates())?;
        engine.reset();
        Ok(Session {
            engine,
            tok,
            opts: sampling,
            sampler,
            decoder: tok.stream_decoder(),
            cands: Vec::new(),
            history: Vec::new(),
            cancel: CancelHandle::default(),
            stop: None,
        })
    }

    /// Tokenize `text` (special tokens such as `<|user|>` are recognised:
    /// this is the caller's own prompt, as llama.cpp reads one) and feed
    /// it; returns the number of tokens. For text that comes from users,
    /// use `chat::Chat`, or `Tokenizer::encode_chat` and `feed`, which keep
    /// it from being read as markers.
    pub fn feed_text(&mut self, text: &str) -> Result<usize> {
        let ids = self.tok.encode(text, true)?;
        self.feed(&ids)?;
        Ok(ids.len())
    }

    /// Feed `tokens` through the batched prefill. On error nothing is fed
    /// (a context overflow is `Error::ContextFull`).
    pub fn feed(&mut self, tokens: &[u32]) -> Result<()> {
        if tokens.is_empty() {
            return Ok(());
        }
        self.cands = self.engine.prefill(tokens)?;
        for &t in tokens {
            self.history.push(t);
            self.sampler.accept(t);
        }
        Ok(())
    }

    /// Sample the next token, feed it back and return it; `None` when
    /// generation stops (`stop` says why). Decoding needs something fed
    /// first.
    pub fn next_token(&mut self) -> Result<Option<Token>> {
        if self.cancel.0.swap(false, Ordering::SeqCst) {
            self.stop = Some(Stop::Cancelled);
            return Ok(None);
        }
        if self.history.is_empty() {
            return Err(Error::InvalidArgument(
                "feed a prompt before generating".into(),
            ));
        }
        let id = self.sampler.sample(&self.cands)?;
        if self.tok.is_eog(id) {
            self.stop = Some(Stop::EndOfTurn);
            return Ok(None);
        }
        match self.engine.step(id) {
            Ok(c) => self.cands = c,
            Err(Error::ContextFull { .. }) => {
                self.stop = Some(Stop::ContextFull);
                return Ok(None);
            }
            Err(e) => return Err(e),
        }
        self.history.push(id);
        self.sampler.accept(id);
        let text = self.decoder.push(id)?;
        Ok(Some(Token { id, text }))
    }

    /// An iterator over up to `max` generated tokens. An error (nothing
    /// fed yet, a GPU failure, corrupt logits) is yielded once and ends
    /// the iteration, so `for t in s.tokens(n)` never spins on it.
    pub fn tokens(&mut self, max: usize) -> Tokens<'_, 'a> {
        self.stop = None;
        self.cancel.0.store(false, Ordering::SeqCst);
        Tokens {
            session: self,
            left: max,
            failed: false,
        }
    }

    /// Generate up to `max` tokens, calling `on_token` with each; it returns
    /// false to stop. Returns the generated text and why it stopped.
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
        Ok((text, self.stop.unwrap_or(Stop::Length)))
    }

    /// Why the last generation stopped (`None` while it runs or before any).
    pub fn stop(&self) -> Option<Stop> {
        self.stop
    }

    /// A handle that stops this session's generation from any thread.
    pub fn cancel_handle(&self) -> CancelHandle {
        self.cancel.clone()
    }

    /// Forget everything fed and generated; the sampler starts over.
    pub fn reset(&mut self) -> Result<()> {
        self.engine.reset();
        self.history.clear();
        self.cands.clear();
        self.sampler = Sampler::new(self.opts)?;
        self.decoder = self.tok.stream_decoder();
        self.stop = None;
        Ok(())
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

    pub fn tokenizer(&self) -> &'a Tokenizer {
        self.tok
    }
}

/// Generated tokens, pulled one at a time (`Session::tokens`); ends at an
/// end-of-turn token, a full context, cancellation, the token limit, or
/// after yielding an error.
pub struct Tokens<'s, 'a> {
    session: &'s mut Session<'a>,
    left: usize,
    failed: bool,
}

impl Iterator for Tokens<'_, '_> {
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
