//! The block tier: a block of the engine's own decode plan replayed many
//! times inside one submission, back to back as consecutive blocks run
//! inside a token, each replay a command buffer of its own so that its
//! buffers change state as a layer's do inside a token
//! (`Engine::time_replays`). Dense block + MoE blocks + output head then
//! predict the token, which the model tier measures beside it.

use std::ops::Range;

use super::{model, stats, Stats, TestRun};
use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::gpu::barriers::Barriers;
use crate::gpu::plan::BlockRange;

/// The token predicted from replayed blocks at one position.
#[derive(Clone, Debug)]
pub struct Prediction {
    /// Position the blocks ran at (the middle of the tg test they predict).
    pub pos: usize,
    /// µs per replay of the first dense block, one sample per round.
    pub dense: Option<Stats>,
    pub n_dense: usize,
    /// The MoE block measured (the first unless chosen).
    pub moe_layer: Option<usize>,
    pub moe: Option<Stats>,
    pub n_moe: usize,
    /// The output head (norm, head matvec, top-k).
    pub head: Stats,
    /// n_dense × dense + n_moe × MoE + head, from the medians.
    pub token_us: f64,
    /// µs per MoE block when all MoE blocks run once in sequence (each
    /// with its own weights, as in a token), replayed as a whole: the
    /// check on `moe`, whose one block's weights may stay in the GPU's
    /// last-level cache from replay to replay.
    pub moe_sequence: Option<Stats>,
    /// µs of one whole token (every dispatch of the plan) replayed inside
    /// one submission, a command buffer each, at one position. A measured
    /// token takes ~2% more on an H200, and that is not the GPU waiting
    /// for the host (the host waits for the GPU; several steps a
    /// submission were slower), nor the step record's upload (a ring of
    /// records written a submission ahead gained nothing): what it is was
    /// left open (docs/perf-journal.md, sessions 28 and 29).
    pub token_gpu: Stats,
}

impl Prediction {
    /// The token predicted with `moe_sequence` in place of `moe`.
    pub fn token_us_sequence(&self) -> Option<f64> {
        let s = self.moe_sequence.as_ref()?;
        let moe = self.moe.as_ref().map_or(0.0, |m| m.median);
        Some(self.token_us + self.n_moe as f64 * (s.median - moe))
    }

    /// The prediction the bench reports: from the MoE blocks in sequence
    /// where the model has more than one, else from the one block. One
    /// block replayed alone pays a command buffer boundary per replay
    /// (~11 µs on an H100, ~10% of a MoE block) that blocks following
    /// each other inside a token do not (docs/perf-journal.md, session
    /// 14), so it reads ~10% high; the sequence reads within ~2%.
    pub fn predicted_us(&self) -> f64 {
        self.token_us_sequence().unwrap_or(self.token_us)
    }
}

/// µs per replay of `range`, one sample per round of `count` replays in
/// one submission, a command buffer each (`Engine::time_replays`).
pub fn per_replay(
    e: &mut Engine,
    range: Range<usize>,
    count: usize,
    rounds: usize,
) -> Result<Stats> {
    samples(e, count, rounds, |e, n| e.time_replays(range.clone(), n))
}

/// µs per replay of `time(e, count)` (ns of `count` replays in one
/// submission), one sample per round. With timestamps that time over
/// `count`; without, the slope between `count` and `2 × count` replays,
/// which cancels the submission's fixed cost.
fn samples(
    e: &mut Engine,
    count: usize,
    rounds: usize,
    time: impl Fn(&mut Engine, usize) -> Result<f64>,
) -> Result<Stats> {
    let mut us = Vec::with_capacity(rounds);
    for _ in 0..rounds {
        let v = if e.has_timer() {
            time(e, count)? / count as f64
        } else {
            let one = time(e, count)?;
            let two = time(e, 2 * count)?;
            ((two - one) / count as f64).max(0.0)
        };
        us.push(v / 1e3);
    }
    Ok(stats(&us))
}

fn whole(b: &BlockRange) -> Range<usize> {
    b.attn.start..b.ffn.end
}

