//! The GPU decode engine: a model's weights on one device, its KV cache and
//! the pre-recorded plan (`gpu::plan`). `step` runs one token and returns the
//! top candidates for the next; nothing is allocated on the GPU per token.

mod decode;
mod profile;

pub use decode::{HostTimes, Pick, PickParams};

pub use profile::TokenProfile;

use crate::error::{check_finite, Error, Result};
use crate::gpu::kernels::Kernel;
use crate::gpu::ops::PickBindings;
use crate::gpu::plan::prefill::{self, Prefill};
use crate::gpu::plan::{self, Plan, MAX_CANDIDATES};
use crate::gpu::resident::ResidentWeights;
use crate::gpu::rope;
use crate::gpu::{ops, Gpu, Pipelines};
use crate::model::Model;
pub use crate::shared::Shared;
use std::sync::Arc;

/// Typed engine options (the CLI's `--ctx`).
#[derive(Clone, Copy, Debug)]
pub struct EngineOptions {
    /// Context length (KV cache rows).
    pub n_ctx: usize,
    /// Candidates returned per token (1 for greedy decoding).
    pub candidates: usize,
    /// Split weight buffers at this size even if the adapter allows more
    /// (tests use it to exercise splitting on small models).
    pub max_binding: Option<u64>,
    /// Kernel variant; `None` takes the device's (`GpuOptions::no_subgroups`).
    pub variant: Option<crate::gpu::Variant>,
    /// Most prompt tokens a prefill chunk processes at once (`--ubatch`).
    pub ubatch: usize,
}

/// Default prefill chunk (`EngineOptions::ubatch`).
pub const DEFAULT_UBATCH: usize = 512;

impl Default for EngineOptions {
    fn default() -> Self {
        EngineOptions {
            n_ctx: 4096,
            candidates: 1,
            max_binding: None,
            variant: None,
            ubatch: DEFAULT_UBATCH,
        }
    }
}

/// A token's top candidates, best first: (token id, logit).
pub type Candidates = Vec<(u32, f32)>;

/// A model's pipelines and weights on one GPU, uploaded once and shared by
/// every engine (session) opened over them; cloning is cheap.
#[derive(Clone)]
pub struct Resident {
    pipes: Arc<Pipelines>,
    weights: Arc<ResidentWeights>,
    /// Largest buffer binding the plans may use.
    limit: u64,
    /// Bytes of GPU memory the uploaded weights take.
    weight_bytes: u64,
}

/// GPU memory an engine holds, in bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Memory {
    /// The uploaded weights (shared by every session of a runtime).
    pub weights: u64,
    /// This session's KV cache.
    pub kv_cache: u64,
    /// Everything glmw has allocated on the device: weights, every
    /// session's KV cache, scratch and readback buffers.
    pub device_total: u64,
}

impl Resident {
    /// Build the pipelines of `opts.variant` and upload `model`'s weights
    /// (checking first that `opts` can be served, so a bad context fails
    /// before a long upload). `progress(done, total)` counts weight bytes.
    pub fn upload(
        model: &Model,
        gpu: &Gpu,
        opts: &EngineOptions,
        progress: &mut dyn FnMut(u64, u64),
    ) -> Result<Resident> {
        check_options(opts)?;
        let caps = match opts.variant {
            Some(v) => gpu.with_variant(v)?,
            None => gpu.caps.clone(),
        };
        let t0 = std::time::Instant::now();
        let pipes = Pipelines::new(gpu, &caps)?;
        log::info!("pipelines: {:.2} s", t0.elapsed().as_secs_f64());
        let mut limit = gpu.caps.max_storage_binding.min(gpu.caps.max_buffer);
        if let Some(m) = opts.max_binding {
            limit = limit.min(m);
        }
        plan::check(model, opts.n_ctx, limit)?;
        let before = gpu.bytes_allocated();
        let weights = gpu.scoped("uploading the weights", || {
            let w = ResidentWeights::upload(gpu, model, limit, progress)?;
            gpu.wait()?;
            Ok(w)
        })?;
        Ok(Resident {
            pipes: Arc::new(pipes),
            weights: Arc::new(weights),
            limit,
            // Nothing else allocates on this device while a runtime uploads.
            weight_bytes: gpu.bytes_allocated().saturating_sub(before),
        })
    }
}

