//! The decode plan: every buffer, bind group, pipeline and workgroup count
//! of one token's forward pass, built once at load. Running a token is then:
//! write the step uniform and the embedding row, record `dispatches` into
//! one compute pass, submit, read back the top-k candidates (a few bytes).
//! It and the prefill plan are two lowerings of one recipe
//! (`model::recipe`): `lower` records and checks which recipe steps each
//! dispatch computes.
//!
//! Per MoE block (13 dispatches, 9 barriers): q_a ∥ kv_a (attn_norm fused
//! into both), q_b (q_a_norm fused) ∥ kv_append, k_b absorb, attention, v_b
//! (merging the attention splits), attn_output (+ residual), the router
//! (ffn_norm fused; the logits, then the choice in the last workgroup) ∥
//! shared gate+up (ffn_norm fused),
//! experts gate+up (ffn_norm fused) ∥ shared down, experts down (+
//! weighted combine + shared output + residual). `a ∥ b`: b follows a
//! with no barrier between them, so the GPU overlaps them. The output head
//! adds rms_norm, the head matvec and two top-k passes.

mod builder;
mod decode;
mod lower;
pub mod prefill;

pub use lower::Traced;

/// The decode plan of a model over its resident weights, appending to and
/// attending over a session's caches (`kv_caches`).
pub use decode::build;

use super::context::Gpu;
use super::ops::{self, Dispatch};
use crate::error::{Error, Result};
use crate::model::Model;

/// Most candidates the top-k passes can return per token.
pub const MAX_CANDIDATES: usize = 64;

/// The plan's buffers that the engine reads or writes per token.
pub struct Io {
    /// The token to run (one u32); the plan gathers its embedding.
    pub token: wgpu::Buffer,
    pub x: wgpu::Buffer,
    pub step: wgpu::Buffer,
    pub logits: wgpu::Buffer,
    pub cand_v: wgpu::Buffer,
    pub cand_i: wgpu::Buffer,
    pub topk_params: [wgpu::Buffer; 2],
    pub topk_wg: u32,
    /// The recipe's intermediates the plan leaves in buffers of their
    /// own, in dispatch order, each with the dispatch after which it can
    /// be read.
    pub traced: Vec<Traced>,
}

/// Where one block's dispatches sit in `Plan::dispatches`.
#[derive(Clone, Debug)]
pub struct BlockRange {
    pub layer: usize,
    pub moe: bool,
    pub attn: std::ops::Range<usize>,
    pub ffn: std::ops::Range<usize>,
}

pub struct Plan {
    /// A token's dispatches once the context is longer than
    /// `ops::short_attention_max` (`at` picks).
    pub dispatches: Vec<Dispatch>,
    /// The same with the short-context attention (attention_head.wgsl) in
    /// each attention slot: the same buffers, so the same barriers.
    pub short: Vec<Dispatch>,
    pub blocks: Vec<BlockRange>,
    /// Where the output head (result norm, head matvec, top-k) starts in
    /// `dispatches`.
    pub head_start: usize,
    pub io: Io,
    /// The long-context attention is attention_coop.wgsl (`attend`).
    pub coop_attention: bool,
}

impl Plan {
    /// The decode lowering of the output head, over the row in `io.x`. A
    /// prefill's last token runs it too (one row is what this lowering is
    /// for): the engine copies that token's residual row into `io.x`.
    pub fn head(&self) -> &[Dispatch] {
        &self.dispatches[self.head_start..]
    }

    /// Whether a token that attends over `n_pos` positions runs the
    /// long-context attention (`dispatches`), not attention_head (`short`).
    fn long(&self, n_pos: usize) -> bool {
        n_pos > ops::short_attention_max(self.coop_attention)
    }

    /// The attention splits of a token that attends over `n_pos`
    /// positions, for the kernel `at` runs for it.
    pub fn splits(&self, n_pos: usize) -> u32 {
        match self.long(n_pos) && self.coop_attention {
            true => ops::attention_coop_splits(n_pos),
            false => ops::attention_splits(n_pos),
        }
    }

    /// The dispatches of a token that attends over `n_pos` positions.
    pub fn at(&self, n_pos: usize) -> &[Dispatch] {
        match self.long(n_pos) {
            true => &self.dispatches,
            false => &self.short,
        }
    }
}

/// Check that the kernels handle `model`'s shapes and that an `n_ctx`-token
/// cache fits in one binding of at most `limit` bytes.
pub fn check(model: &Model, n_ctx: usize, limit: u64) -> Result<()> {
    let c = &model.config;
    if c.n_lora_kv > ops::MAX_LATENT
        || c.n_embd_head_qk_rope > ops::MAX_ROPE
        || c.n_lora_kv % 64 != 0
        || c.kv_row() % 8 != 0
    {
        return Err(Error::Unsupported(format!(
            "latent width {} / rope width {}: the attention kernels handle up to {} / {}",
            c.n_lora_kv,
            c.n_embd_head_qk_rope,
            ops::MAX_LATENT,
            ops::MAX_ROPE
        )));
    }
    let n_expert = c.moe_dims().0;
    if n_expert > ops::ROUTER_MAX_EXPERT {
        return Err(Error::Unsupported(format!(
            "{} experts; the router kernel handles up to {}",
            n_expert,
            ops::ROUTER_MAX_EXPERT
        )));
    }
    let cache_bytes = cache_bytes(model, n_ctx)?;
    if cache_bytes > limit {
        return Err(Error::InvalidArgument(format!(
            "a {n_ctx}-token KV cache needs {} MiB per layer; this adapter binds at most {} MiB: use a shorter context",
            cache_bytes >> 20,
            limit >> 20
        )));
    }
    Ok(())
}

/// Bytes of one layer's latent cache (f16 rows of `kv_row` values); the
/// context length comes from the user, so the product is checked.
fn cache_bytes(model: &Model, n_ctx: usize) -> Result<u64> {
    (n_ctx as u64)
        .checked_mul(2 * model.config.kv_row() as u64)
        .ok_or_else(|| {
            Error::InvalidArgument(format!(
                "a {n_ctx}-token KV cache is larger than any GPU: use a shorter context"
            ))
        })
}

/// One latent KV cache per layer, owned by a session and bound by its plans.
pub fn kv_caches(gpu: &Gpu, model: &Model, n_ctx: usize) -> Result<Vec<wgpu::Buffer>> {
    // attention_coop.wgsl reads whole tiles: at least one tile of rows.
    let rows = match ops::attention_coop_fits(gpu, model.config.n_embd_head_qk_rope) {
        true => n_ctx.max(ops::ATTENTION_COOP_TILE),
        false => n_ctx,
    };
    let bytes = cache_bytes(model, rows)?;
    (0..model.config.n_layer)
        .map(|il| gpu.scratch(&format!("kv_cache-{il}"), bytes))
        .collect()
}

/// Params of top-k pass 1 (`first`) or 2 for `k` candidates out of `n_vocab`.
pub fn topk_params(n_vocab: u32, n_wg: u32, k: u32, first: bool) -> ops::TopKParams {
    if first {
        ops::TopKParams {
            n: n_vocab,
            len: n_vocab.div_ceil(n_wg),
            k,
            _pad: 0,
        }
    } else {
        ops::TopKParams {
            n: n_wg * k,
            len: n_wg * k,
            k,
            _pad: 0,
        }
    }
}
