//! Host side of each kernel: its `#[repr(C)]` params struct (the WGSL
//! `struct Params` field for field: build.rs checks offsets, types and size
//! at compile time) and a constructor for its `Dispatch` — pipeline, bind
//! group and workgroup count, built once and replayed into a compute pass
//! as often as needed. The limits host and shaders share live here, each
//! with its reason; a WGSL constant that is one of them says so
//! (`/// host: gpu::ops::NAME`) and build.rs checks the two are equal.

use super::context::Gpu;
pub use super::kernels::{
    AttentionBindings, AttentionCoopBindings, AttentionCoopOverrides, AttentionHeadBindings,
    AttentionMergeBindings, AttentionOverrides, EmbedBindings, KvAppendBindings, MatmulBindings,
    MatmulCoopBindings, MatmulCoopOverrides, MatmulOverrides, MatvecBindings, MatvecOverrides,
    MoeGroupBindings, MoeSumBindings, PickBindings, ReadBandwidthBindings, RmsNormBindings,
    RouteBindings, RouterBindings, TopkBindings, TopkOverrides,
};
use super::kernels::{Bind, Bindings, Format, Kernel, Overrides, Pipelines};
use crate::error::{Error, Result};
use crate::model::{Config, Gating};

mod attention;
mod matvec;
pub use attention::*;
pub use matvec::*;

/// One pre-built dispatch: the unit a decode plan is made of.
#[derive(Clone)]
pub struct Dispatch {
    pub kernel: Kernel,
    /// What it computes, e.g. `blk.3.attn_q_a` (profiles group by the part
    /// after the layer prefix).
    pub label: String,
    /// Bytes of weights it reads from memory (0 where negligible or, as for
    /// attention, dependent on the position).
    pub weight_bytes: u64,
    pipeline: wgpu::ComputePipeline,
    bind_group: wgpu::BindGroup,
    /// Each bound buffer with how the kernel declares it, in binding
    /// order: what `gpu::barriers` counts wgpu's barriers from.
    uses: Vec<(wgpu::Buffer, Bind)>,
    pub workgroups: [u32; 3],
}

impl Dispatch {
    /// Kernel `k` (one without host-set overrides) over the buffers `b`.
    pub fn new(
        gpu: &Gpu,
        pipes: &Pipelines,
        k: Kernel,
        b: &dyn Bindings,
        workgroups: [u32; 3],
    ) -> Result<Dispatch> {
        Dispatch::build(gpu, pipes, k, None, b, workgroups)
    }

    /// Kernel `k` built with the override values `o`, over the buffers `b`.
    pub fn with(
        gpu: &Gpu,
        pipes: &Pipelines,
        k: Kernel,
        o: &dyn Overrides,
        b: &dyn Bindings,
        workgroups: [u32; 3],
    ) -> Result<Dispatch> {
        Dispatch::build(gpu, pipes, k, Some(o), b, workgroups)
    }

    fn build(
        gpu: &Gpu,
        pipes: &Pipelines,
        k: Kernel,
        o: Option<&dyn Overrides>,
        b: &dyn Bindings,
        workgroups: [u32; 3],
    ) -> Result<Dispatch> {
        let bound = k.bind(b)?;
        let pipeline = pipes.get(gpu, k, o)?;
        let entries: Vec<wgpu::BindGroupEntry> = bound
            .iter()
            .map(|&(slot, buf, _)| wgpu::BindGroupEntry {
                binding: slot,
                resource: buf.as_entire_binding(),
            })
            .collect();
        let scope = gpu.device.push_error_scope(wgpu::ErrorFilter::Validation);
        let bind_group = gpu.device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some(k.name()),
            layout: pipes.layout(k),
            entries: &entries,
        });
        if let Some(e) = pollster::block_on(scope.pop()) {
            return Err(Error::Gpu(format!("binding buffers for {}: {e}", k.name())));
        }
        gpu.count_object();
        let uses = bound.iter().map(|&(_, buf, a)| (buf.clone(), a)).collect();
        Ok(Dispatch {
            kernel: k,
            label: k.name().to_string(),
            weight_bytes: 0,
            pipeline,
            bind_group,
            uses,
            workgroups,
        })
    }

    pub fn named(mut self, label: impl Into<String>) -> Dispatch {
        self.label = label.into();
        self
    }

    pub fn reading(mut self, weight_bytes: u64) -> Dispatch {
        self.weight_bytes = weight_bytes;
        self
    }

    /// The label without its `blk.N.` prefix: the same op in every layer.
    pub fn op(&self) -> &str {
        match self.label.strip_prefix("blk.") {
            Some(rest) => rest.split_once('.').map_or(rest, |(_, op)| op),
            None => &self.label,
        }
    }

    /// The bound buffers and their declared access, in binding order.
    pub fn uses(&self) -> &[(wgpu::Buffer, Bind)] {
        &self.uses
    }

    pub fn record(&self, pass: &mut wgpu::ComputePass<'_>) {
        self.record_grid(pass, self.workgroups);
    }

    /// Record with another workgroup count (prefill sizes its dispatches
    /// per chunk).
    pub fn record_grid(&self, pass: &mut wgpu::ComputePass<'_>, wg: [u32; 3]) {
        pass.set_pipeline(&self.pipeline);
        pass.set_bind_group(0, &self.bind_group, &[]);
        pass.dispatch_workgroups(wg[0], wg[1], wg[2]);
    }
}

