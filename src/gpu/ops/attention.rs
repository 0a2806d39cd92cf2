//! Host side of the attention kernels and the KV cache: the per-token
//! `Step` record, kv_append, attention.wgsl, attention_head.wgsl,
//! attention_coop.wgsl and attention_merge.wgsl (params, the limits they
//! share with the host, how a context is split) and their dispatches.

use super::{
    AttentionBindings, AttentionCoopBindings, AttentionCoopOverrides, AttentionOverrides, Dispatch,
};
use crate::error::{Error, Result};
use crate::gpu::context::Gpu;
use crate::gpu::kernels::{Kernel, Pipelines};
use crate::model::Config;

/// Per-token values shared by kv_append and attention (WGSL `struct Step`).
#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
pub struct Step {
    pub pos: u32,
    pub n_pos: u32,
    /// Attention splits for this position (`attention_splits`).
    pub n_split: u32,
    pub _pad: u32,
    /// (cos, sin, 0, 0) of each rope pair at `pos`.
    pub rope: [[f32; 4]; 64],
}

impl Step {
    pub fn new(pos: usize, cos_sin: &[(f32, f32)]) -> Step {
        let mut rope = [[0f32; 4]; 64];
        for (r, &(c, s)) in rope.iter_mut().zip(cos_sin) {
            *r = [c, s, 0.0, 0.0];
        }
        Step {
            pos: pos as u32,
            n_pos: pos as u32 + 1,
            n_split: attention_splits(pos + 1),
            _pad: 0,
            rope,
        }
    }
}

/// Most attention splits per token: one attention workgroup each (all heads
/// of a block), so 16K positions put two on each of ~128 SMs (one each
/// left an SM's FMA pipes idle behind the tile's loads and barriers). The
/// partial buffers are sized for it, and attn_v_b's merge (matvec.wgsl
/// COMBINE) holds this many split weights in workgroup memory.
pub const MAX_SPLITS: u32 = 256;

/// Positions per attention tile (shaders/attention.wgsl `TILE`).
pub const ATTENTION_TILE: usize = 32;

/// Heads per attention workgroup (shaders/attention.wgsl `HB`).
pub const ATTENTION_HEADS: u32 = 20;

/// Splits of `n_pos` positions: chunks of at least one tile, at most
/// MAX_SPLITS of them, so short contexts launch few workgroups and long
/// ones enough to fill the GPU.
pub fn attention_splits(n_pos: usize) -> u32 {
    let chunk = n_pos.div_ceil(MAX_SPLITS as usize).max(ATTENTION_TILE);
    n_pos.div_ceil(chunk).max(1) as u32
}

/// Attention workgroups along y: blocks of ATTENTION_HEADS heads.
pub fn attention_head_blocks(n_head: usize) -> u32 {
    (n_head as u32).div_ceil(ATTENTION_HEADS)
}

#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
pub struct KvAppendParams {
    pub n_kv: u32,
    pub n_rot: u32,
    pub eps: f32,
    /// Planes of ckv (`matmul_k_parts`; 1) and the floats between them.
    pub parts: u32,
    pub plane: u32,
    /// Where the first plane starts in the ckv binding (floats).
    pub off: u32,
    pub _pad: [u32; 2],
}

/// Attention's params; the latent width is the pipeline's `N_KV` override
/// (`attention`).
#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
pub struct AttentionParams {
    pub n_rot: u32,
    pub n_nope: u32,
    pub scale: f32,
    /// Split slots per head in the partial buffers (MAX_SPLITS).
    pub split_stride: u32,
    pub n_head: u32,
    pub _pad: [u32; 3],
}

impl AttentionParams {
    /// `c`'s attention with `split_stride` split slots per head.
    pub fn new(c: &Config, split_stride: u32) -> AttentionParams {
        AttentionParams {
            n_rot: c.n_embd_head_qk_rope as u32,
            n_nope: c.n_embd_head_qk_nope as u32,
            scale: c.kq_scale(),
            split_stride,
            n_head: c.n_head as u32,
            _pad: [0; 3],
        }
    }
}

