//! The model tier in llama-bench's vocabulary: `ppN` prefills N prompt
//! tokens and `tgN` generates N tokens one at a time, each at every depth
//! (`-d`): on top of a cache already holding that many tokens (filled with
//! the batched prefill; depth 0 is an empty cache). Each test is repeated
//! `-r` times and reported as mean ± sample standard deviation of its
//! tokens per second, as llama-bench does. Beside each tg test, the block
//! tier's prediction of its token; then the dispatches and barriers of a
//! token and of a prefill chunk, and one token's GPU time per kernel.

use std::time::{Duration, Instant};

use super::block::{self, Prediction};
use super::{by_op, OpTime};
use crate::engine::{Engine, HostTimes, Pick};
use crate::error::{Error, Result};
use crate::gpu::barriers::Barriers;

/// What to measure: every prompt and generation length at every depth.
#[derive(Clone, Debug)]
pub struct ModelSpec {
    /// `ppN` tests (0s are skipped, as in llama-bench).
    pub prompts: Vec<usize>,
    /// `tgN` tests (0s are skipped).
    pub gens: Vec<usize>,
    pub depths: Vec<usize>,
    pub reps: usize,
    /// Replays per round and rounds of the block-tier prediction.
    pub count: usize,
    pub rounds: usize,
}

/// One test, as a row of llama-bench's table.
#[derive(Clone, Debug)]
pub struct TestRun {
    pub n_prompt: usize,
    pub n_gen: usize,
    pub depth: usize,
    /// Wall ns of each repetition.
    pub samples_ns: Vec<f64>,
    /// For tg tests: the token predicted by the block tier.
    pub prediction: Option<Prediction>,
    /// For tg tests: where the host's time went, over every repetition.
    pub host: Option<HostTimes>,
}

impl TestRun {
    /// `pp512`, `tg128`, `tg128 @ d4096`, as llama-bench names them.
    pub fn name(&self) -> String {
        let t = if self.n_gen == 0 {
            format!("pp{}", self.n_prompt)
        } else {
            format!("tg{}", self.n_gen)
        };
        match self.depth {
            0 => t,
            d => format!("{t} @ d{d}"),
        }
    }

    /// Tokens per second of each repetition.
    pub fn samples_ts(&self) -> Vec<f64> {
        let n = (self.n_prompt + self.n_gen) as f64;
        self.samples_ns.iter().map(|ns| n * 1e9 / ns).collect()
    }

    /// (mean, sample standard deviation) of the tokens per second.
    pub fn ts(&self) -> (f64, f64) {
        mean_sd(&self.samples_ts())
    }

    /// Mean wall µs per token.
    pub fn us_per_token(&self) -> f64 {
        let n = (self.n_prompt + self.n_gen).max(1) as f64;
        mean_sd(&self.samples_ns).0 / n / 1e3
    }
}

/// Mean and sample standard deviation (n − 1; 0 for fewer than 2 values),
/// as llama-bench's `avg` and `stdev`.
pub fn mean_sd(v: &[f64]) -> (f64, f64) {
    if v.is_empty() {
        return (0.0, 0.0);
    }
    let n = v.len() as f64;
    let mean = v.iter().sum::<f64>() / n;
    if v.len() < 2 {
        return (mean, 0.0);
    }
    let ss = v.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>();
    (mean, (ss / (n - 1.0)).sqrt())
}