/// Record `dispatches` into one compute pass, submit, and wait.
pub fn run(gpu: &Gpu, dispatches: &[Dispatch]) -> Result<()> {
    let mut enc = gpu.device.create_command_encoder(&Default::default());
    {
        let mut pass = enc.begin_compute_pass(&Default::default());
        for d in dispatches {
            d.record(&mut pass);
        }
    }
    gpu.queue.submit([enc.finish()]);
    gpu.wait()
}

/// Workgroup counts for `n` independent items, folded into two dimensions
/// because each is capped at 65535; kernels rebuild the index from both.
pub fn grid(n: u32) -> [u32; 3] {
    if n <= 65535 {
        [n, 1, 1]
    } else {
        [65535, n.div_ceil(65535), 1]
    }
}

// ---- rms_norm ----------------------------------------------------------

#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
pub struct RmsNormParams {
    /// Floats a row: a multiple of 4 (rms_norm.wgsl reads vec4s; every
    /// normed row is a matrix's input, whose columns are multiples of 32).
    pub n: u32,
    pub eps: f32,
    pub n_rows: u32,
    /// Planes of n_rows × n floats whose sum is x (`matmul_k_parts`; 1).
    pub parts: u32,
}

// ---- embedding gather --------------------------------------------------

/// Invocations per embed workgroup (shaders/embed.wgsl `WG`).
pub const EMBED_WG: u32 = 64;

#[repr(C)]
#[derive(Clone, Copy, Debug, Default, bytemuck::Pod, bytemuck::Zeroable)]
pub struct EmbedParams {
    pub units: u32,
    pub row0: u32,
    pub rows: u32,
    pub _pad: u32,
}

/// Gather the rows of `m` (token_embd) named by `tokens` into `x`: one
/// dispatch per part of `m`, each for one token (the prefill scales y with
/// its chunk).
pub fn embed(
    gpu: &Gpu,
    pipes: &Pipelines,
    m: &crate::gpu::weights::Matrix,
    tokens: &wgpu::Buffer,
    x: &wgpu::Buffer,
) -> Result<Vec<Dispatch>> {
    let mut out = Vec::new();
    for part in &m.parts {
        let p = EmbedParams {
            units: m.units,
            row0: part.row0,
            rows: part.rows,
            _pad: 0,
        };
        let pb = gpu.uniform("token_embd", &p);
        let bufs = EmbedBindings {
            p: &pb,
            tokens,
            x,
            weights: &part.buffers,
        };
        let wg = [m.units.div_ceil(EMBED_WG), 1, 1];
        let d = Dispatch::new(gpu, pipes, Kernel::Embed(m.format), &bufs, wg)?;
        out.push(d.named("token_embd"));
    }
    Ok(out)
}

// ---- prefill matmul and MoE grouping -----------------------------------

