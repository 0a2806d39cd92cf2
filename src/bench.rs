//! The benchmark ladder behind `glmw bench` and `cargo bench`
//! (performance.md): micro (each decode kernel at the model's shapes),
//! block (one transformer block replayed inside one submission from the
//! engine's own plan, predicting the token) and model (llama-bench's pp and
//! tg tests at each depth, dispatches and barriers, GPU time per kernel).
//! Everything here measures; nothing asserts a speed.

pub mod block;
pub mod floor;
pub mod model;

use std::time::Instant;

pub use block::{
    block, op_costs, part_barriers, per_replay, predict, BlockReport, OpCost, OpCosts, Prediction,
};
pub use model::{mean_sd, model, ModelReport, ModelSpec, TestRun};

use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::gpu::ops::{Dispatch, ReadBandwidthBindings};
use crate::gpu::plan::BlockRange;
use crate::gpu::profile::Timer;
use crate::gpu::{Gpu, Kernel, Pipelines};

/// Order statistics of a set of samples (same unit as the samples).
#[derive(Clone, Copy, Debug, Default)]
pub struct Stats {
    pub n: usize,
    pub median: f64,
    pub p10: f64,
    pub p90: f64,
    pub iqr: f64,
    /// Median absolute deviation from the median.
    pub mad: f64,
}

fn quantile(sorted: &[f64], q: f64) -> f64 {
    let pos = q * (sorted.len() - 1) as f64;
    let (lo, hi) = (pos.floor() as usize, pos.ceil() as usize);
    sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - lo as f64)
}

pub fn stats(samples: &[f64]) -> Stats {
    if samples.is_empty() {
        return Stats::default();
    }
    let mut s = samples.to_vec();
    s.sort_by(f64::total_cmp);
    let median = quantile(&s, 0.5);
    let mut dev: Vec<f64> = s.iter().map(|v| (v - median).abs()).collect();
    dev.sort_by(f64::total_cmp);
    Stats {
        n: s.len(),
        median,
        p10: quantile(&s, 0.1),
        p90: quantile(&s, 0.9),
        iqr: quantile(&s, 0.75) - quantile(&s, 0.25),
        mad: quantile(&dev, 0.5),
    }
}

/// GPU time of one op (a label without its layer) summed over a token.
#[derive(Clone, Debug)]
pub struct OpTime {
    pub op: String,
    pub kernel: &'static str,
    pub count: usize,
    pub us: f64,
}