/// Predict a token at position `pos` from the first dense block, MoE block
/// `moe_layer` (default: the first) and the head, each replayed `count`
/// times per round for `rounds` rounds.
pub fn predict(
    e: &mut Engine,
    pos: usize,
    count: usize,
    rounds: usize,
    moe_layer: Option<usize>,
) -> Result<Prediction> {
    let blocks = e.blocks().to_vec();
    let n_disp = e.dispatches_per_token();
    let head_start = blocks.last().map_or(0, |b| b.ffn.end);
    e.jump_to(pos)?;
    // Whole tokens first: an idle GPU drops its clock.
    e.time_replays(0..n_disp, 2)?;
    let dense_block = blocks.iter().find(|b| !b.moe);
    let moe_block = match moe_layer {
        Some(l) => blocks.iter().find(|b| b.moe && b.layer == l),
        None => blocks.iter().find(|b| b.moe),
    };
    let mut time = |b: Option<&BlockRange>| -> Result<Option<Stats>> {
        b.map(|b| per_replay(e, whole(b), count, rounds))
            .transpose()
    };
    let dense = time(dense_block)?;
    let moe = time(moe_block)?;
    let head = if head_start < n_disp {
        per_replay(e, head_start..n_disp, count, rounds)?
    } else {
        Stats::default()
    };
    let n_dense = blocks.iter().filter(|b| !b.moe).count();
    let n_moe = blocks.len() - n_dense;
    let moe_sequence = match moe_run(&blocks) {
        Some(r) if n_moe > 1 => {
            let reps = (count / n_moe).max(1);
            let s = per_replay(e, r, reps, rounds)?;
            Some(scaled(&s, 1.0 / n_moe as f64))
        }
        _ => None,
    };
    let token_gpu = per_replay(e, 0..n_disp, 1, rounds.max(3))?;
    let med = |s: &Option<Stats>| s.as_ref().map_or(0.0, |s| s.median);
    Ok(Prediction {
        pos,
        token_us: n_dense as f64 * med(&dense) + n_moe as f64 * med(&moe) + head.median,
        dense,
        n_dense,
        moe_layer: moe_block.map(|b| b.layer),
        moe,
        n_moe,
        head,
        moe_sequence,
        token_gpu,
    })
}

/// Dispatches and barriers of the first dense block, the first MoE block
/// and the head, as each runs inside a token.
pub fn part_barriers(e: &Engine) -> Vec<(&'static str, Barriers)> {
    let blocks = e.blocks();
    let head = blocks.last().map_or(0, |b| b.ffn.end)..e.dispatches_per_token();
    // The embedding gather runs before the first block.
    let embed = ("embedding", 0..blocks.first().map_or(0, |b| b.attn.start));
    let dense = blocks
        .iter()
        .find(|b| !b.moe)
        .map(|b| ("dense block", whole(b)));
    let moe = blocks
        .iter()
        .find(|b| b.moe)
        .map(|b| ("MoE block", whole(b)));
    std::iter::once(embed)
        .chain(dense)
        .chain(moe)
        .chain([("head", head)])
        .map(|(name, r)| (name, e.decode_barriers_in(r)))
        .collect()
}

/// The dispatches of all MoE blocks, when they are consecutive.
fn moe_run(blocks: &[BlockRange]) -> Option<Range<usize>> {
    let first = blocks.iter().position(|b| b.moe)?;
    let last = blocks.iter().rposition(|b| b.moe)?;
    let all = &blocks[first..=last];
    all.iter()
        .all(|b| b.moe)
        .then(|| all[0].attn.start..all[all.len() - 1].ffn.end)
}

fn scaled(s: &Stats, f: f64) -> Stats {
    Stats {
        n: s.n,
        median: s.median * f,
        p10: s.p10 * f,
        p90: s.p90 * f,
        iqr: s.iqr * f,
        mad: s.mad * f,
    }
}

#[derive(Clone, Debug)]
pub struct BlockReport {
    pub layer: usize,
    pub moe: bool,
    pub dispatches: usize,
    /// µs per replay of the whole block, one sample per round.
    pub block: Stats,
    /// The feed-forward half alone.
    pub ffn: Stats,
    /// The token predicted at the middle of the tg test.
    pub prediction: Prediction,
    /// The tg test the prediction is for, measured.
    pub measured: TestRun,
    /// What each op of the token costs inside it (`op_costs`).
    pub op_costs: OpCosts,
}

