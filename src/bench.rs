//! The benchmark ladder behind `glmw bench` and `cargo bench`
//! (performance.md): micro (each decode kernel at the model's shapes),
//! block (one transformer block replayed from the engine's own plan) and
//! model (prefill, decode at several context depths, GPU time per kernel).
//! Everything here measures; nothing asserts a speed.

use std::time::Instant;

use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::gpu::ops::Dispatch;
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

#[derive(Clone, Debug)]
pub struct DecodeRun {
    pub depth: usize,
    pub tokens: usize,
    pub tok_s: f64,
}

#[derive(Clone, Debug)]
pub struct ModelReport {
    pub prompt_tokens: usize,
    /// Prompt tokens per second through the batched prefill.
    pub pp_tok_s: f64,
    /// Time to first token: the prompt plus choosing the first token.
    pub ttft_ms: f64,
    pub decode: Vec<DecodeRun>,
    pub dispatches: usize,
    /// GPU µs per token from timestamps (0 without them).
    pub gpu_us: f64,
    /// Wall µs of the profiled token.
    pub wall_us: f64,
    /// GPU time per op, largest first.
    pub ops: Vec<OpTime>,
    /// Tokens in the profiled prefill chunk (the prompt's first chunk).
    pub prefill_chunk: usize,
    pub prefill_dispatches: usize,
    /// GPU µs of the profiled chunk (0 without timestamps).
    pub prefill_gpu_us: f64,
    /// The chunk's GPU time per op, largest first.
    pub prefill_ops: Vec<OpTime>,
}