/// GPU time per op (summed over layers), largest first.
fn by_op(dispatches: &[(String, &'static str, f64)]) -> Vec<OpTime> {
    let mut ops: Vec<OpTime> = Vec::new();
    for (op, kernel, ns) in dispatches {
        match ops.iter_mut().find(|o| &o.op == op) {
            Some(o) => {
                o.count += 1;
                o.us += ns / 1e3;
            }
            None => ops.push(OpTime {
                op: op.clone(),
                kernel,
                count: 1,
                us: ns / 1e3,
            }),
        }
    }
    ops.sort_by(|a, b| b.us.total_cmp(&a.us));
    ops
}

#[derive(Clone, Debug)]
pub struct MicroRow {
    pub op: String,
    pub kernel: &'static str,
    /// Context length the attention rows ran at.
    pub context: Option<usize>,
    pub median_us: f64,
    pub bytes: u64,
    pub gb_s: f64,
    /// gb_s over the measured read bandwidth.
    pub of_read: f64,
}

#[derive(Clone, Debug)]
pub struct MicroReport {
    pub read_gb_s: f64,
    pub layer: usize,
    pub rows: Vec<MicroRow>,
    /// Cost of a dependent dispatch before its work (`floor`).
    pub floor: Option<Vec<floor::FloorRow>>,
}

/// Attainable read bandwidth in GB/s: `read_bandwidth.wgsl` over a large
/// buffer (up to 1 GiB), median of 5 timed runs (GPU timestamps when the
/// adapter has them, else wall clock around each submit).
pub fn read_bandwidth(gpu: &Gpu) -> Result<f64> {
    let size = gpu
        .caps
        .max_storage_binding
        .min(gpu.caps.max_buffer)
        .clamp(16 << 20, 1 << 30)
        & !255;
    let pipes = Pipelines::new(gpu, &gpu.caps)?;
    let src = gpu.scratch("read_bandwidth.src", size)?;
    let n_wg = 4096u32;
    let out = gpu.scratch("read_bandwidth.out", 4 * n_wg as u64)?;
    let params = gpu.uniform(
        "read_bandwidth",
        &ReadParams {
            n_vec4: (size / 16) as u32,
            _pad: [0; 3],
        },
    );
    let bufs = ReadBandwidthBindings {
        p: &params,
        src: &src,
        out: &out,
    };
    let d = Dispatch::new(gpu, &pipes, Kernel::ReadBandwidth, &bufs, [n_wg, 1, 1])?;
    let one = std::slice::from_ref(&d);
    let mut t = Vec::new();
    match Timer::new(gpu) {
        Some(timer) => {
            timer.time(gpu, &[one])?;
            t = timer
                .time(gpu, &[one; 5])?
                .iter()
                .map(|ns| ns / 1e9)
                .collect();
        }
        None => {
            for i in 0..6 {
                let t0 = Instant::now();
                crate::gpu::ops::run(gpu, one)?;
                if i > 0 {
                    t.push(t0.elapsed().as_secs_f64());
                }
            }
        }
    }
    Ok(size as f64 / stats(&t).median / 1e9)
}

/// Dispatch `i` of block `b` and the dispatch at the same offset in every
/// other block of b's kind (dense or MoE: each kind lowers one recipe, so
/// the offsets match); `i` alone outside the blocks (the head).
fn same_op(blocks: &[BlockRange], b: &BlockRange, i: usize) -> Vec<usize> {
    if !(b.attn.start..b.ffn.end).contains(&i) {
        return vec![i];
    }
    let off = i - b.attn.start;
    let len = b.ffn.end - b.attn.start;
    blocks
        .iter()
        .filter(|o| o.moe == b.moe && o.ffn.end - o.attn.start == len)
        .map(|o| o.attn.start + off)
        .collect()
}

#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
pub(crate) struct ReadParams {
    pub(crate) n_vec4: u32,
    pub(crate) _pad: [u32; 3],
}

/// Each dispatch of block `layer` (default: the first MoE block) and of the
/// output head: the same op of every block of that kind (one after
/// another, as in a token: their weights together overflow the L2, where
/// one block's matrix replayed would stay) about `count` times back to
/// back in one pass, `rounds` times; attention at each of `contexts`. A
/// replay waits for the one before it (each writes the same output), as a
/// dependent dispatch waits in a token, so µs per replay is the kernel
/// plus its floor. Timing each dispatch between two timestamps instead
/// would add the timestamp's own cost (~8 µs on the H100's Vulkan driver,
/// which drains the GPU for it).
pub fn micro(
    e: &mut Engine,
    layer: Option<usize>,
    (count, rounds): (usize, usize),
    contexts: &[usize],
) -> Result<MicroReport> {
    model::warm_up(e, 1)?;
    let read_gb_s = read_bandwidth(&e.gpu)?;
    let floor = floor::dispatch_floor(&e.gpu)?;
    let blocks = e.blocks().to_vec();
    let b = match layer {
        Some(l) => blocks.get(l).cloned(),
        None => blocks.iter().find(|b| b.moe).or(blocks.first()).cloned(),
    }
    .ok_or_else(|| Error::InvalidArgument("no such block".into()))?;
    let n_disp = e.dispatches_per_token();
    let head_start = blocks.last().map_or(0, |l| l.ffn.end);
    let row_bytes = (e.model.config.kv_row() * 2) as u64;
    let mut rows = Vec::new();
    let indices: Vec<usize> = (b.attn.start..b.ffn.end)
        .chain(head_start..n_disp)
        .collect();
    for i in indices {
        let (op, _, bytes) = e.dispatch_info(i);
        // By the op: which kernel attends depends on the context (and the
        // adapter), so it is named per context below.
        let ctxs: Vec<Option<usize>> = if op == "attention" {
            contexts.iter().map(|&c| Some(c)).collect()
        } else {
            vec![None]
        };
        for ctx in ctxs {
            e.reset();
            let pos = ctx.map_or(0, |c| c.saturating_sub(1));
            e.jump_to(pos)?;
            let kernel = e.dispatch_info(i).1;
            // Whole tokens first: a GPU left idle drops its clock (an H200
            // sat at 345 MHz between single dispatches), and decode runs
            // at full clock.
            e.time_range(0..n_disp, 3)?;
            let same = same_op(&blocks, &b, i);
            let reps = count.div_ceil(same.len());
            e.time_dispatches(&same, reps)?;
            let per = (0..rounds)
                .map(|_| Ok(e.time_dispatches(&same, reps)? / (reps * same.len()) as f64))
                .collect::<Result<Vec<f64>>>()?;
            let us = stats(&per).median / 1e3;
            let bytes = match ctx {
                Some(c) => c as u64 * row_bytes,
                None => bytes,
            };
            let gb_s = bytes as f64 / (us * 1e3);
            rows.push(MicroRow {
                op: op.clone(),
                kernel,
                context: ctx,
                median_us: us,
                bytes,
                gb_s,
                of_read: gb_s / read_gb_s,
            });
        }
    }
    Ok(MicroReport {
        read_gb_s,
        layer: b.layer,
        rows,
        floor,
    })
}