/// The whole token replayed at one position, and replayed without each
/// op's dispatches (every layer's) in turn. The difference is what the op
/// costs inside the token: its kernel and the barrier level it adds,
/// where a kernel's time alone (the micro tier) misses the level. (The
/// k_b absorb: 4.4 µs alone, 6.8 µs a block of an H200 token;
/// docs/perf-journal.md, session 30.) The outputs of the replays without
/// an op are wrong; only their time is read.
#[derive(Clone, Debug)]
pub struct OpCosts {
    /// µs of the whole token replayed, one sample per round.
    pub token: Stats,
    pub ops: Vec<OpCost>,
}

#[derive(Clone, Debug)]
pub struct OpCost {
    pub op: String,
    /// Its dispatches in the token.
    pub count: usize,
    /// µs of the token replayed without them, one sample per round.
    pub without: Stats,
}

impl OpCost {
    /// µs the op adds to the token (medians).
    pub fn cost_us(&self, token: &Stats) -> f64 {
        token.median - self.without.median
    }
}

/// µs per replay of the plan's dispatches `indices` in that order, all
/// in one command buffer, one sample per round.
fn per_replay_of(e: &mut Engine, indices: &[usize], rounds: usize) -> Result<Stats> {
    samples(e, 1, rounds, |e, n| e.time_dispatches(indices, n))
}

/// `OpCosts` at position `pos`, `rounds` samples each, ops in the order
/// they first run in the token.
pub fn op_costs(e: &mut Engine, pos: usize, rounds: usize) -> Result<OpCosts> {
    let n = e.dispatches_per_token();
    let ops: Vec<String> = (0..n).map(|i| e.dispatch_info(i).0).collect();
    let mut names: Vec<&String> = Vec::new();
    for op in &ops {
        if !names.contains(&op) {
            names.push(op);
        }
    }
    e.jump_to(pos)?;
    let all: Vec<usize> = (0..n).collect();
    per_replay_of(e, &all, 1)?; // an idle GPU drops its clock
    let token = per_replay_of(e, &all, rounds)?;
    let mut out = Vec::with_capacity(names.len());
    for name in names {
        let rest: Vec<usize> = all.iter().copied().filter(|&i| &ops[i] != name).collect();
        if rest.is_empty() {
            continue;
        }
        out.push(OpCost {
            op: name.clone(),
            count: n - rest.len(),
            without: per_replay_of(e, &rest, rounds)?,
        });
    }
    Ok(OpCosts { token, ops: out })
}

/// Block `layer` (default: the first MoE block) replayed `count` times per
/// round for `rounds` rounds at `depth` (a cache filled by prefill), the
/// token predicted from it, and `gen` tokens decoded at `depth` (`reps`
/// times) to compare.
pub fn block(
    e: &mut Engine,
    layer: Option<usize>,
    count: usize,
    rounds: usize,
    depth: usize,
    (gen, reps): (usize, usize),
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
    if gen == 0 {
        return Err(Error::InvalidArgument(
            "the block tier compares with a tg test: -n must be at least 1".into(),
        ));
    }
    model::check_fits(e, depth, gen)?;
    e.set_candidates(1)?;
    e.reset();
    model::warm_up(e, 8)?;
    model::fill(e, 0, depth)?;
    let measured = model::tg(e, depth, gen, reps)?;
    let pos = depth + gen / 2;
    let prediction = predict(e, pos, count, rounds, b.moe.then_some(b.layer))?;
    e.jump_to(pos)?;
    let block = match (&prediction.moe, b.moe) {
        (Some(s), true) => *s,
        _ => per_replay(e, whole(&b), count, rounds)?,
    };
    let ffn = per_replay(e, b.ffn.clone(), count, rounds)?;
    // Last: the replays without an op leave wrong values behind.
    let op_costs = op_costs(e, pos, rounds)?;
    e.reset();
    Ok(BlockReport {
        layer: b.layer,
        moe: b.moe,
        dispatches: whole(&b).len(),
        block,
        ffn,
        prediction,
        measured,
        op_costs,
    })
}
