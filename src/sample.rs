//! Choosing the next token from the GPU's top candidates (the GPU selects
//! them out of the whole vocabulary): repetition / presence / frequency
//! penalties over the last tokens, then greedy, or temperature with top-k,
//! top-p and min-p, from a seeded generator so the same seed gives the same
//! tokens. Penalties only lower logits, so applying them to the candidates
//! (all 64 when a penalty is on) matches penalising the whole vocabulary
//! unless more than 64 - k of the candidates are penalised below the rest.

use std::collections::VecDeque;

use crate::engine::{Candidates, Pick, PickParams};
use crate::error::{Error, Result};
use crate::gpu::plan::MAX_CANDIDATES;

/// Typed sampling settings (the CLI's `--temp --top-k --top-p --min-p
/// --repeat-penalty --repeat-last-n --presence-penalty --frequency-penalty
/// --seed`); llama.cpp's meanings and defaults.
#[derive(Clone, Copy, Debug)]
pub struct SamplerOptions {
    /// 0 = greedy.
    pub temperature: f32,
    /// Candidates considered (1..=64; 0 means all 64 the GPU returns).
    pub top_k: usize,
    /// Smallest set of candidates whose probability reaches this, in (0, 1].
    pub top_p: f32,
    /// Drop candidates below this fraction of the best one's probability
    /// (0 = off).
    pub min_p: f32,
    /// Divide positive (multiply negative) logits of recent tokens by this
    /// (1 = off).
    pub repeat_penalty: f32,
    /// Recent tokens the penalties look at.
    pub repeat_last_n: usize,
    /// Subtracted from the logit of every recent token (0 = off).
    pub presence_penalty: f32,
    /// Subtracted once per occurrence among the recent tokens (0 = off).
    pub frequency_penalty: f32,
    pub seed: u64,
}

impl Default for SamplerOptions {
    fn default() -> Self {
        SamplerOptions {
            temperature: 0.8,
            top_k: 40,
            top_p: 0.95,
            min_p: 0.05,
            repeat_penalty: 1.0,
            repeat_last_n: 64,
            presence_penalty: 0.0,
            frequency_penalty: 0.0,
            seed: 0,
        }
    }
}

pub struct Sampler {
    opts: SamplerOptions,
    state: u64,
    recent: VecDeque<u32>,
    /// The next uniform, drawn early by `pick_ahead`.
    drawn: Option<f64>,
}

fn check(ok: bool, msg: impl FnOnce() -> String) -> Result<()> {
    if ok {
        Ok(())
    } else {
        Err(Error::InvalidArgument(msg()))
    }
}

impl Sampler {
    pub fn new(opts: SamplerOptions) -> Result<Sampler> {
        let o = &opts;
        check(o.temperature >= 0.0 && o.temperature.is_finite(), || {
            format!(
                "temperature {} must be a finite number >= 0 (0 is greedy)",
                o.temperature
            )
        })?;
        check(o.top_p > 0.0 && o.top_p <= 1.0, || {
            format!("top-p {} must be in (0, 1]", o.top_p)
        })?;
        check(o.top_k <= MAX_CANDIDATES, || {
            format!(
                "top-k {} is above {MAX_CANDIDATES}, the candidates the GPU returns per token",
                o.top_k
            )
        })?;
        check((0.0..=1.0).contains(&o.min_p), || {
            format!("min-p {} must be in [0, 1]", o.min_p)
        })?;
        check(
            o.repeat_penalty > 0.0 && o.repeat_penalty.is_finite(),
            || {
                format!(
                    "repeat penalty {} must be a finite number > 0 (1 is off)",
                    o.repeat_penalty
                )
            },
        )?;
        check(
            o.presence_penalty.is_finite() && o.frequency_penalty.is_finite(),
            || "presence and frequency penalties must be finite numbers".into(),
        )?;
        Ok(Sampler {
            opts,
            state: opts.seed ^ 0x9E37_79B9_7F4A_7C15,
            recent: VecDeque::new(),
            drawn: None,
        })
    }

    fn penalising(&self) -> bool {
        let o = &self.opts;
        o.repeat_last_n > 0
            && (o.repeat_penalty != 1.0 || o.presence_penalty != 0.0 || o.frequency_penalty != 0.0)
    }

