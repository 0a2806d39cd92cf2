//! Host side of matvec.wgsl, the decode products: params, the row shape of
//! a dispatch (invocations per row, rows per group and per workgroup) and
//! the dispatch itself.

use super::{grid, Dispatch, MatvecBindings, MatvecOverrides};
use crate::error::{Error, Result};
use crate::gpu::context::Gpu;
use crate::gpu::kernels::{Format, Kernel, Pipelines};

/// What a matvec dispatch computes (shaders/matvec.wgsl, `MODE`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MatvecMode {
    /// y = W·x, one matrix per batch slot (z).
    Plain,
    /// silu(gate)·up of the matrix chosen by `sel[z]`.
    GateUp,
    /// `Σ_k sel_w[k]·W_{sel[k]}·x_k` (experts' down with the combine).
    WeightedSum,
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default, bytemuck::Pod, bytemuck::Zeroable)]
pub struct MatvecParams {
    pub rows: u32,
    pub units: u32,
    pub mat_units: u32,
    pub n_slot: u32,
    pub x_stride: u32,
    pub y_stride: u32,
    pub y_off: u32,
    pub eps: f32,
    pub _pad: [u32; 4],
}

/// Invocations per matvec workgroup (shaders/matvec.wgsl `WG`). 128 rather
/// than 256 gives the small decode matrices (q_a: 768 rows, kv_a: 576) twice
/// the workgroups, spread over more SMs: tg128 +2-3% on an H100
/// (docs/perf-journal.md); 64 was slower at depth.
pub const MATVEC_WG: u32 = 128;

/// Row groups (rows × batch slots) from which a matvec is narrow: fewer
/// invocations per row, more units each (`matvec_tpr`).
pub const MATVEC_NARROW_GROUPS: u32 = 4096;

/// Row groups from which a matvec takes 4 invocations per row: only the
/// output head (151,552 rows of GLM-4.7-Flash) has this many.
pub const MATVEC_HEAD_GROUPS: u32 = 32768;

/// Invocations per row of a matvec of `rows` rows per matrix over `slots`
/// batch slots (a weighted sum's slots share its rows) of `units` units
/// each, not merging attention splits (`COMBINE_ROWS`): the most, up to
/// 32, that give every lane a unit (k_b's 6 units: 4; 8 left two lanes
/// idle and ran tg128 0.8% slower), at least 4. Where the dispatch has at
/// least MATVEC_NARROW_GROUPS row groups (rows × slots) it is narrower:
/// - the routed gate+up (4 × 1536 row groups): 8, 384 workgroups of
///   eight unit pairs a lane;
/// - the output head: 4 (head micro 131.1 → 129.4 µs on an H200);
/// - the others (q_b's 5120 rows, the dense gate+up): 16.
///
/// The 2048-row matvecs (attn_output, the routed down) keep 32: 16 lost
/// 2-3% (H200, session 27), 8 lost 10% (H100, session 14). Since the
/// unit dots (session 26) made a unit cheaper, the narrow ones gain from
/// fewer lanes a row for the routed gate+up and from more for q_b: H200
/// tg128 254.6-254.9 → 256.9-257.2 (16 / 8 / 8 before; 8 alone and 16
/// alone each gained ~1%), where session 18's H100 had the gate+up best
/// at 16 and session 14's q_b at 8 (docs/perf-journal.md, session 27).
pub fn matvec_tpr(mode: MatvecMode, units: u32, rows: u32, slots: u32) -> u32 {
    let groups = match mode {
        MatvecMode::WeightedSum => rows,
        _ => rows.saturating_mul(slots),
    };
    let tpr = (1u32 << (31 - units.max(1).leading_zeros())).clamp(4, 32);
    if groups < MATVEC_NARROW_GROUPS {
        return tpr;
    }
    if mode == MatvecMode::GateUp && slots > 1 {
        tpr.min(8)
    } else if groups >= MATVEC_HEAD_GROUPS {
        tpr.min(4)
    } else {
        tpr.min(16)
    }
}

/// Rows one matvec workgroup computes: a group of `tpr` invocations owns
/// one row (GateUp: a gate row and its up row; shaders/matvec.wgsl).
pub fn matvec_rows_per_workgroup(tpr: u32) -> u32 {
    MATVEC_WG / tpr
}

/// Everything one matvec dispatch needs besides its buffers.
#[derive(Clone, Copy, Debug)]
pub struct MatvecSpec {
    pub format: Format,
    pub mode: MatvecMode,
    pub accum: bool,
    pub params: MatvecParams,
    /// Batch slots (z) for Plain and GateUp.
    pub slots: u32,
}