#[derive(Clone, Debug)]
pub struct ModelReport {
    pub tests: Vec<TestRun>,
    /// (depth, seconds) to fill the cache to each depth from the previous
    /// one with the batched prefill.
    pub fills: Vec<(usize, f64)>,
    pub decode: Barriers,
    /// The first dense block's, the first MoE block's and the head's share
    /// of `decode`.
    pub parts: Vec<(&'static str, Barriers)>,
    /// Per prefill chunk (one pass of the prefill plan).
    pub prefill: Barriers,
    /// Position of the profiled token (the first depth).
    pub profile_pos: usize,
    /// GPU µs of the profiled token from per-dispatch timestamps (0
    /// without them), and its wall µs.
    pub gpu_us: f64,
    pub wall_us: f64,
    /// GPU time per op, largest first.
    pub ops: Vec<OpTime>,
    /// Tokens in the profiled prefill chunk.
    pub prefill_chunk: usize,
    /// GPU µs of the profiled chunk (0 without timestamps).
    pub prefill_gpu_us: f64,
    pub prefill_ops: Vec<OpTime>,
}

/// A fixed, vocabulary-wide token for position `i`.
fn token(e: &Engine, i: usize) -> u32 {
    ((i as u64 * 7919 + 13) % e.model.config.n_vocab as u64) as u32
}

fn first(c: &[(u32, f32)], fallback: u32) -> u32 {
    c.first().map_or(fallback, |c| c.0)
}

/// `depth` + `n` tokens must fit the cache.
pub fn check_fits(e: &Engine, depth: usize, n: usize) -> Result<()> {
    match depth.checked_add(n) {
        Some(end) if end <= e.n_ctx() => Ok(()),
        _ => Err(Error::InvalidArgument(format!(
            "depth {depth} + {n} tokens exceed the context {}: raise --ctx",
            e.n_ctx()
        ))),
    }
}

/// First submissions pay for lazy driver work: a few decode steps and one
/// prefill chunk of up to `prompt` tokens. Then half a second of whole
/// tokens: after the upload the GPU idles at a low clock (an H100 sat at
/// 345 MHz, which tripled the dispatch floor and halved the read probe),
/// and nothing may be timed before it is back at full clock. Leaves the
/// cache empty.
pub fn warm_up(e: &mut Engine, prompt: usize) -> Result<()> {
    e.reset();
    for i in 0..4.min(e.n_ctx()) {
        e.step(token(e, i))?;
    }
    e.reset();
    let n = prompt.clamp(1, e.ubatch().min(e.n_ctx()));
    let toks: Vec<u32> = (0..n).map(|i| token(e, i)).collect();
    e.prefill(&toks)?;
    e.reset();
    let n_disp = e.dispatches_per_token();
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_millis(500) {
        e.time_replays(0..n_disp, 8)?;
    }
    e.reset();
    Ok(())
}

/// Prefill positions `from..to` (rows before `from` are already in the
/// cache); seconds taken. Leaves the position at `to`.
pub fn fill(e: &mut Engine, from: usize, to: usize) -> Result<f64> {
    e.jump_to(from.min(e.n_ctx() - 1))?;
    if to <= from {
        e.jump_to(to)?;
        return Ok(0.0);
    }
    let toks: Vec<u32> = (from..to).map(|i| token(e, i)).collect();
    let t0 = Instant::now();
    e.prefill(&toks)?;
    Ok(t0.elapsed().as_secs_f64())
}

/// `ppN` at `depth`, `reps` times.
pub fn pp(e: &mut Engine, depth: usize, n: usize, reps: usize) -> Result<TestRun> {
    check_fits(e, depth, n)?;
    let toks: Vec<u32> = (depth..depth + n).map(|i| token(e, i)).collect();
    let mut samples_ns = Vec::with_capacity(reps);
    for _ in 0..reps {
        e.jump_to(depth)?;
        let t0 = Instant::now();
        e.prefill(&toks)?;
        samples_ns.push(t0.elapsed().as_secs_f64() * 1e9);
    }
    Ok(TestRun {
        n_prompt: n,
        n_gen: 0,
        depth,
        samples_ns,
        prediction: None,
        host: None,
    })
}

/// `tgN` at `depth`, `reps` times: each token the greedy pick of the last.
pub fn tg(e: &mut Engine, depth: usize, n: usize, reps: usize) -> Result<TestRun> {
    check_fits(e, depth, n.max(1))?;
    let mut samples_ns = Vec::with_capacity(reps);
    let mut host = HostTimes::default();
    for _ in 0..reps {
        e.jump_to(depth)?;
        // The last repetition's step queued ahead must not run into this one.
        e.gpu.wait()?;
        e.take_host_times();
        let mut next = token(e, depth);
        let t0 = Instant::now();
        for _ in 0..n {
            next = first(&e.step_ahead(next, Pick::First)?, next);
        }
        samples_ns.push(t0.elapsed().as_secs_f64() * 1e9);
        host += e.take_host_times();
    }
    Ok(TestRun {
        n_prompt: 0,
        n_gen: n,
        depth,
        samples_ns,
        prediction: None,
        host: Some(host),
    })
}

/// Every test of `s`, depth by depth in the order given (the cache filled
/// once per depth), then the profiles.
pub fn model(e: &mut Engine, s: &ModelSpec) -> Result<ModelReport> {
    if s.reps == 0 || s.depths.is_empty() {
        return Err(Error::InvalidArgument(
            "-r must be at least 1 and -d needs a depth".into(),
        ));
    }
    let longest = s.prompts.iter().chain(&s.gens).copied().max().unwrap_or(0);
    for &d in &s.depths {
        check_fits(e, d, longest.max(1))?;
    }
    e.set_candidates(1)?;
    let max_p = s.prompts.iter().copied().max().unwrap_or(1);
    warm_up(e, max_p)?;
    let (mut tests, mut fills, mut filled) = (Vec::new(), Vec::new(), 0);
    for &d in &s.depths {
        fills.push((d, fill(e, filled.min(d), d)?));
        filled = d;
        for &p in s.prompts.iter().filter(|&&p| p > 0) {
            tests.push(pp(e, d, p, s.reps)?);
        }
        for &n in s.gens.iter().filter(|&&n| n > 0) {
            let mut t = tg(e, d, n, s.reps)?;
            t.prediction = Some(block::predict(e, d + n / 2, s.count, s.rounds, None)?);
            tests.push(t);
        }
    }
    profiles(e, s, tests, fills)
}

/// One token's and one prefill chunk's GPU time per op, at the first depth
/// (whose rows are still in the cache when it is the shallowest).
fn profiles(
    e: &mut Engine,
    s: &ModelSpec,
    tests: Vec<TestRun>,
    fills: Vec<(usize, f64)>,
) -> Result<ModelReport> {
    let d0 = s.depths[0].min(e.n_ctx() - 1);
    e.jump_to(d0)?;
    e.profile_token(token(e, d0))?; // warm the timestamp path
    e.jump_to(d0)?;
    let p = e.profile_token(token(e, d0))?;
    let max_p = s.prompts.iter().copied().max().unwrap_or(0).max(1);
    let n = max_p.min(e.ubatch()).min(e.n_ctx() - d0);
    let chunk: Vec<u32> = (d0..d0 + n).map(|i| token(e, i)).collect();
    e.jump_to(d0)?;
    e.profile_prefill(&chunk)?;
    e.jump_to(d0)?;
    let pf = e.profile_prefill(&chunk)?;
    e.reset();
    Ok(ModelReport {
        tests,
        fills,
        decode: e.decode_barriers(),
        parts: block::part_barriers(e),
        prefill: e.prefill_barriers(),
        profile_pos: d0,
        gpu_us: p.gpu_ns / 1e3,
        wall_us: p.wall_ns / 1e3,
        ops: by_op(&p.dispatches),
        prefill_chunk: chunk.len(),
        prefill_gpu_us: pf.iter().map(|d| d.2).sum::<f64>() / 1e3,
        prefill_ops: by_op(&pf),
    })
}
