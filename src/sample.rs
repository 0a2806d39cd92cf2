//! Choosing the next token from the GPU's top candidates: greedy, or
//! temperature with top-k and top-p over the candidates, from a seeded
//! generator so the same seed gives the same tokens.

use crate::engine::Candidates;
use crate::error::{Error, Result};
use crate::gpu::plan::MAX_CANDIDATES;

/// Typed sampling settings (the CLI's `--temp --top-k --top-p --seed`).
#[derive(Clone, Copy, Debug)]
pub struct SamplerOptions {
    /// 0 = greedy.
    pub temperature: f32,
    /// Candidates considered (1..=64; 0 means all 64 the GPU returns).
    pub top_k: usize,
    /// Smallest set of candidates whose probability reaches this, in (0, 1].
    pub top_p: f32,
    pub seed: u64,
}

impl Default for SamplerOptions {
    fn default() -> Self {
        SamplerOptions {
            temperature: 0.8,
            top_k: 40,
            top_p: 0.95,
            seed: 0,
        }
    }
}

pub struct Sampler {
    opts: SamplerOptions,
    state: u64,
}

impl Sampler {
    pub fn new(opts: SamplerOptions) -> Result<Sampler> {
        if !(opts.temperature >= 0.0 && opts.temperature.is_finite()) {
            return Err(Error::InvalidArgument(format!(
                "temperature {} must be a finite number >= 0 (0 is greedy)",
                opts.temperature
            )));
        }
        if !(opts.top_p > 0.0 && opts.top_p <= 1.0) {
            return Err(Error::InvalidArgument(format!(
                "top-p {} must be in (0, 1]",
                opts.top_p
            )));
        }
        if opts.top_k > MAX_CANDIDATES {
            return Err(Error::InvalidArgument(format!(
                "top-k {} is above {MAX_CANDIDATES}, the candidates the GPU returns per token",
                opts.top_k
            )));
        }
        Ok(Sampler {
            opts,
            state: opts.seed ^ 0x9E37_79B9_7F4A_7C15,
        })
    }

    /// Candidates the engine must return for these settings.
    pub fn candidates(&self) -> usize {
        if self.opts.temperature == 0.0 {
            1
        } else if self.opts.top_k == 0 {
            MAX_CANDIDATES
        } else {
            self.opts.top_k
        }
    }

    /// splitmix64, as a uniform f64 in [0, 1).
    fn uniform(&mut self) -> f64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        (z >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Pick one token from `cands` (best first).
    pub fn sample(&mut self, cands: &Candidates) -> Result<u32> {
        let Some(&(best, top)) = cands.first() else {
            return Err(Error::Gpu("the GPU returned no candidates".into()));
        };
        if self.opts.temperature == 0.0 || cands.len() == 1 {
            return Ok(best);
        }
        let t = self.opts.temperature as f64;
        let n = cands.len().min(self.candidates());
        let mut p: Vec<f64> = cands[..n]
            .iter()
            .map(|&(_, l)| ((l - top) as f64 / t).exp())
            .collect();
        let sum: f64 = p.iter().sum();
        let mut cum = 0.0;
        let mut keep = n;
        for (i, v) in p.iter_mut().enumerate() {
            *v /= sum;
            cum += *v;
            if cum >= self.opts.top_p as f64 {
                keep = i + 1;
                break;
            }
        }
        let mass: f64 = p[..keep].iter().sum();
        let mut u = self.uniform() * mass;
        for (i, &v) in p[..keep].iter().enumerate() {
            if u < v {
                return Ok(cands[i].0);
            }
            u -= v;
        }
        Ok(cands[keep - 1].0)
    }
}