/// Rows of x per tile of shaders/matmul.wgsl (`TOK`: its tile64).
pub const MATMUL_TILE: u32 = 64;
/// Rows of x per short tile of shaders/matmul.wgsl (`TOK32`: its tile32,
/// chosen by a tile's fourth word in the pipelines with SHORT, the routed
/// ones): an expert's last run of 32 or fewer assignments ran 7% faster in
/// that shape than in tile64's (H100, session 23), and a run of 33-64 in
/// one tile64 faster than in two tile32s (session 24).
pub const MATMUL_SHORT_TILE: u32 = 32;
/// Rows of x per tile in shaders/matmul_coop.wgsl (`TOK`: the columns of
/// its four B matrices): its staging, not its products, bounds it, so
/// each staged weight serves as many tokens as workgroup memory allows.
pub const MATMUL_COOP_TILE: u32 = 64;

/// Rows of x a short tile holds (matmul_coop's and matmul.wgsl's tile32,
/// chosen by a tile's fourth word where SHORT is on): an expert's last run
/// of assignments, where it fits, takes one (`moe_group.wgsl`'s `small`).
pub fn matmul_small_tile(coop: bool) -> u32 {
    match coop {
        true => MATMUL_COOP_TILE / 2,
        false => MATMUL_SHORT_TILE,
    }
}

/// A chunk's dense tiles, (0, first, count, 0) over its `n_tok` tokens in
/// tiles of `tile`.
pub fn dense_tiles(n_tok: u32, tile: u32) -> Vec<[u32; 4]> {
    (0..n_tok.div_ceil(tile))
        .map(|i| [0, i * tile, tile.min(n_tok - i * tile), 0])
        .collect()
}

/// Rows of x per prefill matmul tile for the kernel the adapter runs
/// (`Caps::coop`): the plan's dense tiles and the experts' grouping.
pub fn matmul_tile(coop: bool) -> u32 {
    match coop {
        true => MATMUL_COOP_TILE,
        false => MATMUL_TILE,
    }
}

/// Weight rows per matmul workgroup (shaders/matmul.wgsl `ROWS`: one per
/// invocation); it writes half as many with GATE_UP.
pub const MATMUL_ROWS: u32 = 64;

/// Weight rows each matmul_coop workgroup dequantizes per step
/// (shaders/matmul_coop.wgsl `ROWS`); it writes half as many with GATE_UP.
pub const MATMUL_COOP_ROWS: u32 = 128;

#[repr(C)]
#[derive(Clone, Copy, Debug, Default, bytemuck::Pod, bytemuck::Zeroable)]
pub struct MatmulParams {
    pub rows: u32,
    pub units: u32,
    pub mat_units: u32,
    pub x_div: u32,
    pub x_tok: u32,
    pub y_tok: u32,
    pub x_stride: u32,
    pub y_stride: u32,
    pub y_off: u32,
    /// Units between rows of a matrix: `units`, or `parts` × `units` where
    /// the heads are parts of each row (`matmul_k_parts`).
    pub row_units: u32,
    pub _pad: [u32; 2],
}

/// Row groups a dense prefill matmul should have before it is split over
/// K: the router logits (64 rows: one row group of matmul_coop.wgsl),
/// q_a (768: six) and kv_a (576: five) otherwise ran their 32 serial K
/// steps in 8-48 workgroups of a 512-token chunk.
pub const MATMUL_SPLIT_GROUPS: u32 = 24;
/// The same for matmul.wgsl (row groups of 64): 36 splits q_a (12 row
/// groups) and kv_a (9) in four; its tiles of 64 tokens left q_a's two
/// parts 384 workgroups a chunk (H100, session 23).
pub const MATMUL_F32_SPLIT_GROUPS: u32 = 36;

/// The fewest units a part of a split row keeps.
pub const MATMUL_MIN_PART_UNITS: u32 = 4;

