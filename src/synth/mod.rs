//! Synthetic models: GGUF files with the exact tensor names, shapes, metadata
//! and quant-type mix of the real ones, filled with seeded random weights.
//! No real weights can be downloaded where glmw is tested, so the loaders,
//! the reference and the GPU engine are all exercised on these; `tiny` keeps
//! every structural feature at a size that runs in milliseconds.

mod mix;
mod presets;
pub mod vocab;

use std::path::Path;

pub use mix::Mix;
pub use presets::Preset;

use crate::error::Result;
use crate::gguf::{GgufWriter, TensorSpec, Value};
use crate::quant;

/// How a tensor's values are drawn: around 1 for norm gains, around 0 for
/// everything else (weights ≈ N(0, 0.02) as in trained checkpoints).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Dist {
    pub mean: f32,
    pub std: f32,
}

/// One tensor of a preset: what to write and how to fill it.
pub(crate) struct SynthTensor {
    pub spec: TensorSpec,
    pub dist: Dist,
}

/// Elements generated per independent random stream. Fixed, so that the
/// file depends on the seed alone and not on the number of threads.
const UNIT: usize = 1 << 16;

/// Write `preset` in quant mix `mix` to `path` with weights drawn from
/// `seed`. `progress` is called with (bytes written, total bytes) after
/// each batch.
pub fn synth(
    path: &Path,
    preset: Preset,
    mix: Mix,
    seed: u64,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<SynthSummary> {
    let (metadata, tensors) = preset.build(mix, seed);
    write(path, &metadata, &tensors, seed, progress)
}

/// The metadata and tensor table a preset writes, without any weights
/// (tests use it to check full-size layouts without writing 17 GB).
pub fn plan(preset: Preset, mix: Mix, seed: u64) -> (Vec<(String, Value)>, Vec<TensorSpec>) {
    let (metadata, tensors) = preset.build(mix, seed);
    (metadata, tensors.into_iter().map(|t| t.spec).collect())
}

#[derive(Debug, Clone)]
pub struct SynthSummary {
    pub n_tensors: usize,
    pub tensor_bytes: u64,
}

fn write(
    path: &Path,
    metadata: &[(String, Value)],
    tensors: &[SynthTensor],
    seed: u64,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<SynthSummary> {
    let specs: Vec<TensorSpec> = tensors.iter().map(|t| t.spec.clone()).collect();
    let total: u64 = specs.iter().map(|s| s.n_bytes()).sum::<Result<u64>>()?;
    let mut w = GgufWriter::create(path, metadata, &specs)?;
    let threads = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    let mut done = 0u64;
    for (ti, t) in tensors.iter().enumerate() {
        let ty = t.spec.ggml_type;
        let n = t.spec.n_elements() as usize;
        let bs = ty.block_size() as usize;
        let unit = UNIT.div_ceil(bs) * bs;
        let n_units = n.div_ceil(unit);
        // Batches of units are generated in parallel and written in order;
        // memory stays at one batch whatever the tensor size.
        let batch = threads * 16;
        for first in (0..n_units).step_by(batch) {
            let last = (first + batch).min(n_units);
            let mut parts: Vec<Vec<u8>> = vec![Vec::new(); last - first];
            let per = parts.len().div_ceil(threads);
            let results: Vec<Result<()>> = std::thread::scope(|s| {
                let handles: Vec<_> = parts
                    .chunks_mut(per)
                    .enumerate()
                    .map(|(ci, chunk)| {
                        s.spawn(move || -> Result<()> {
                            let mut vals = Vec::with_capacity(unit);
                            for (k, out) in chunk.iter_mut().enumerate() {
                                let u = first + ci * per + k;
                                let len = unit.min(n - u * unit);
                                fill(
                                    &mut vals,
                                    len,
                                    t.dist,
                                    stream_seed(seed, ti as u64, u as u64),
                                );
                                quant::quantize_into(ty, &vals, out)?;
                            }
                            Ok(())
                        })
                    })
                    .collect();
                handles
                    .into_iter()
                    .map(|h| h.join().expect("synth worker panicked"))
                    .collect()
            });
            results.into_iter().collect::<Result<()>>()?;
            for p in &parts {
                w.write_data(p)?;
                done += p.len() as u64;
            }
            progress(done, total);
        }
    }
    w.finish()?;
    Ok(SynthSummary {
        n_tensors: tensors.len(),
        tensor_bytes: total,
    })
}

/// splitmix64 of (seed, tensor, unit): independent, reproducible streams.
fn stream_seed(seed: u64, tensor: u64, unit: u64) -> u64 {
    let mut z = seed
        ^ tensor.wrapping_mul(0x9E37_79B9_7F4A_7C15)
        ^ unit.wrapping_mul(0xD1B5_4A32_D192_ED03);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Fill `out` with `len` values ≈ N(mean, std): the sum of four 16-bit
/// uniforms (Irwin–Hall) is close to Gaussian and costs one RNG step, which
/// matters when 30 billion values are drawn.
fn fill(out: &mut Vec<f32>, len: usize, d: Dist, seed: u64) {
    out.clear();
    let mut s = seed | 1;
    // Var of a sum of four U(0,1) is 1/3; sum/65536 - 2 has std sqrt(1/3).
    let k = d.std * 3f32.sqrt() / 65536.0;
    for _ in 0..len {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        let sum = (s & 0xFFFF) + ((s >> 16) & 0xFFFF) + ((s >> 32) & 0xFFFF) + (s >> 48);
        out.push(d.mean + (sum as f32 - 131072.0) * k);
    }
}