/// Widest latent row the attention kernels hold (n_lora_kv): attention.wgsl
/// takes it as its `N_KV` override (score loop trip count; the manifest's
/// values go up to it), attention_head.wgsl stages [q_abs ‖ q_pe] of one
/// head in workgroup memory (`qs`), and matvec.wgsl's COMBINE merges a
/// head's splits into a row of this width (`xs`).
pub const MAX_LATENT: usize = 512;
/// Widest rope part (n_embd_head_qk_rope): attention.wgsl stages the roped
/// q_pe of its heads in workgroup memory (`qr`, MAX_ROPE / 4 vec4s a head).
pub const MAX_ROPE: usize = 64;

/// Longest context (positions attended) the decode runs attention_head.wgsl
/// for: one workgroup per head and split, where attention.wgsl runs one
/// per split for all 20 heads and, with few splits, leaves the GPU idle
/// behind each workgroup's tile. On an H100 the per-head kernel was 9%
/// faster per token at depth ~100 and the all-heads kernel 6% faster at
/// 4096 (journal); the per-layer gap closes near 2048.
pub const SHORT_ATTENTION_MAX: usize = 2048;

/// The same where the long-context kernel is attention_coop.wgsl: on an
/// H100 it gave tg32 @ d2000 185.4 tok/s against 173.0 with the per-head
/// kernel, @ d1500 184.5 against 180.3, and tied at 1000 (session 13).
pub const COOP_SHORT_ATTENTION_MAX: usize = 1024;

/// The longest context the decode runs attention_head.wgsl for, where the
/// long-context kernel is attention_coop.wgsl (`coop`) or attention.wgsl.
pub fn short_attention_max(coop: bool) -> usize {
    match coop {
        true => COOP_SHORT_ATTENTION_MAX,
        false => SHORT_ATTENTION_MAX,
    }
}

/// The most splits a token on attention_head.wgsl can have: its grid's
/// width in the short-context plan. A full MAX_SPLITS grid launched 5,120
/// workgroups a layer, nearly all empty at short contexts: H200 tg128
/// +0.7%, @ d512 +2.8% without them (docs/perf-journal.md, session 31).
pub fn short_attention_splits(coop: bool) -> u32 {
    attention_splits(short_attention_max(coop))
}

/// attention_head.wgsl's params.
#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
pub struct AttentionHeadParams {
    pub n_kv: u32,
    pub n_rot: u32,
    pub n_nope: u32,
    pub scale: f32,
    /// Split slots per head in the partial buffers (MAX_SPLITS).
    pub split_stride: u32,
    pub n_head: u32,
    pub _pad: [u32; 2],
}

impl AttentionHeadParams {
    pub fn new(c: &Config, split_stride: u32) -> AttentionHeadParams {
        AttentionHeadParams {
            n_kv: c.n_lora_kv as u32,
            n_rot: c.n_embd_head_qk_rope as u32,
            n_nope: c.n_embd_head_qk_nope as u32,
            scale: c.kq_scale(),
            split_stride,
            n_head: c.n_head as u32,
            _pad: [0; 2],
        }
    }
}

/// An attention dispatch over latent rows `n_kv` wide (a multiple of 64 up
/// to MAX_LATENT, as plan::check requires).
pub fn attention(
    gpu: &Gpu,
    pipes: &Pipelines,
    n_kv: usize,
    b: &AttentionBindings,
    workgroups: [u32; 3],
) -> Result<Dispatch> {
    let n_kv = u32::try_from(n_kv)
        .map_err(|_| Error::InvalidArgument(format!("latent width {n_kv} is too large")))?;
    let o = AttentionOverrides { n_kv };
    Dispatch::with(gpu, pipes, Kernel::Attention, &o, b, workgroups)
}