/// Parts into which a dense matmul of `rows` rows of `units` units splits
/// each row (split-K): each part is a head of the dispatch, writing its
/// partial sums into a plane of its own that the consumer adds up
/// (rms_norm.wgsl, kv_append.wgsl, router.wgsl: `parts`). The smallest
/// power of two that gives MATMUL_SPLIT_GROUPS (MATMUL_F32_SPLIT_GROUPS)
/// row groups × parts, as long as the parts divide the row and keep
/// MATMUL_MIN_PART_UNITS units.
pub fn matmul_k_parts(rows: u32, units: u32, coop: bool) -> u32 {
    let (per_group, want) = match coop {
        true => (MATMUL_COOP_ROWS, MATMUL_SPLIT_GROUPS),
        false => (MATMUL_ROWS, MATMUL_F32_SPLIT_GROUPS),
    };
    let groups = rows.div_ceil(per_group).max(1);
    let mut parts = 1;
    while groups.saturating_mul(parts) < want
        && units % (2 * parts) == 0
        && units / (2 * parts) >= MATMUL_MIN_PART_UNITS
    {
        parts *= 2;
    }
    parts
}

/// A matmul dispatch; its workgroup count is set per chunk
/// (`[row tiles, tiles, heads]`).
pub fn matmul(
    gpu: &Gpu,
    pipes: &Pipelines,
    format: Format,
    o: MatmulOverrides,
    b: &MatmulBindings,
) -> Result<Dispatch> {
    Dispatch::with(gpu, pipes, Kernel::Matmul(format), &o, b, [1, 1, 1])
}

/// The cooperative-matrix matmul (same grid as `matmul`, rows per
/// workgroup `matmul_coop_rows`).
pub fn matmul_coop(
    gpu: &Gpu,
    pipes: &Pipelines,
    format: Format,
    o: MatmulCoopOverrides,
    b: &MatmulCoopBindings,
) -> Result<Dispatch> {
    Dispatch::with(gpu, pipes, Kernel::MatmulCoop(format), &o, b, [1, 1, 1])
}

/// Output rows per matmul workgroup.
pub fn matmul_rows(gate_up: bool) -> u32 {
    match gate_up {
        true => MATMUL_ROWS / 2,
        false => MATMUL_ROWS,
    }
}

/// Whether matmul_coop.wgsl must provide for subgroups wider than 32 lanes
/// (its `WIDE`: fewer subgroups than 16-row blocks per workgroup).
pub fn coop_wide(gpu: &Gpu) -> bool {
    gpu.info.subgroup_max_size > 32
}

/// Output rows per matmul_coop workgroup.
pub fn matmul_coop_rows(gate_up: bool) -> u32 {
    match gate_up {
        true => MATMUL_COOP_ROWS / 2,
        false => MATMUL_COOP_ROWS,
    }
}

#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
pub struct MoeGroupParams {
    pub n_assign: u32,
    pub n_expert: u32,
    pub tile: u32,
    pub max_tiles: u32,
    /// An expert's last run of this many assignments or fewer is a short
    /// tile (`matmul_small_tile`; 0: none).
    pub small: u32,
    pub _pad: [u32; 3],
}

/// Most tiles `n_assign` assignments over `n_expert` experts can make.
pub fn max_tiles(n_assign: u32, n_expert: u32, tile: u32) -> u32 {
    n_assign.min(n_assign.div_ceil(tile) + n_expert)
}

/// Rows of the experts' down output: a slot of `tile` rows per routed
/// tile, where the matmul writes tile t's j-th row at t·tile + j (so a
/// tile's rows are consecutive: matmul_coop.wgsl stores them straight from
/// its accumulators) and moe_sum.wgsl reads assignment a's at moe_group's
/// rows[a]. Rows past a tile's count are scratch.
pub fn routed_slot_rows(max_tiles: u32, tile: u32) -> u32 {
    max_tiles.saturating_mul(tile)
}

#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
pub struct MoeSumParams {
    pub n: u32,
    pub n_used: u32,
    pub _pad: [u32; 2],
}

// ---- router and top-k --------------------------------------------------

/// Invocations per moe_sum workgroup (shaders/moe_sum.wgsl `WG`).
pub const MOE_SUM_WG: u32 = 256;

/// moe_sum's workgroups per token for rows of `n` floats (a multiple of 4:
/// an invocation owns a vec4).
pub fn moe_sum_groups(n: usize) -> u32 {
    (n as u32).div_ceil(4 * MOE_SUM_WG)
}

/// Top-k pass 1: a workgroup per this many logits, so the 154,880-wide
/// vocabulary gets ~150 slices, at most TOPK_MAX_WG of them, so pass 2 (one
/// workgroup over every slice's k candidates) stays short.
pub const TOPK_SLICE: usize = 1024;
pub const TOPK_MAX_WG: usize = 128;