    /// How the GPU can pick the next token as `sample` will, so that the
    /// engine queues its step before this one is read back: the first
    /// candidate when greedy, else sampled with the uniform `sample` will
    /// draw next (drawn now and kept for it). None with penalties (they
    /// depend on the tokens).
    pub fn pick_ahead(&mut self) -> Option<Pick> {
        let o = self.opts;
        // What the engine returns for these settings (`candidates`).
        let n_cands = self.candidates();
        if self.penalising() {
            return None;
        }
        if o.temperature == 0.0 || o.top_k == 1 || n_cands <= 1 {
            return Some(Pick::First);
        }
        let u = self.uniform();
        self.drawn = Some(u);
        let k = match o.top_k {
            0 => n_cands,
            k => k.min(n_cands),
        };
        Some(Pick::Sample(PickParams {
            k: k as u32,
            inv_t: 1.0 / o.temperature,
            top_p: o.top_p,
            min_p: o.min_p,
            u: u as f32,
            _pad: [0; 3],
        }))
    }

    /// Candidates the engine must return for these settings.
    pub fn candidates(&self) -> usize {
        if self.penalising() || (self.opts.temperature > 0.0 && self.opts.top_k == 0) {
            MAX_CANDIDATES
        } else if self.opts.temperature == 0.0 {
            1
        } else {
            self.opts.top_k
        }
    }

    /// Record a token of the context (prompt or generated) for the penalties.
    pub fn accept(&mut self, token: u32) {
        if self.opts.repeat_last_n == 0 {
            return;
        }
        if self.recent.len() == self.opts.repeat_last_n {
            self.recent.pop_front();
        }
        self.recent.push_back(token);
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

    /// The candidates with penalties applied, best first.
    fn penalised(&self, cands: &Candidates) -> Candidates {
        let o = &self.opts;
        let mut out: Candidates = cands
            .iter()
            .map(|&(id, l)| {
                let n = self.recent.iter().filter(|&&t| t == id).count();
                if n == 0 {
                    return (id, l);
                }
                let l = if l > 0.0 {
                    l / o.repeat_penalty
                } else {
                    l * o.repeat_penalty
                };
                let l = l - n as f32 * o.frequency_penalty - o.presence_penalty;
                // Extreme (finite) penalties saturate instead of reaching an
                // infinity, whose differences are NaN in the softmax below.
                (id, l.clamp(f32::MIN, f32::MAX))
            })
            .collect();
        out.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        out
    }

    /// Pick one token from `cands` (best first).
    pub fn sample(&mut self, cands: &Candidates) -> Result<u32> {
        let drawn = self.drawn.take();
        if cands.is_empty() {
            return Err(Error::Gpu("the GPU returned no candidates".into()));
        }
        let owned;
        let cands = if self.penalising() {
            owned = self.penalised(cands);
            &owned
        } else {
            cands
        };
        let (best, top) = cands[0];
        if self.opts.temperature == 0.0 || cands.len() == 1 {
            return Ok(best);
        }
        let t = self.opts.temperature as f64;
        let k = match self.opts.top_k {
            0 => cands.len(),
            k => k.min(cands.len()),
        };
        let mut p: Vec<f64> = cands[..k]
            .iter()
            .map(|&(_, l)| ((l - top) as f64 / t).exp())
            .collect();
        // min-p against the best candidate (p[0] = 1 before normalising).
        let keep_min = p
            .iter()
            .take_while(|&&v| v >= self.opts.min_p as f64)
            .count()
            .max(1);
        p.truncate(keep_min);
        let sum: f64 = p.iter().sum();
        let mut cum = 0.0;
        let mut keep = p.len();
        for (i, v) in p.iter_mut().enumerate() {
            *v /= sum;
            cum += *v;
            if cum >= self.opts.top_p as f64 {
                keep = i + 1;
                break;
            }
        }
        let mass: f64 = p[..keep].iter().sum();
        let mut u = drawn.unwrap_or_else(|| self.uniform()) * mass;
        for (i, &v) in p[..keep].iter().enumerate() {
            if u < v {
                return Ok(cands[i].0);
            }
            u -= v;
        }
        Ok(cands[keep - 1].0)
    }
}
