//! Plain-f32 building blocks of the reference forward pass. Weight matrices
//! are read straight from their GGUF blocks and dequantized row by row, so
//! the GPU's repacked layouts are checked against the file itself.

use crate::error::Result;
use crate::gguf::{GgufFile, TensorInfo};
use crate::model::Yarn;
use crate::quant;

/// Below this many weights a matvec runs on the calling thread: spawning
/// costs more than it saves on the tiny test models.
const PARALLEL_MIN_WEIGHTS: usize = 1 << 18;

/// y = W · x for one 2-D slice of `t` (`slice` selects the expert of a 3-D
/// tensor; 0 for matrices): `y[r] = Σ_k W[r][k] · x[k]`, rows along ne1.
pub fn matvec(f: &GgufFile, t: &TensorInfo, slice: usize, x: &[f32]) -> Result<Vec<f32>> {
    let cols = t.ne(0) as usize;
    let rows = t.ne(1) as usize;
    assert_eq!(x.len(), cols, "matvec {}: input length", t.name);
    let row_bytes = t.ggml_type.row_bytes(cols as u64).expect("checked at load") as usize;
    let data = &f.tensor_data(t)[slice * rows * row_bytes..(slice + 1) * rows * row_bytes];
    let mut y = vec![0f32; rows];
    let run = |y: &mut [f32], first_row: usize| -> Result<()> {
        let mut buf = vec![0f32; cols];
        for (i, out) in y.iter_mut().enumerate() {
            let r = first_row + i;
            quant::dequantize(
                t.ggml_type,
                &data[r * row_bytes..(r + 1) * row_bytes],
                &mut buf,
            )?;
            *out = dot(&buf, x);
        }
        Ok(())
    };
    let threads = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    if rows * cols < PARALLEL_MIN_WEIGHTS || threads == 1 {
        run(&mut y, 0)?;
        return Ok(y);
    }
    let chunk = rows.div_ceil(threads);
    std::thread::scope(|s| {
        let handles: Vec<_> = y
            .chunks_mut(chunk)
            .enumerate()
            .map(|(i, part)| s.spawn(move || run(part, i * chunk)))
            .collect();
        handles
            .into_iter()
            .try_for_each(|h| h.join().expect("matvec worker panicked"))
    })?;
    Ok(y)
}

/// Dequantize row `r` of a 2-D tensor (embedding lookup).
pub fn row(f: &GgufFile, t: &TensorInfo, r: usize) -> Result<Vec<f32>> {
    let cols = t.ne(0) as usize;
    let row_bytes = t.ggml_type.row_bytes(cols as u64).expect("checked at load") as usize;
    quant::dequantize_vec(
        t.ggml_type,
        &f.tensor_data(t)[r * row_bytes..(r + 1) * row_bytes],
        cols,
    )
}

/// A whole F32 tensor (norm gains, router, bias).
pub fn vector(f: &GgufFile, t: &TensorInfo) -> Result<Vec<f32>> {
    quant::dequantize_vec(t.ggml_type, f.tensor_data(t), t.n_elements() as usize)
}

/// Sum in f64: the oracle should not carry the rounding of the kernels it judges.
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    a.iter()
        .zip(b)
        .map(|(&x, &y)| x as f64 * y as f64)
        .sum::<f64>() as f32
}

/// RMSNorm(x)·g with ggml's formula: x / sqrt(mean(x²) + eps), then × g.
pub fn rms_norm(x: &[f32], g: &[f32], eps: f32) -> Vec<f32> {
    let ms = x.iter().map(|&v| v as f64 * v as f64).sum::<f64>() / x.len() as f64;
    let s = 1.0 / (ms + eps as f64).sqrt();
    x.iter()
        .zip(g)
        .map(|(&v, &w)| (v as f64 * s) as f32 * w)
        .collect()
}

pub fn silu(x: f32) -> f32 {
    x / (1.0 + (-x).exp())
}

pub fn sigmoid(x: f32) -> f32 {
    1.0 / (1.0 + (-x).exp())
}

