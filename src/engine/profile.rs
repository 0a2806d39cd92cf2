//! Timing hooks for `glmw bench`: one token with a GPU timestamp after every
//! dispatch, a range of the plan (one block) replayed back to back, and a
//! jump of the position so decode can be timed at a context depth.

use std::time::Instant;

use super::Engine;
use crate::error::{Error, Result};
use crate::gpu::barriers::{self, Barriers};
use crate::gpu::plan::BlockRange;
use crate::gpu::profile::Timer;

/// One token's GPU time per dispatch (`op` is the label without `blk.N.`).
pub struct TokenProfile {
    /// (op, kernel, GPU ns) per dispatch, in plan order; empty without
    /// timestamp support.
    pub dispatches: Vec<(String, &'static str, f64)>,
    /// Sum of the dispatch times.
    pub gpu_ns: f64,
    /// Wall time from recording to the readback.
    pub wall_ns: f64,
}

impl<'a> Engine<'a> {
    pub fn blocks(&self) -> &[BlockRange] {
        &self.plan.blocks
    }

    /// (op, kernel, weight bytes) of dispatch `i` of the plan as the next
    /// token runs it (the attention's kernel depends on the position).
    pub fn dispatch_info(&self, i: usize) -> (String, &'static str, u64) {
        let d = &self.plan.at(self.pos + 1)[i];
        (d.op().to_string(), d.kernel.name(), d.weight_bytes)
    }

    /// Prefill one chunk (`tokens`, at most `ubatch`) with a timestamp after
    /// each dispatch: (op, kernel, GPU ns) per dispatch; empty without
    /// timestamp support. The position advances as for `prefill`.
    pub fn profile_prefill(&mut self, tokens: &[u32]) -> Result<Vec<(String, &'static str, f64)>> {
        self.check_chunk(tokens)?;
        let Some(timer) = self.timer.as_ref() else {
            return Ok(Vec::new());
        };
        let ch = self.write_chunk(tokens)?;
        let pf = &self.prefill;
        let run = pf.chunk_ops(ch);
        let ns = timer.time_with(&self.gpu, run.len(), &mut |pass, j| {
            pf.record_op(pass, run[j], ch)
        })?;
        self.pos += tokens.len();
        Ok(ns
            .iter()
            .zip(&run)
            .map(|(&t, &i)| {
                let (op, k) = pf.op_info(i);
                (op.to_string(), k, t)
            })
            .collect())
    }

    /// Dispatches and wgpu barriers of one decode token (the plan recorded
    /// into one encoder).
    pub fn decode_barriers(&self) -> Barriers {
        barriers::count(&self.plan.dispatches)
    }

    /// The part of a token's barriers that falls in dispatches `range` (a
    /// block: its first dispatch waits on the block before it).
    pub fn decode_barriers_in(&self, range: std::ops::Range<usize>) -> Barriers {
        let t = barriers::transitions(&self.plan.dispatches);
        Barriers::of(t.get(range).unwrap_or_default())
    }

    /// Dispatches and wgpu barriers of one prefill chunk's pass: a full
    /// chunk at depth 0 (its tokens attend in one split; a short chunk
    /// deep in the context adds the merges).
    pub fn prefill_barriers(&self) -> Barriers {
        let full = self.prefill.chunk(self.prefill.ubatch, 0);
        barriers::count(self.prefill.dispatch_list(full))
    }

    /// Whether GPU timestamps are available (else timing is wall clock).
    pub fn has_timer(&self) -> bool {
        self.timer.is_some()
    }

