//! The sampling flags `generate`, `chat` and `serve` share (flattened into
//! each), with llama.cpp's names, short flags, aliases and defaults, and
//! the `-n` parser where -1 means "until the end of the turn or context".

use glmw::gpu::plan::MAX_CANDIDATES;
use glmw::sample::SamplerOptions;

#[derive(clap::Args, Clone, Debug)]
pub struct SamplingArgs {
    /// Sampling temperature; 0 is greedy (always the most likely token).
    #[arg(
        long,
        visible_alias = "temperature",
        default_value_t = 0.8,
        allow_negative_numbers = true
    )]
    pub temp: f32,
    /// Sample among the K most likely tokens; 0 is off (all the GPU's 64
    /// best candidates; larger values also take all 64).
    #[arg(long, default_value_t = 40)]
    pub top_k: usize,
    /// Keep the smallest set of top tokens whose probability reaches P, in (0, 1].
    #[arg(long, default_value_t = 0.95, allow_negative_numbers = true)]
    pub top_p: f32,
    /// Drop tokens less likely than P times the most likely one (0 = off).
    #[arg(long, default_value_t = 0.05, allow_negative_numbers = true)]
    pub min_p: f32,
    /// Penalise tokens seen in the last --repeat-last-n tokens: positive
    /// logits are divided by it, negative ones multiplied (1 = off).
    #[arg(long, default_value_t = 1.0, allow_negative_numbers = true)]
    pub repeat_penalty: f32,
    /// How many recent tokens (prompt included) the penalties look at.
    #[arg(long, default_value_t = 64)]
    pub repeat_last_n: usize,
    /// Subtract this from the logit of every recent token (0 = off).
    #[arg(long, default_value_t = 0.0, allow_negative_numbers = true)]
    pub presence_penalty: f32,
    /// Subtract this once per occurrence among the recent tokens (0 = off).
    #[arg(long, default_value_t = 0.0, allow_negative_numbers = true)]
    pub frequency_penalty: f32,
    /// Stop when the output contains this text (repeatable); the stop text
    /// itself is not shown.
    #[arg(long)]
    pub stop: Vec<String>,
    /// Random seed for sampling (default: from the clock; -1 too, as in
    /// llama.cpp).
    #[arg(long, short = 's', allow_negative_numbers = true)]
    pub seed: Option<i64>,
}

impl SamplingArgs {
    /// The sampler these flags ask for (a seed not given, or -1, from the
    /// clock).
    pub fn options(&self) -> SamplerOptions {
        SamplerOptions {
            temperature: self.temp,
            // The GPU returns its 64 best candidates: top-k past that
            // selects them all, as 0 (off) does.
            top_k: if self.top_k > MAX_CANDIDATES {
                0
            } else {
                self.top_k
            },
            top_p: self.top_p,
            min_p: self.min_p,
            repeat_penalty: self.repeat_penalty,
            repeat_last_n: self.repeat_last_n,
            presence_penalty: self.presence_penalty,
            frequency_penalty: self.frequency_penalty,
            seed: match self.seed {
                Some(s) if s >= 0 => s as u64,
                _ => super::clock_seed(),
            },
        }
    }
}

/// `-n`: most tokens to generate; `None` (-1) is "until the end of the
/// turn or of the context".
#[derive(Clone, Copy, Debug)]
pub struct NPredict(pub Option<usize>);

impl NPredict {
    /// The limit in a context of `room` tokens.
    pub fn within(self, room: usize) -> usize {
        self.0.map_or(room, |n| n.min(room))
    }
}

/// Parse `-n`: a count, or -1 for no limit.
pub fn n_predict(s: &str) -> Result<NPredict, String> {
    match s.trim().parse::<i64>() {
        Ok(-1) => Ok(NPredict(None)),
        Ok(n) if n >= 0 => usize::try_from(n)
            .map(|n| NPredict(Some(n)))
            .map_err(|e| e.to_string()),
        _ => Err(format!(
            "{s:?} is not a token count (a number >= 0, or -1 for no limit)"
        )),
    }
}