/// In-place softmax in f32 with the max subtracted (as ggml does).
pub fn softmax(x: &mut [f32]) {
    let max = x.iter().cloned().fold(f32::NEG_INFINITY, f32::max);
    let mut sum = 0f64;
    for v in x.iter_mut() {
        *v = (*v - max).exp();
        sum += *v as f64;
    }
    for v in x.iter_mut() {
        *v = (*v as f64 / sum) as f32;
    }
}

/// RoPE angles for one position: ggml's "normal" rotation of adjacent pairs
/// (2i, 2i+1) with θ_i = pos · base^(−2i/n_dims), blended with YaRN's
/// interpolation when the model uses it. Returns (cos, sin) per pair; the
/// magnitude is 1 because deepseek2 folds YaRN's mscale into kq_scale.
pub fn rope_cos_sin(pos: usize, n_dims: usize, base: f32, yarn: Option<&Yarn>) -> Vec<(f32, f32)> {
    let theta_scale = (base as f64).powf(-2.0 / n_dims as f64);
    let corr = yarn.map(|y| yarn_corr_dims(n_dims, y.n_ctx_orig, base, y.beta_fast, y.beta_slow));
    (0..n_dims / 2)
        .map(|i| {
            let extrap = pos as f64 * theta_scale.powi(i as i32);
            let theta = match (yarn, corr) {
                (Some(y), Some((lo, hi))) => {
                    let interp = y.freq_scale as f64 * extrap;
                    let ramp = 1.0 - ((i as f64 - lo) / (hi - lo).max(0.001)).clamp(0.0, 1.0);
                    let mix = ramp * y.ext_factor as f64;
                    interp * (1.0 - mix) + extrap * mix
                }
                _ => extrap,
            };
            (theta.cos() as f32, theta.sin() as f32)
        })
        .collect()
}

/// ggml_rope_yarn_corr_dims: the pair range over which YaRN ramps from
/// extrapolation to interpolation.
fn yarn_corr_dims(
    n_dims: usize,
    n_ctx_orig: u32,
    base: f32,
    beta_fast: f32,
    beta_slow: f32,
) -> (f64, f64) {
    let corr = |beta: f32| {
        n_dims as f64 * (n_ctx_orig as f64 / (beta as f64 * 2.0 * std::f64::consts::PI)).ln()
            / (2.0 * (base as f64).ln())
    };
    let lo = corr(beta_fast).floor().max(0.0);
    let hi = corr(beta_slow).ceil().min(n_dims as f64 - 1.0);
    (lo, hi)
}

/// Rotate adjacent pairs of `x` in place.
pub fn rope_apply(x: &mut [f32], cs: &[(f32, f32)]) {
    for (i, &(c, s)) in cs.iter().enumerate() {
        let (a, b) = (x[2 * i], x[2 * i + 1]);
        x[2 * i] = a * c - b * s;
        x[2 * i + 1] = a * s + b * c;
    }
}

/// Relative L2 error ‖a − b‖ / ‖b‖ (b is the reference), in f64.
pub fn rel_l2(a: &[f32], b: &[f32]) -> f64 {
    assert_eq!(a.len(), b.len());
    let (mut num, mut den) = (0f64, 0f64);
    for (&x, &y) in a.iter().zip(b) {
        num += (x as f64 - y as f64).powi(2);
        den += (y as f64).powi(2);
    }
    (num / den.max(f64::MIN_POSITIVE)).sqrt()
}

/// Dequantize one whole 2-D slice of a (possibly 3-D) tensor, row-major.
pub fn dequant_slice(f: &GgufFile, t: &TensorInfo, slice: usize) -> Result<Vec<f32>> {
    let n = (t.ne(0) * t.ne(1)) as usize;
    let bytes =
        t.ggml_type.row_bytes(t.ne(0)).expect("checked at load") as usize * t.ne(1) as usize;
    quant::dequantize_vec(
        t.ggml_type,
        &f.tensor_data(t)[slice * bytes..(slice + 1) * bytes],
        n,
    )
}