    /// Run `token` with a timestamp after each dispatch.
    pub fn profile_token(&mut self, token: u32) -> Result<TokenProfile> {
        self.prepare(token)?;
        let t0 = Instant::now();
        let Some(timer) = self.timer.as_ref() else {
            let d = self.plan.at(self.pos + 1);
            crate::gpu::ops::run(&self.gpu, d)?;
            self.pos += 1;
            let wall_ns = t0.elapsed().as_secs_f64() * 1e9;
            return Ok(TokenProfile {
                dispatches: Vec::new(),
                gpu_ns: 0.0,
                wall_ns,
            });
        };
        let plan = self.plan.at(self.pos + 1);
        let segs: Vec<&[crate::gpu::ops::Dispatch]> = plan.chunks(1).collect();
        let ns = timer.time(&self.gpu, &segs)?;
        let wall_ns = t0.elapsed().as_secs_f64() * 1e9;
        let dispatches: Vec<_> = plan
            .iter()
            .zip(&ns)
            .map(|(d, &t)| (d.op().to_string(), d.kernel.name(), t))
            .collect();
        self.pos += 1;
        Ok(TokenProfile {
            gpu_ns: ns.iter().sum(),
            dispatches,
            wall_ns,
        })
    }

    /// Replay dispatches `range` of the plan `reps` times back to back at
    /// the current position (which does not advance); GPU ns per replay, or
    /// wall ns per replay (one submit each) without timestamps.
    pub fn time_range(&mut self, range: std::ops::Range<usize>, reps: usize) -> Result<Vec<f64>> {
        if range.end > self.plan.dispatches.len() || range.is_empty() {
            return Err(Error::InvalidArgument(format!(
                "dispatch range {range:?} is outside the plan (0..{})",
                self.plan.dispatches.len()
            )));
        }
        self.write_step(self.pos.min(self.n_ctx - 1));
        let seg = &self.plan.at(self.pos + 1)[range];
        match &self.timer {
            Some(t) => {
                let mut out = Vec::with_capacity(reps);
                for chunk in (0..reps).collect::<Vec<_>>().chunks(Timer::max_segments()) {
                    out.extend(t.time(&self.gpu, &vec![seg; chunk.len()])?);
                }
                Ok(out)
            }
            None => (0..reps)
                .map(|_| {
                    let t0 = Instant::now();
                    crate::gpu::ops::run(&self.gpu, seg)?;
                    Ok(t0.elapsed().as_secs_f64() * 1e9)
                })
                .collect(),
        }
    }

    /// Run dispatches `range` of the plan `reps` times back to back, each
    /// replay a command buffer of its own, all in one submission, at the
    /// current position (which does not advance). A token uses each
    /// layer's buffers once, so their first use in it needs no barrier
    /// (wgpu resolves their state before the token's command buffer); so
    /// does each replay, where replays recorded into one pass put a barrier
    /// at every reuse: four more a MoE block, which predicted an H100 token
    /// 11-15% slow. A command buffer boundary costs the GPU ~11 µs of its
    /// own (H100: one MoE block 104 µs a replay, the 46 in sequence 93 µs
    /// each, the sequence within 2% of the token; docs/perf-journal.md,
    /// session 14). Total ns: GPU time between a timestamp before and one
    /// after the replays, or without timestamps the wall time of the
    /// submission (including its fixed submit and wait cost).
    pub fn time_replays(&mut self, range: std::ops::Range<usize>, reps: usize) -> Result<f64> {
        self.time_buffers(&range.collect::<Vec<_>>(), reps, 1)
    }

    /// The plan's dispatches `indices` in that order (one op of every block,
    /// say: together they read more weights than the GPU's L2 holds, as a
    /// token does), `reps` times back to back in one pass; ns as
    /// `time_replays`.
    pub fn time_dispatches(&mut self, indices: &[usize], reps: usize) -> Result<f64> {
        self.time_buffers(indices, 1, reps)
    }