fn check_options(opts: &EngineOptions) -> Result<()> {
    if opts.n_ctx == 0 {
        return Err(Error::InvalidArgument(
            "the context must be at least 1 token".into(),
        ));
    }
    // Positions are u32 in the kernels' step records.
    if opts.n_ctx > u32::MAX as usize {
        return Err(Error::InvalidArgument(format!(
            "a context of {} tokens is above {}, the most positions the kernels address",
            opts.n_ctx,
            u32::MAX
        )));
    }
    if opts.ubatch == 0 {
        return Err(Error::InvalidArgument(
            "the prefill batch (ubatch) must be at least 1 token".into(),
        ));
    }
    Ok(())
}

pub struct Engine<'a> {
    pub model: Shared<'a, Model>,
    pub gpu: Shared<'a, Gpu>,
    /// Shared by every session of one load.
    resident: Resident,
    /// This session's latent KV cache, one buffer per layer (bound by
    /// both plans).
    caches: Vec<wgpu::Buffer>,
    plan: Plan,
    prefill: Prefill,
    /// The prefill's all-rows output head, built on first use.
    head: Option<prefill::Head>,
    n_ctx: usize,
    pos: usize,
    k: usize,
    /// Candidate readbacks: a step's, and the step queued behind it.
    readback: [wgpu::Buffer; decode::SLOTS],
    /// The readback slot of the next submission.
    slot: usize,
    logits_readback: wgpu::Buffer,
    bytes: Vec<u8>,
    timer: Option<crate::gpu::profile::Timer>,
    /// The next token's command buffer, recorded while the GPU runs the
    /// current one (it does not depend on the token: the embedding and the
    /// step uniform are written just before submitting).
    prepared: Option<decode::Prepared>,
    /// The step queued on the GPU's own pick (`step_ahead`).
    ahead: Option<decode::Ahead>,
    /// pick.wgsl over the plan's candidates into its token id, and its
    /// params (written before each sampled step queued ahead).
    pick: ops::Dispatch,
    pick_params: wgpu::Buffer,
    ahead_used: usize,
    ahead_redone: usize,
    host: HostTimes,
}

impl Drop for Engine<'_> {
    /// Let the GPU finish what this engine queued (a step queued ahead is
    /// never read back) before its buffers go: a process that exits right
    /// after would otherwise tear the driver down under running work, which
    /// Mesa's lavapipe answered with "double free or corruption" at a test
    /// binary's exit.
    fn drop(&mut self) {
        self.gpu.idle();
    }
}