/// (token, head) rows per attention_coop.wgsl workgroup (`M`).
pub const ATTENTION_COOP_ROWS: u32 = 32;

/// Positions per attention_coop.wgsl tile (`T`).
pub const ATTENTION_COOP_TILE: usize = 32;

/// The widest cache row attention_coop.wgsl stages queries for (`MAX_ROW`).
pub const ATTENTION_COOP_ROW: usize = MAX_LATENT + MAX_ROPE;

/// Most splits attention_coop.wgsl's decode takes: about one workgroup
/// per SM of an H100 (132). Each workgroup pays a fixed cost (its queries,
/// its outputs, its part of attn_v_b's merge), so a second wave of short
/// splits costs more than longer splits: at 16384 positions 128 splits of
/// 128 gave tg64 149.5 tok/s against 130.5 for 256 of 64, and at 4096
/// splits of 64 positions 168.3 against 165.7 for 32 and 160.0 for 128
/// (H100, session 11).
pub const ATTENTION_COOP_SPLITS: usize = 128;

/// attention_coop.wgsl's splits of `n_pos` positions: each a whole number
/// of tiles, at least two, and at most ATTENTION_COOP_SPLITS splits. A
/// split runs its tiles one after another, so the token waits for the
/// longest; splits of ceil(n_pos / 128) positions gave 16385 positions
/// five tiles each (four and one position), where 103 splits of five whole
/// tiles do the same in fewer workgroups: tg32 @ d8192 +2.5%, @ d16384
/// +1%, equal at 4096 and 12000 (H100, session 13).
pub fn attention_coop_splits(n_pos: usize) -> u32 {
    let tiles = n_pos.div_ceil(ATTENTION_COOP_TILE);
    let per_split = tiles.div_ceil(ATTENTION_COOP_SPLITS).max(2);
    tiles.div_ceil(per_split).max(1) as u32
}

/// The fewest position splits of each prefill token in attention_coop.wgsl
/// past ATTENTION_COOP_PREFILL_SPLIT_MIN positions: two, so a 512-token
/// chunk's 320 workgroups become 640 and the last wave on a 132-SM H100 is
/// fuller (attention_merge.wgsl joins them): pp512 @ d16384 1,382 → 1,567,
/// @ d4096 3,196 → 3,358 (H100, session 11).
pub const ATTENTION_COOP_PREFILL_SPLITS: u32 = 2;

/// Below this many positions a full prefill chunk's tokens attend in one
/// split on attention_coop.wgsl: at depth 0 two splits made the chunk's
/// attention 7.9 → 8.7 ms (twice the workgroups for the same short
/// prefixes).
pub const ATTENTION_COOP_PREFILL_SPLIT_MIN: usize = 1024;

/// Workgroups a prefill chunk's attention is split up to: about two per SM
/// of an H100. Without splits a chunk launches one workgroup per token (or
/// per 32 (token, head) rows), each reading the token's whole prefix, so
/// a chat turn's few tokens deep in the context left the GPU idle: one
/// token at depth 4096 took 91 ms of attention a chunk with the f32
/// kernel, where its decode step takes 1.5 ms (H100, session 20).
pub const PREFILL_ATTENTION_GROUPS: u32 = 256;

/// (token, split) rows the prefill's partial buffers hold for chunks of up
/// to `ubatch` tokens, for `prefill_splits`: twice the chunk on
/// attention_coop (a full chunk splits in two past
/// ATTENTION_COOP_PREFILL_SPLIT_MIN positions). On attention.wgsl a full
/// chunk attends in one split and a short one (fewer than
/// PREFILL_ATTENTION_GROUPS tokens) stops at that many workgroups, so
/// twice that is room enough, whatever the ubatch.
pub fn prefill_split_rows(coop: bool, ubatch: u32) -> u32 {
    let twice = ubatch.saturating_mul(2);
    match coop {
        true => twice,
        false => twice.min(2 * PREFILL_ATTENTION_GROUPS),
    }
}