/// Prefill `prompt_len` tokens, decode `gen` greedily after it and at each
/// of `depths` (jumped to; see `Engine::jump_to`), then profile one token.
pub fn model(
    e: &mut Engine,
    prompt_len: usize,
    gen: usize,
    depths: &[usize],
) -> Result<ModelReport> {
    let n_vocab = e.model.config.n_vocab as u32;
    let token = |i: usize| (i as u32 * 7919 + 13) % n_vocab;
    e.set_candidates(1)?;
    let prompt: Vec<u32> = (0..prompt_len).map(token).collect();
    // Warm-up: first submissions pay for lazy driver work.
    e.reset();
    for i in 0..4 {
        e.step(token(i))?;
    }
    e.reset();
    e.prefill(&prompt[..prompt_len.min(e.ubatch())])?;
    e.reset();
    let t0 = Instant::now();
    let next = e.prefill(&prompt)?[0].0;
    let prompt_s = t0.elapsed().as_secs_f64();
    let mut decode = Vec::new();
    let mut run = |e: &mut Engine, depth: usize, mut next: u32| -> Result<()> {
        let t = Instant::now();
        for _ in 0..gen {
            next = e.step(next)?[0].0;
        }
        decode.push(DecodeRun {
            depth,
            tokens: gen,
            tok_s: gen as f64 / t.elapsed().as_secs_f64(),
        });
        Ok(())
    };
    if gen > 0 {
        run(e, prompt_len, next)?;
        for &d in depths {
            if d + gen > e.n_ctx() {
                return Err(Error::InvalidArgument(format!(
                    "depth {d} + {gen} generated tokens exceeds the context {}: raise --ctx",
                    e.n_ctx()
                )));
            }
            e.reset();
            e.jump_to(d)?;
            run(e, d, token(d))?;
        }
    }
    e.reset();
    e.jump_to(prompt_len.min(e.n_ctx() - 1))?;
    e.profile_token(token(0))?; // warm the timestamp path
    e.jump_to(prompt_len.min(e.n_ctx() - 1))?;
    let p = e.profile_token(token(0))?;
    let ops = by_op(&p.dispatches);
    // One prefill chunk with timestamps (after a warm-up run of it).
    let chunk = &prompt[..prompt_len.min(e.ubatch())];
    e.reset();
    e.profile_prefill(chunk)?;
    e.reset();
    let pf = e.profile_prefill(chunk)?;
    e.reset();
    Ok(ModelReport {
        prompt_tokens: prompt_len,
        pp_tok_s: prompt_len as f64 / prompt_s.max(1e-9),
        ttft_ms: prompt_s * 1e3,
        decode,
        dispatches: e.dispatches_per_token(),
        gpu_us: p.gpu_ns / 1e3,
        wall_us: p.wall_ns / 1e3,
        ops,
        prefill_chunk: chunk.len(),
        prefill_dispatches: pf.len(),
        prefill_gpu_us: pf.iter().map(|d| d.2).sum::<f64>() / 1e3,
        prefill_ops: by_op(&pf),
    })
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
pub struct BlockReport {
    pub layer: usize,
    pub moe: bool,
    /// µs per block replay, all samples.
    pub block: Stats,
    /// Median of the per-round medians.
    pub block_round_median: f64,
    /// The feed-forward half alone.
    pub ffn: Stats,
    /// The dense block 0 (when the model has one and it is not `layer`).
    pub dense: Option<Stats>,
    pub dispatches: usize,
}

/// Replay block `layer` (default: the first MoE block) `count` times per
/// round for `rounds` rounds, at context depth `depth`.
pub fn block(
    e: &mut Engine,
    layer: Option<usize>,
    count: usize,
    rounds: usize,
    depth: usize,
) -> Result<BlockReport> {
    let blocks = e.blocks().to_vec();
    let b = match layer {
        Some(l) => blocks.get(l).cloned().ok_or_else(|| {
            Error::InvalidArgument(format!(
                "--layer {l}: the model has {} blocks",
                blocks.len()
            ))
        })?,
        None => blocks
            .iter()
            .find(|b| b.moe)
            .or(blocks.first())
            .cloned()
            .ok_or_else(|| Error::InvalidArgument("the model has no blocks".into()))?,
    };
    e.reset();
    e.jump_to(depth)?;
    let whole = b.attn.start..b.ffn.end;
    e.time_range(whole.clone(), count.min(8))?; // warm-up
    let mut all = Vec::new();
    let mut round_medians = Vec::new();
    for _ in 0..rounds {
        let us: Vec<f64> = e
            .time_range(whole.clone(), count)?
            .iter()
            .map(|ns| ns / 1e3)
            .collect();
        round_medians.push(stats(&us).median);
        all.extend(us);
    }
    let ffn: Vec<f64> = e
        .time_range(b.ffn.clone(), count * rounds)?
        .iter()
        .map(|ns| ns / 1e3)
        .collect();
    let dense = match blocks.iter().find(|d| !d.moe && d.layer != b.layer) {
        Some(d) => {
            let us: Vec<f64> = e
                .time_range(d.attn.start..d.ffn.end, count * rounds)?
                .iter()
                .map(|ns| ns / 1e3)
                .collect();
            Some(stats(&us))
        }
        None => None,
    };
    Ok(BlockReport {
        layer: b.layer,
        moe: b.moe,
        block: stats(&all),
        block_round_median: stats(&round_medians).median,
        ffn: stats(&ffn),
        dense,
        dispatches: whole.len(),
    })
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
    let d = Dispatch::new(
        gpu,
        &pipes,
        Kernel::ReadBandwidth,
        &[],
        &[&params, &src, &out],
        [n_wg, 1, 1],
    )?;
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

#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
struct ReadParams {
    n_vec4: u32,
    _pad: [u32; 3],
}

/// Each dispatch of block `layer` (default: the first MoE block) and of the
/// output head, replayed `count` times; attention at each of `contexts`.
pub fn micro(
    e: &mut Engine,
    layer: Option<usize>,
    count: usize,
    contexts: &[usize],
) -> Result<MicroReport> {
    let read_gb_s = read_bandwidth(e.gpu)?;
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
        let (op, kernel, bytes) = e.dispatch_info(i);
        let ctxs: Vec<Option<usize>> = if kernel == "attention" {
            contexts.iter().map(|&c| Some(c)).collect()
        } else {
            vec![None]
        };
        for ctx in ctxs {
            e.reset();
            let pos = ctx.map_or(0, |c| c.saturating_sub(1));
            e.jump_to(pos)?;
            // Whole tokens first: a GPU left idle drops its clock (an H200
            // sat at 345 MHz between single dispatches), and decode runs
            // at full clock.
            e.time_range(0..n_disp, 3)?;
            e.time_range(i..i + 1, 4)?;
            let us = stats(&e.time_range(i..i + 1, count)?).median / 1e3;
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
    })
}
