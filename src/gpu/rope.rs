//! The rotary table the GPU plans read: (cos θ, sin θ) of each rotated pair
//! at one position, written into the step record per token. GLM-4.7-Flash
//! rotates adjacent pairs with θ_i = pos · base^(−2i/n); with YaRN (ggml's
//! `rope_yarn`), pairs below the corrected range keep θ (extrapolation),
//! pairs above it take θ · freq_scale (interpolation), and a linear ramp
//! mixes the two in between, weighted by ext_factor. YaRN's magnitude
//! correction is not applied here: it is folded into the attention scale
//! (`Config::kq_scale`). The engine's own code, held to the CPU reference
//! by tests/gpu_engine.rs (`rope_table_matches_reference`).

use crate::model::Yarn;

/// (cos, sin) of the `n_dims / 2` pairs at position `pos`.
pub fn cos_sin(pos: usize, n_dims: usize, base: f32, yarn: Option<&Yarn>) -> Vec<(f32, f32)> {
    let n_pairs = n_dims / 2;
    let ln_base = (base as f64).ln();
    let ramp = yarn.map(|y| Ramp::new(y, n_dims, ln_base));
    (0..n_pairs)
        .map(|i| {
            // base^(−2i/n) as an exponential, so every pair is one step.
            let extrap = pos as f64 * (-2.0 * i as f64 / n_dims as f64 * ln_base).exp();
            let theta = match (yarn, &ramp) {
                (Some(y), Some(r)) => {
                    let mix = r.weight(i) * y.ext_factor as f64;
                    extrap * (y.freq_scale as f64 * (1.0 - mix) + mix)
                }
                _ => extrap,
            };
            let (s, c) = theta.sin_cos();
            (c as f32, s as f32)
        })
        .collect()
}

/// YaRN's pair range [lo, hi]: extrapolation below it, interpolation
/// above, linear in between.
struct Ramp {
    lo: f64,
    hi: f64,
}

impl Ramp {
    fn new(y: &Yarn, n_dims: usize, ln_base: f64) -> Ramp {
        // The pair whose wavelength fits `beta` times into the original
        // context (ggml_rope_yarn_corr_dim).
        let pair_at = |beta: f32| {
            let turns = y.n_ctx_orig as f64 / (2.0 * std::f64::consts::PI * beta as f64);
            n_dims as f64 * turns.ln() / (2.0 * ln_base)
        };
        Ramp {
            lo: pair_at(y.beta_fast).floor().max(0.0),
            hi: pair_at(y.beta_slow).ceil().min(n_dims as f64 - 1.0),
        }
    }

    /// 1 at and below `lo` (pure extrapolation), 0 at and above `hi`.
    fn weight(&self, i: usize) -> f64 {
        let span = (self.hi - self.lo).max(0.001);
        1.0 - ((i as f64 - self.lo) / span).clamp(0.0, 1.0)
    }
}