/// Position splits of every token of a prefill chunk of `n_tok` tokens
/// whose last token attends over `n_pos` positions, on attention_coop.wgsl
/// (`coop`) or attention.wgsl: enough for PREFILL_ATTENTION_GROUPS
/// workgroups, each split at least two tiles, the chunk's tokens × splits
/// within the partial buffers' `rows` (`prefill_split_rows`); a full chunk
/// takes one (two on attention_coop past ATTENTION_COOP_PREFILL_SPLIT_MIN).
/// With one split the attention writes its output directly.
pub fn prefill_splits(coop: bool, n_tok: u32, n_head: u32, n_pos: usize, rows: u32) -> u32 {
    let n_tok = n_tok.max(1);
    let groups = match coop {
        true => attention_coop_groups(n_tok, n_head),
        false => n_tok * attention_head_blocks(n_head as usize),
    };
    let mut s = PREFILL_ATTENTION_GROUPS.div_ceil(groups.max(1));
    if coop && n_pos >= ATTENTION_COOP_PREFILL_SPLIT_MIN {
        s = s.max(ATTENTION_COOP_PREFILL_SPLITS);
    }
    let by_len = u32::try_from(n_pos / (2 * ATTENTION_TILE)).unwrap_or(u32::MAX);
    let by_room = rows / n_tok;
    s.min(by_len).min(by_room).max(1)
}

/// attention_merge.wgsl's params.
#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
pub struct AttentionMergeParams {
    pub n_kv: u32,
    pub n_head: u32,
    pub split_stride: u32,
    pub _pad: u32,
}

impl AttentionMergeParams {
    /// `c`'s heads and latent width, `split_stride` slots a row.
    pub fn new(c: &Config, split_stride: u32) -> AttentionMergeParams {
        AttentionMergeParams {
            n_kv: c.n_lora_kv as u32,
            n_head: c.n_head as u32,
            split_stride,
            _pad: 0,
        }
    }
}

/// attention_coop.wgsl's params; `n_tok` is the chunk's, so the prefill
/// writes them per chunk (the decode's is 1).
#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
pub struct AttentionCoopParams {
    pub n_rot: u32,
    pub n_nope: u32,
    pub scale: f32,
    pub n_head: u32,
    pub n_tok: u32,
    /// Split slots per (token, head) row in the partial buffers: 1 in the
    /// prefill, MAX_SPLITS in the decode.
    pub split_stride: u32,
    pub _pad: [u32; 2],
}

impl AttentionCoopParams {
    pub fn new(c: &Config, n_tok: u32, split_stride: u32) -> AttentionCoopParams {
        AttentionCoopParams {
            n_rot: c.n_embd_head_qk_rope as u32,
            n_nope: c.n_embd_head_qk_nope as u32,
            scale: c.kq_scale(),
            n_head: c.n_head as u32,
            n_tok,
            split_stride,
            _pad: [0; 2],
        }
    }
}

/// Whether the prefill runs its attention on attention_coop.wgsl: the
/// adapter's cooperative matrices (`Caps::coop`), subgroups of exactly 32
/// lanes (the kernel's 8 score blocks and 8-lane softmax segments; with
/// narrower subgroups, subgroups 8 and up would load query fragments past
/// its workgroup array), and a rope width `n_rot` its 16-wide k steps
/// cover.
pub fn attention_coop_fits(gpu: &Gpu, n_rot: usize) -> bool {
    gpu.caps.coop
        && gpu.info.subgroup_max_size == 32
        && gpu.info.subgroup_min_size == 32
        && n_rot % 16 == 0
}

/// attention_coop.wgsl's row blocks (its grid's y) for `n_tok` tokens.
pub fn attention_coop_groups(n_tok: u32, n_head: u32) -> u32 {
    (n_tok * n_head).div_ceil(ATTENTION_COOP_ROWS)
}