impl<'a> Engine<'a> {
    /// Upload `model` and build the plan. `progress(done, total)` is called
    /// as weight bytes go up.
    pub fn load(
        model: impl Into<Shared<'a, Model>>,
        gpu: impl Into<Shared<'a, Gpu>>,
        opts: EngineOptions,
        progress: &mut dyn FnMut(u64, u64),
    ) -> Result<Engine<'a>> {
        let (model, gpu) = (model.into(), gpu.into());
        let r = Resident::upload(&model, &gpu, &opts, progress)?;
        Engine::open(model, gpu, &r, opts)
    }

    /// An engine over weights already resident (`Resident::upload`) with
    /// `opts`' context, candidates and ubatch (its variant and binding cap
    /// are the resident's).
    pub fn open(
        model: impl Into<Shared<'a, Model>>,
        gpu: impl Into<Shared<'a, Gpu>>,
        resident: &Resident,
        opts: EngineOptions,
    ) -> Result<Engine<'a>> {
        let (model, gpu) = (model.into(), gpu.into());
        check_options(&opts)?;
        plan::check(&model, opts.n_ctx, resident.limit)?;
        gpu.clone().scoped("opening a session", || {
            Self::open_checked(model, gpu, resident, opts)
        })
    }

    fn open_checked(
        model: Shared<'a, Model>,
        gpu: Shared<'a, Gpu>,
        resident: &Resident,
        opts: EngineOptions,
    ) -> Result<Engine<'a>> {
        let c = &model.config;
        if opts.n_ctx > c.n_ctx_train.max(1) {
            log::warn!(
                "context {} is longer than the model was trained for ({})",
                opts.n_ctx,
                c.n_ctx_train
            );
        }
        let (pipes, weights) = (&resident.pipes, &resident.weights);
        let c = &model.config;
        let t0 = std::time::Instant::now();
        let caches = plan::kv_caches(&gpu, &model, opts.n_ctx)?;
        let plan = plan::build(&gpu, pipes, &model, weights, &caches)?;
        let ubatch = opts.ubatch.min(opts.n_ctx);
        let prefill = prefill::build(&gpu, pipes, &model, weights, &caches, ubatch)?;
        let readback = [0, 1].map(|_| gpu.readback("candidates", decode::SLOT_BYTES));
        let [a, b] = readback;
        let readback = [a?, b?];
        let logits_readback = gpu.readback("logits", 4 * c.n_vocab as u64)?;
        gpu.queue.submit([]);
        gpu.wait()?;
        let pick_params = gpu.uniform("pick", &PickParams::default());
        let io = &plan.io;
        let pick_bindings = PickBindings {
            p: &pick_params,
            cand_v: &io.cand_v,
            cand_i: &io.cand_i,
            token: &io.token,
        };
        let pick = ops::Dispatch::new(&gpu, pipes, Kernel::Pick, &pick_bindings, [1, 1, 1])?;
        log::info!("KV cache and plans: {:.2} s", t0.elapsed().as_secs_f64());
        let timer = crate::gpu::profile::Timer::new(&gpu);
        let mut e = Engine {
            model,
            gpu,
            resident: resident.clone(),
            caches,
            plan,
            prefill,
            head: None,
            n_ctx: opts.n_ctx,
            pos: 0,
            k: 0,
            readback,
            slot: 0,
            logits_readback,
            bytes: vec![0; decode::SLOT_BYTES as usize],
            timer,
            prepared: None,
            ahead: None,
            pick,
            pick_params,
            ahead_used: 0,
            ahead_redone: 0,
            host: HostTimes::default(),
        };
        e.set_candidates(opts.candidates)?;
        Ok(e)
    }

    /// How many candidates `step` returns (1..=64).
    pub fn set_candidates(&mut self, k: usize) -> Result<()> {
        if !(1..=MAX_CANDIDATES).contains(&k) {
            return Err(Error::InvalidArgument(format!(
                "{k} candidates per token; the GPU top-k returns 1 to {MAX_CANDIDATES}"
            )));
        }
        if k != self.k {
            let io = &self.plan.io;
            let n = self.model.config.n_vocab as u32;
            for (buf, first) in io.topk_params.iter().zip([true, false]) {
                let p = plan::topk_params(n, io.topk_wg, k as u32, first);
                self.gpu.queue.write_buffer(buf, 0, bytemuck::bytes_of(&p));
            }
            self.k = k;
            self.prepared = None;
        }
        Ok(())
    }

    /// Tokens in the cache (the position of the next token).
    pub fn pos(&self) -> usize {
        self.pos
    }

    pub fn n_ctx(&self) -> usize {
        self.n_ctx
    }

    /// Forget the cache; the next token goes to position 0.
    pub fn reset(&mut self) {
        self.truncate(0);
    }

    /// Keep only the first `n` tokens of the cache (fewer held: nothing
    /// changes), so a prompt sharing a prefix with it feeds only the rest.
    pub fn truncate(&mut self, n: usize) {
        if n < self.pos {
            self.pos = n;
            // Recorded for the old depth's attention kernel.
            self.prepared = None;
        }
    }

    /// Weight matrices stored in more than one buffer (binding limit).
    pub fn matrices_split(&self) -> usize {
        self.resident
            .weights
            .matrices()
            .iter()
            .filter(|m| m.parts.len() > 1)
            .count()
    }

    /// Dispatches recorded per token.
    pub fn dispatches_per_token(&self) -> usize {
        self.plan.dispatches.len()
    }

    /// The GPU memory behind this engine (`Memory`).
    pub fn memory(&self) -> Memory {
        Memory {
            weights: self.resident.weight_bytes,
            kv_cache: self.caches.iter().map(|b| b.size()).sum(),
            device_total: self.gpu.bytes_allocated(),
        }
    }

    pub fn variant(&self) -> crate::gpu::Variant {
        self.resident.pipes.variant
    }

    /// The prefill's matmuls run on cooperative matrices (`Caps::coop`).
    pub fn coop(&self) -> bool {
        self.gpu.caps.coop
    }

    /// Run `tokens` (a prompt, or a chat turn's new text) from the current
    /// position in chunks of up to `ubatch`; returns the candidates for the
    /// token after the last one. The same cache results as `step` on each
    /// token, many times faster for long prompts.
    pub fn prefill(&mut self, tokens: &[u32]) -> Result<Candidates> {
        let q = self.run_prefill(tokens, false)?;
        Ok(self.read_candidates(&q)?.0)
    }

    /// `prefill`, returning the last token's logits (tests, `glmw logits`).
    pub fn prefill_logits(&mut self, tokens: &[u32]) -> Result<Vec<f32>> {
        let q = self.run_prefill(tokens, true)?;
        self.read_logits(Some(q.index))
    }

    /// Prefill `tokens` and return the logits of every one of them (row i
    /// predicts the token after tokens[i]), n_vocab floats per token: the
    /// batched path for perplexity. The first call builds the output head
    /// over whole chunks (ubatch × n_vocab floats of GPU memory, twice:
    /// the logits and their readback copy).
    pub fn prefill_all_logits(&mut self, tokens: &[u32]) -> Result<Vec<f32>> {
        self.check_prefill(tokens)?;
        if self.head.is_none() {
            let r = &self.resident;
            let h = self
                .prefill
                .head(&self.gpu, &r.pipes, &self.model, &r.weights)?;
            self.head = Some(h);
        }
        let n_vocab = self.model.config.n_vocab;
        let mut out = vec![0f32; tokens.len() * n_vocab];
        for (i, chunk) in tokens.chunks(self.prefill.ubatch).enumerate() {
            let n = chunk.len();
            let ch = self.write_chunk(chunk)?;
            let (pf, head) = (&self.prefill, self.head.as_ref().expect("built above"));
            let mut enc = self.record_chunk(ch);
            {
                let mut pass = enc.begin_compute_pass(&Default::default());
                pf.record_head(head, &mut pass, ch);
            }
            let bytes = (4 * n * n_vocab) as u64;
            enc.copy_buffer_to_buffer(&head.logits, 0, &head.readback, 0, bytes);
            self.gpu.queue.submit([enc.finish()]);
            let first = i * self.prefill.ubatch * n_vocab;
            let rows = &mut out[first..first + n * n_vocab];
            self.gpu
                .map_read(&head.readback, bytemuck::cast_slice_mut(rows))?;
            self.pos += n;
        }
        check_finite(&out)?;
        Ok(out)
    }

    /// Most tokens a prefill chunk takes.
    pub fn ubatch(&self) -> usize {
        self.prefill.ubatch
    }

    /// Check `tokens` against the vocabulary and the room left in the
    /// cache.
    fn check_tokens(&self, tokens: &[u32]) -> Result<()> {
        let n_vocab = self.model.config.n_vocab;
        if let Some(t) = tokens.iter().find(|&&t| t as usize >= n_vocab) {
            return Err(Error::InvalidArgument(format!(
                "token id {t} is outside the vocabulary (0..{n_vocab})"
            )));
        }
        if self.pos + tokens.len() > self.n_ctx {
            return Err(Error::ContextFull { n_ctx: self.n_ctx });
        }
        Ok(())
    }

    /// The step record (position, rope table, attention splits) of a token
    /// at `pos`.
    fn step_at(&self, pos: usize) -> ops::Step {
        let c = &self.model.config;
        let cs = rope::cos_sin(
            pos,
            c.n_embd_head_qk_rope,
            c.rope_freq_base,
            c.yarn.as_ref(),
        );
        ops::Step {
            n_split: self.plan.splits(pos + 1),
            ..ops::Step::new(pos, &cs)
        }
    }

    /// Submit `tokens` chunk by chunk through the prefill plan; the last
    /// chunk also runs the output head and copies its results out.
    fn run_prefill(&mut self, tokens: &[u32], want_logits: bool) -> Result<decode::Queued> {
        self.check_prefill(tokens)?;
        // The next token's command buffer was recorded for the depth before
        // this prefill (its attention kernel depends on it).
        self.prepared = None;
        self.ahead = None;
        let slot = self.slot;
        self.slot = (slot + 1) % decode::SLOTS;
        let mut last = None;
        let n_embd = self.model.config.n_embd as u64;
        let chunks: Vec<&[u32]> = tokens.chunks(self.prefill.ubatch).collect();
        for (i, chunk) in chunks.iter().enumerate() {
            let n = chunk.len() as u32;
            let ch = self.write_chunk(chunk)?;
            let pf = &self.prefill;
            let mut enc = self.record_chunk(ch);
            if i + 1 == chunks.len() {
                let last = 4 * n_embd * (n as u64 - 1);
                enc.copy_buffer_to_buffer(&pf.x, last, &self.plan.io.x, 0, 4 * n_embd);
                {
                    let mut pass = enc.begin_compute_pass(&Default::default());
                    for d in self.plan.head() {
                        d.record(&mut pass);
                    }
                }
                self.copy_results(&mut enc, slot, want_logits);
            }
            last = Some(self.gpu.queue.submit([enc.finish()]));
            self.pos += chunk.len();
        }
        let index =
            last.ok_or_else(|| Error::InvalidArgument("prefill needs at least one token".into()))?;
        Ok(decode::Queued { slot, index })
    }

    /// A prefill's tokens: at least one, in the vocabulary, and room for
    /// them in the cache.
    fn check_prefill(&self, tokens: &[u32]) -> Result<()> {
        if tokens.is_empty() {
            return Err(Error::InvalidArgument(
                "prefill needs at least one token".into(),
            ));
        }
        self.check_tokens(tokens)
    }

    /// Record chunk `ch`'s layer stack: every part but the last submitted
    /// as soon as it is recorded (the GPU runs it while the host records
    /// on), the last into the encoder returned, for the caller to add to
    /// and submit.
    fn record_chunk(&self, ch: prefill::Chunk) -> wgpu::CommandEncoder {
        let encode = |part| {
            let mut enc = self.gpu.device.create_command_encoder(&Default::default());
            {
                let mut pass = enc.begin_compute_pass(&Default::default());
                self.prefill.record(&mut pass, ch, part);
            }
            enc
        };
        for part in 0..prefill::PARTS - 1 {
            self.gpu.queue.submit([encode(part).finish()]);
        }
        encode(prefill::PARTS - 1)
    }

    /// Upload a prefill chunk's token ids, step records and tables; the
    /// chunk to record.
    fn write_chunk(&self, chunk: &[u32]) -> Result<prefill::Chunk> {
        let pf = &self.prefill;
        let ch = pf.chunk(chunk.len(), self.pos);
        self.gpu
            .queue
            .write_buffer(&pf.tokens, 0, bytemuck::cast_slice(chunk));
        let steps: Vec<ops::Step> = (0..chunk.len())
            .map(|j| ops::Step {
                n_split: ch.splits(),
                ..self.step_at(self.pos + j)
            })
            .collect();
        self.gpu
            .queue
            .write_buffer(&pf.steps, 0, bytemuck::cast_slice(&steps));
        pf.write_chunk(&self.gpu, ch);
        Ok(ch)
    }
}