/// What matvec.wgsl's binding `g` holds: one vector whose meaning the
/// pipeline's overrides pick, so the variant sets NORM and COMBINE.
#[derive(Clone, Copy)]
pub enum MatvecSide<'a> {
    /// NORM: x is RMS-normed and multiplied by this weight first.
    Norm(&'a wgpu::Buffer),
    /// COMBINE (Plain, attn_v_b): the attention splits' (m, l) pairs; x
    /// holds the splits' partial outputs, merged first.
    Splits(&'a wgpu::Buffer),
    /// WeightedSum: the vector added to every output row.
    Add(&'a wgpu::Buffer),
    /// Read by none of those: any buffer (a plan binds one a later dispatch
    /// reads, so its barrier falls here: `plan::builder`).
    Unread(&'a wgpu::Buffer),
}

impl<'a> MatvecSide<'a> {
    fn buffer(self) -> &'a wgpu::Buffer {
        match self {
            MatvecSide::Norm(b) | MatvecSide::Splits(b) | MatvecSide::Add(b) => b,
            MatvecSide::Unread(b) => b,
        }
    }
}

/// Buffers of one matvec dispatch (binding `g` by what it holds).
pub struct MatvecBuffers<'a> {
    pub params: &'a wgpu::Buffer,
    pub x: &'a wgpu::Buffer,
    pub g: MatvecSide<'a>,
    pub y: &'a wgpu::Buffer,
    /// Selected matrices (GateUp, WeightedSum); any buffer otherwise.
    pub sel: &'a wgpu::Buffer,
    /// Their weights (WeightedSum); any buffer otherwise.
    pub sel_w: &'a wgpu::Buffer,
    /// The weight arrays the format binds (one or two).
    pub weights: &'a [wgpu::Buffer],
}

/// Row groups per workgroup when the matvec merges attention splits: every
/// workgroup reads all of its head's splits (up to MAX_SPLITS × n_kv
/// floats, 256 KB for GLM-4.7-Flash), so the merge is repeated per
/// workgroup. attn_v_b's 256 rows per head go to 16 workgroups (TPR 8):
/// H100 tg128 +1.3% over 8 workgroups (TPR 4), and equal at 16,384
/// positions, where each merges ~100 splits (docs/perf-journal.md, session
/// 18). With 2 workgroups per head attn_v_b took 15.4 µs instead of 12.7
/// (session 5).
const COMBINE_ROWS: u32 = 16;

pub fn matvec(gpu: &Gpu, pipes: &Pipelines, s: &MatvecSpec, b: &MatvecBuffers) -> Result<Dispatch> {
    let combine = matches!(b.g, MatvecSide::Splits(_));
    if (s.mode == MatvecMode::WeightedSum) != matches!(b.g, MatvecSide::Add(_))
        || (combine && s.mode != MatvecMode::Plain)
    {
        return Err(Error::Gpu(format!(
            "internal: a {:?} matvec cannot take that g (a weighted sum, and only it, adds a vector; only a plain one merges splits)",
            s.mode
        )));
    }
    let tpr = match combine {
        true => MATVEC_WG / COMBINE_ROWS,
        false => matvec_tpr(s.mode, s.params.units, s.params.rows, s.slots),
    };
    let o = MatvecOverrides {
        mode: match s.mode {
            MatvecMode::Plain => 0,
            MatvecMode::GateUp => 1,
            MatvecMode::WeightedSum => 2,
        },
        norm: matches!(b.g, MatvecSide::Norm(_)),
        accum: s.accum,
        tpr,
        combine,
    };
    let bindings = MatvecBindings {
        p: b.params,
        x: b.x,
        g: b.g.buffer(),
        y: b.y,
        sel: b.sel,
        sel_w: b.sel_w,
        weights: b.weights,
    };
    let mut wg = grid(s.params.rows.div_ceil(matvec_rows_per_workgroup(tpr)));
    wg[2] = match s.mode {
        MatvecMode::WeightedSum => 1,
        _ => s.slots,
    };
    Dispatch::with(gpu, pipes, Kernel::Matvec(s.format), &o, &bindings, wg)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matvecs_of_many_rows_take_fewer_lanes_a_row() {
        use MatvecMode::*;
        // (mode, units, rows, slots) -> invocations per row
        for (mode, units, rows, slots, tpr) in [
            (Plain, 64, 768, 1, 32),        // q_a
            (Plain, 160, 2048, 1, 32),      // attn_output
            (WeightedSum, 48, 2048, 4, 32), // the routed down
            (Plain, 24, 5120, 1, 16),       // q_b
            (GateUp, 64, 1536, 4, 8),       // the routed gate+up
            (GateUp, 64, 10_240, 1, 16),    // the dense gate+up
            (GateUp, 64, 1536, 1, 32),      // the shared gate+up
            (Plain, 64, 154_880, 1, 4),     // the output head
            (Plain, 6, 512, 20, 4),         // k_b: every lane has a unit
            (Plain, 3, 10_240, 1, 4),
            (Plain, 8, 100, 1, 8),
            (Plain, 31, 100, 1, 16),
            (Plain, 64, MATVEC_NARROW_GROUPS - 1, 1, 32),
            (Plain, 64, MATVEC_HEAD_GROUPS - 1, 1, 16),
        ] {
            assert_eq!(
                matvec_tpr(mode, units, rows, slots),
                tpr,
                "{mode:?}: {units} units, {rows} rows × {slots}"
            );
        }
    }

    /// Every TPR the host can ask for is one build.rs translated: a value
    /// missing from build/manifest.rs is refused when the pipeline is made,
    /// and only a matrix of that shape reaches it (the output head's 4 needs
    /// 32,768 rows, which no test model has).
    #[test]
    fn every_lanes_a_row_is_in_the_manifest() {
        use MatvecMode::*;
        let built = Kernel::Matvec(Format::Q4_0)
            .info()
            .overrides
            .iter()
            .find(|(name, _)| *name == "TPR")
            .map_or(&[][..], |(_, values)| *values);
        let mut asked = vec![MATVEC_WG / COMBINE_ROWS];
        for mode in [Plain, GateUp, WeightedSum] {
            for units in [1, 2, 3, 5, 8, 16, 24, 31, 48, 64, 160, 512, 4096] {
                for rows in [1, 100, 2048, 5120, 40_000, 154_880, 1 << 20] {
                    for slots in [1, 4, 20] {
                        asked.push(matvec_tpr(mode, units, rows, slots));
                    }
                }
            }
        }
        for tpr in asked {
            assert!(
                built.contains(&(tpr as f64)),
                "TPR {tpr} is not among build/manifest.rs's {built:?}"
            );
        }
    }
}