/// A prefill attention dispatch on cooperative matrices over latent rows
/// `n_kv` wide (a multiple of 64 up to MAX_LATENT).
pub fn attention_coop(
    gpu: &Gpu,
    pipes: &Pipelines,
    n_kv: usize,
    b: &AttentionCoopBindings,
    workgroups: [u32; 3],
) -> Result<Dispatch> {
    let n_kv = u32::try_from(n_kv)
        .map_err(|_| Error::InvalidArgument(format!("latent width {n_kv} is too large")))?;
    let o = AttentionCoopOverrides { n_kv };
    Dispatch::with(gpu, pipes, Kernel::AttentionCoop, &o, b, workgroups)
}

impl KvAppendParams {
    pub fn new(c: &Config) -> KvAppendParams {
        KvAppendParams {
            n_kv: c.n_lora_kv as u32,
            n_rot: c.n_embd_head_qk_rope as u32,
            eps: c.rms_eps,
            parts: 1,
            plane: 0,
            off: 0,
            _pad: [0; 2],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A full chunk keeps its splits (one; two on attention_coop past
    /// 1024 positions); a short chunk deep in the context splits up to
    /// PREFILL_ATTENTION_GROUPS workgroups, each split two tiles or more,
    /// its rows within the partial buffers (whose f32 size does not grow
    /// with the ubatch).
    #[test]
    fn prefill_splits_fill_the_gpu_for_short_chunks() {
        let rows = |coop| prefill_split_rows(coop, 512);
        assert_eq!([rows(false), rows(true)], [512, 1024]);
        assert_eq!(prefill_split_rows(false, 4096), 512);
        let s = |coop, n_tok, n_pos| prefill_splits(coop, n_tok, 20, n_pos, rows(coop));
        assert_eq!([s(false, 512, 512), s(false, 512, 16896)], [1, 1]);
        assert_eq!(
            [s(true, 512, 512), s(true, 512, 1024), s(true, 512, 16896)],
            [1, 2, 2]
        );
        // One token at depth 4096: 256 workgroups would be 16 positions
        // each; two tiles a split allow 64.
        assert_eq!([s(false, 1, 4097), s(true, 1, 4097)], [64, 64]);
        assert_eq!([s(false, 1, 16385), s(true, 1, 16385)], [256, 256]);
        // 20 tokens: 20 workgroups (f32) or 13 row blocks (coop).
        assert_eq!([s(false, 20, 16404), s(true, 20, 16404)], [13, 20]);
        // Short prefixes stay whole.
        assert_eq!([s(false, 3, 60), s(true, 3, 130)], [1, 2]);
        for n_tok in 1..=512u32 {
            for n_pos in [1usize, 63, 64, 1000, 5000, 70_000] {
                for coop in [false, true] {
                    let sp = prefill_splits(coop, n_tok, 20, n_pos, rows(coop));
                    assert!(sp == 1 || n_tok * sp <= rows(coop));
                    assert!(sp == 1 || n_pos / sp as usize >= 2 * ATTENTION_TILE);
                }
            }
        }
    }

    /// The decode's coop splits: whole tiles, at least two a split, at most
    /// ATTENTION_COOP_SPLITS; and the split length the kernel derives
    /// (ceil(n_pos / splits)) never takes more tiles than that.
    #[test]
    fn coop_splits_are_whole_tiles() {
        assert_eq!(
            [4096, 8193, 16384, 16385, 100_000].map(attention_coop_splits),
            [64, 86, 128, 103, 125]
        );
        for n_pos in 1..40_000usize {
            let s = attention_coop_splits(n_pos) as usize;
            let tiles = n_pos.div_ceil(ATTENTION_COOP_TILE);
            let most = tiles.div_ceil(ATTENTION_COOP_SPLITS).max(2);
            let len = n_pos.div_ceil(s);
            assert!(s <= ATTENTION_COOP_SPLITS, "{n_pos}: {s} splits");
            assert!(
                len.div_ceil(ATTENTION_COOP_TILE) <= most,
                "{n_pos}: {len} a split"
            );
        }
    }
}