#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
pub struct RouterParams {
    pub n_expert: u32,
    pub n_used: u32,
    /// 0 sigmoid, 1 softmax.
    pub gating: u32,
    pub norm_w: u32,
    pub scale: f32,
    /// Planes of logits (`matmul_k_parts`; 1) and the floats between them.
    pub parts: u32,
    pub plane: u32,
    pub _pad: u32,
}

impl RouterParams {
    pub fn new(c: &Config) -> RouterParams {
        RouterParams {
            n_expert: c.n_expert as u32,
            n_used: c.n_expert_used as u32,
            gating: match c.gating {
                Gating::Sigmoid => 0,
                Gating::Softmax => 1,
            },
            norm_w: c.expert_weights_norm as u32,
            scale: c.expert_weights_scale,
            parts: 1,
            plane: 0,
            _pad: 0,
        }
    }
}

/// Router logits per route.wgsl workgroup (`ROWS` there; 64 invocations
/// a row, so GLM-4.7-Flash's 64-unit rows give every invocation one unit):
/// 32 workgroups for 64 experts, the route dispatch 7.05 → 6.37 µs in the
/// H100's micro tier against four rows (tg128 +0.3-0.5%, inside the
/// placement noise; docs/perf-journal.md, session 25).
pub const ROUTE_ROWS: u32 = 2;

/// route.wgsl's workgroups for `rows` logits.
pub fn route_groups(rows: u32) -> u32 {
    rows.div_ceil(ROUTE_ROWS)
}

/// route.wgsl's params: the router matrix's shape, this dispatch's part of
/// it, the norm's epsilon and the choice (as `RouterParams`).
#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
pub struct RouteParams {
    pub n_expert: u32,
    /// 32-weight units per row of the router matrix.
    pub units: u32,
    /// This dispatch's rows of the matrix: logits row0 .. row0 + rows.
    pub row0: u32,
    pub rows: u32,
    /// Workgroups of all the router's dispatches (`route_groups` of each
    /// part's rows, summed).
    pub groups: u32,
    pub n_used: u32,
    pub gating: u32,
    pub norm_w: u32,
    pub scale: f32,
    pub eps: f32,
    pub _pad: [u32; 2],
}

impl RouteParams {
    /// The params of a router matrix in one part.
    pub fn new(c: &Config) -> RouteParams {
        let r = RouterParams::new(c);
        RouteParams {
            n_expert: r.n_expert,
            units: (c.n_embd / 32) as u32,
            row0: 0,
            rows: r.n_expert,
            groups: route_groups(r.n_expert),
            n_used: r.n_used,
            gating: r.gating,
            norm_w: r.norm_w,
            scale: r.scale,
            eps: c.rms_eps,
            _pad: [0; 2],
        }
    }
}

/// Experts the router and the prefill's grouping can hold (`MAX_EXPERT` in
/// router.wgsl and moe_group.wgsl: per-expert arrays in workgroup memory).
pub const ROUTER_MAX_EXPERT: usize = 512;

#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
pub struct TopKParams {
    pub n: u32,
    pub len: u32,
    pub k: u32,
    pub _pad: u32,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn few_row_groups_split_k() {
        // (rows, units, coop) -> parts
        for (rows, units, coop, parts) in [
            (64, 64, true, 16), // GLM-4.7-Flash's router logits: 4 units a part
            (768, 64, true, 4), // q_a
            (576, 64, true, 8), // kv_a
            (64, 64, false, 16),
            (768, 64, false, 4), // MATMUL_F32_SPLIT_GROUPS
            (576, 64, false, 4),
            (3072, 64, true, 1), // enough row groups already
            (64, 8, true, 2),    // the tiny model's
            (64, 6, true, 1),    // too short to split
            (64, 12, true, 2),   // 3 units a part would be too few
            (64, 9, true, 1),    // parts must divide the row
        ] {
            assert_eq!(
                matmul_k_parts(rows, units, coop),
                parts,
                "{rows} rows of {units} units, coop {coop}"
            );
        }
    }
}