    /// The plan's dispatches `indices`, `per_buffer` times back to back in
    /// each of `buffers` command buffers (one pass each) submitted together;
    /// ns as `time_replays`.
    fn time_buffers(
        &mut self,
        indices: &[usize],
        buffers: usize,
        per_buffer: usize,
    ) -> Result<f64> {
        let n = self.plan.dispatches.len();
        let reps = buffers.saturating_mul(per_buffer);
        if indices.is_empty() || indices.iter().any(|&i| i >= n) || reps == 0 {
            return Err(Error::InvalidArgument(format!(
                "{reps} replays of dispatches {indices:?}: the plan has 0..{n}"
            )));
        }
        self.write_step(self.pos.min(self.n_ctx - 1));
        let plan = self.plan.at(self.pos + 1);
        let mut record = |pass: &mut wgpu::ComputePass<'_>, _: usize| {
            for _ in 0..per_buffer {
                for &i in indices {
                    plan[i].record(pass);
                }
            }
        };
        if let Some(t) = &self.timer {
            return t.time_buffers(&self.gpu, buffers, &mut record);
        }
        let t0 = Instant::now();
        let bufs: Vec<wgpu::CommandBuffer> = (0..buffers)
            .map(|i| {
                let mut enc = self.gpu.device.create_command_encoder(&Default::default());
                record(&mut enc.begin_compute_pass(&Default::default()), i);
                enc.finish()
            })
            .collect();
        self.gpu.queue.submit(bufs);
        self.gpu.wait()?;
        Ok(t0.elapsed().as_secs_f64() * 1e9)
    }

    /// Run `token` a few dispatches at a time, reading each intermediate
    /// the plan leaves in a buffer of its own (`plan::Io::traced`: the
    /// recipe's names, as the reference's trace names them: `ffn_inp-3`,
    /// `l_out-3`, …, `result_output`) as soon as it is written. For finding
    /// the first op that diverges.
    pub fn trace_token(&mut self, token: u32) -> Result<Vec<(String, Vec<f32>)>> {
        self.prepare(token)?;
        let plan = self.plan.at(self.pos + 1);
        let mut out = Vec::new();
        let mut done = 0;
        for t in &self.plan.io.traced {
            crate::gpu::ops::run(&self.gpu, &plan[done..t.after])?;
            done = t.after;
            out.push((t.label(), self.gpu.read_f32(&t.buf, t.len)?));
        }
        crate::gpu::ops::run(&self.gpu, &plan[done..])?;
        self.pos += 1;
        Ok(out)
    }

    /// Prefill one chunk (`tokens`, at most `ubatch`) a few dispatches at a
    /// time, reading each intermediate the prefill plan leaves in a buffer
    /// of its own (`Prefill::traced`, named as `trace_token` names them):
    /// one row per token, `tokens.len()` rows. The position advances as
    /// for `prefill`; the output head does not run.
    pub fn trace_prefill(&mut self, tokens: &[u32]) -> Result<Vec<(String, Vec<f32>)>> {
        self.check_chunk(tokens)?;
        let ch = self.write_chunk(tokens)?;
        let pf = &self.prefill;
        let run = |ops: std::ops::Range<usize>| {
            let mut enc = self.gpu.device.create_command_encoder(&Default::default());
            {
                let mut pass = enc.begin_compute_pass(&Default::default());
                for i in ops {
                    pf.record_op(&mut pass, i, ch);
                }
            }
            self.gpu.queue.submit([enc.finish()]);
            self.gpu.wait()
        };
        let mut out = Vec::new();
        let mut done = 0;
        for t in &pf.traced {
            run(done..t.after)?;
            done = t.after;
            let rows = self.gpu.read_f32(&t.buf, tokens.len() * t.len)?;
            out.push((t.label(), rows));
        }
        run(done..pf.ops())?;
        self.pos += tokens.len();
        Ok(out)
    }

    /// One prefill chunk's tokens: 1 to `ubatch` of them, in the vocabulary,
    /// with room in the cache.
    fn check_chunk(&self, tokens: &[u32]) -> Result<()> {
        if tokens.is_empty() || tokens.len() > self.prefill.ubatch {
            return Err(Error::InvalidArgument(format!(
                "trace or profile 1 to {} tokens (one prefill chunk)",
                self.prefill.ubatch
            )));
        }
        self.check_tokens(tokens)
    }

    /// Move to position `pos` without computing the tokens before it: the
    /// cache rows stay as they are (zeros on a fresh engine). For timing
    /// decode at a context depth only; the logits are meaningless after it.
    pub fn jump_to(&mut self, pos: usize) -> Result<()> {
        if pos >= self.n_ctx {
            return Err(Error::ContextFull { n_ctx: self.n_ctx });
        }
        self.pos = pos;
        Ok(())
    }
}
