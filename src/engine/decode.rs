//! Decode submission: a token's command buffer (recorded ahead, while the
//! GPU works), its readback slot, and decoding queued one token ahead.
//! `step_ahead` submits token N+1 on the GPU's own pick from token N's
//! candidates (the first one, or sampled as the host samples: pick.wgsl)
//! before the host has read token N back, so between tokens the GPU does
//! not wait for the readback, the sampling, the uploads or the submit
//! (issue 14 item 5: ~0.4-0.55 ms per token on an H100). The host still
//! picks every token itself; a queued step fed another token is redone.

use super::{Candidates, Engine};
use crate::error::{check_finite, Error, Result};
use crate::gpu::plan::MAX_CANDIDATES;
use std::time::Instant;

/// Readback slots: a step in flight and the one queued behind it.
pub(super) const SLOTS: usize = 2;

/// Bytes of a readback slot: the candidates' values and ids, then the
/// token the step was fed.
pub(super) const SLOT_BYTES: u64 = 8 * MAX_CANDIDATES as u64 + 4;
const FED_AT: u64 = 8 * MAX_CANDIDATES as u64;

/// How the GPU picks the token of the step it queues ahead.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Pick {
    /// The first candidate (greedy decoding).
    First,
    /// Sampled from the candidates as `Sampler::sample` samples.
    Sample(PickParams),
}

/// pick.wgsl's params.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct PickParams {
    /// Candidates considered.
    pub k: u32,
    /// 1 / temperature.
    pub inv_t: f32,
    pub top_p: f32,
    pub min_p: f32,
    /// The uniform draw in [0, 1) the host's sampler will use for this token.
    pub u: f32,
    pub _pad: [u32; 3],
}

/// Where a step's token comes from.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Feed {
    Host(u32),
    Gpu(Pick),
}

impl Feed {
    /// What the recorded command buffer depends on (not the token itself).
    fn kind(self) -> u8 {
        match self {
            Feed::Host(_) => 0,
            Feed::Gpu(Pick::First) => 1,
            Feed::Gpu(Pick::Sample(_)) => 2,
        }
    }
}

/// Where the host's time went in the decode steps since the last
/// `Engine::take_host_times`: while the GPU runs a step the host records
/// the next one's command buffer (~1.4-1.8 ms for GLM-4.7-Flash's 613
/// dispatches on an H200 machine's Xeon, ~40% of a token), so a slower CPU
/// can set the pace; waiting near zero says it does.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct HostTimes {
    /// Decode steps taken (`step`, `step_ahead`, `logits`).
    pub steps: usize,
    /// Recording command buffers.
    pub record_ns: f64,
    /// `queue.submit`.
    pub submit_ns: f64,
    /// Waiting for a step's candidates (the GPU, then the mapping).
    pub wait_ns: f64,
}

impl std::ops::AddAssign for HostTimes {
    fn add_assign(&mut self, o: HostTimes) {
        self.steps += o.steps;
        self.record_ns += o.record_ns;
        self.submit_ns += o.submit_ns;
        self.wait_ns += o.wait_ns;
    }
}

impl HostTimes {
    /// (record, submit, wait) µs a step.
    pub fn per_step_us(&self) -> (f64, f64, f64) {
        let n = self.steps.max(1) as f64 * 1e3;
        (self.record_ns / n, self.submit_ns / n, self.wait_ns / n)
    }
}

fn since(t0: Instant) -> f64 {
    t0.elapsed().as_secs_f64() * 1e9
}

/// A decode step submitted and not read back yet.
pub(super) struct Queued {
    /// The readback slot its candidates are copied to.
    pub(super) slot: usize,
    pub(super) index: wgpu::SubmissionIndex,
}

/// A step queued on the GPU's own pick from the step before it.
pub(super) struct Ahead {
    pos: usize,
    queued: Queued,
}

/// A command buffer recorded before it is needed.
pub(super) struct Prepared {
    pos: usize,
    slot: usize,
    feed: u8,
    cmd: wgpu::CommandBuffer,
}

impl Engine<'_> {
    /// Run `token` at the current position; returns the next token's
    /// candidates.
    pub fn step(&mut self, token: u32) -> Result<Candidates> {
        self.ahead = None;
        let q = self.submit_step(Feed::Host(token), false)?;
        self.pos += 1;
        self.prepare_next(self.pos, Feed::Host(0));
        let cands = self.wait_candidates(&q)?.0;
        self.host.steps += 1;
        Ok(cands)
    }

    /// `step`, also queueing the next step on the token the GPU picks from
    /// the returned candidates by `next`. When the next call's token is
    /// the one the GPU fed, its step is already done or running;
    /// otherwise it is run again (the queued steps wrote only cache rows
    /// that the redone ones overwrite).
    pub fn step_ahead(&mut self, token: u32, next: Pick) -> Result<Candidates> {
        let (q, queued) = match self.ahead.take() {
            Some(a) if a.pos == self.pos => (a.queued, true),
            _ => (self.submit_step(Feed::Host(token), false)?, false),
        };
        self.pos += 1;
        if self.pos < self.n_ctx {
            let queued = self.submit_step(Feed::Gpu(next), false)?;
            self.ahead = Some(Ahead {
                pos: self.pos,
                queued,
            });
            self.prepare_next(self.pos + 1, Feed::Gpu(next));
        }
        let (cands, fed) = match self.wait_candidates(&q) {
            Ok(r) => r,
            Err(e) => {
                self.ahead = None;
                return Err(e);
            }
        };
        if queued && fed != token {
            self.pos -= 1;
            self.ahead = None;
            self.ahead_redone += 1;
            return self.step_ahead(token, next);
        }
        self.ahead_used += queued as usize;
        self.host.steps += 1;
        Ok(cands)
    }

    /// (steps taken from the queue, steps redone because the GPU had fed
    /// another token) since the engine opened.
    pub fn steps_queued_ahead(&self) -> (usize, usize) {
        (self.ahead_used, self.ahead_redone)
    }

    /// The host's time in decode steps since the last call (`HostTimes`).
    pub fn take_host_times(&mut self) -> HostTimes {
        std::mem::take(&mut self.host)
    }

    /// Run `token` and return all logits (for tests and `glmw logits`).
    pub fn logits(&mut self, token: u32) -> Result<Vec<f32>> {
        self.ahead = None;
        let q = self.submit_step(Feed::Host(token), true)?;
        self.pos += 1;
        let t0 = Instant::now();
        let logits = self.read_logits(Some(q.index))?;
        self.host.wait_ns += since(t0);
        self.host.steps += 1;
        Ok(logits)
    }

    /// Submit the step at the current position (which the caller
    /// advances), fed by the host or by the GPU's pick from the step
    /// submitted before it.
    fn submit_step(&mut self, feed: Feed, want_logits: bool) -> Result<Queued> {
        match feed {
            Feed::Host(t) => self.prepare(t)?,
            Feed::Gpu(pick) => {
                if self.pos >= self.n_ctx {
                    return Err(Error::ContextFull { n_ctx: self.n_ctx });
                }
                if let Pick::Sample(p) = pick {
                    self.gpu
                        .queue
                        .write_buffer(&self.pick_params, 0, bytemuck::bytes_of(&p));
                }
                self.write_step(self.pos);
            }
        }
        let slot = self.slot;
        self.slot = (slot + 1) % SLOTS;
        let key = (self.pos, slot, feed.kind());
        let cmd = match self.prepared.take() {
            Some(p) if !want_logits && (p.pos, p.slot, p.feed) == key => p.cmd,
            _ => self.record(self.pos, slot, feed, want_logits),
        };
        let t0 = Instant::now();
        let index = self.gpu.queue.submit([cmd]);
        self.host.submit_ns += since(t0);
        Ok(Queued { slot, index })
    }

    /// Record the command buffer of the next submission (at `pos`, fed as
    /// `feed`) while the GPU is busy, instead of after the readback.
    fn prepare_next(&mut self, pos: usize, feed: Feed) {
        let cmd = self.record(pos, self.slot, feed, false);
        self.prepared = Some(Prepared {
            pos,
            slot: self.slot,
            feed: feed.kind(),
            cmd,
        });
    }

    /// Check `token` and the position, then upload the token id (the plan
    /// gathers its embedding) and the step record for the token at `pos`.
    pub(super) fn prepare(&mut self, token: u32) -> Result<()> {
        self.check_tokens(&[token])?;
        self.gpu
            .queue
            .write_buffer(&self.plan.io.token, 0, bytemuck::bytes_of(&token));
        self.write_step(self.pos);
        Ok(())
    }

    /// Upload the decode step record for a token at `pos`.
    pub(super) fn write_step(&self, pos: usize) {
        let step = self.step_at(pos);
        self.gpu
            .queue
            .write_buffer(&self.plan.io.step, 0, bytemuck::bytes_of(&step));
    }

    /// The whole plan for the token at `pos`, the candidate copies into
    /// readback `slot` and optionally the logits copy as one command
    /// buffer. A step the GPU feeds first puts its pick from the previous
    /// step's candidates into the token id the plan gathers. Its time
    /// counts in `HostTimes`.
    fn record(
        &mut self,
        pos: usize,
        slot: usize,
        feed: Feed,
        want_logits: bool,
    ) -> wgpu::CommandBuffer {
        let t0 = Instant::now();
        let io = &self.plan.io;
        let mut enc = self.gpu.device.create_command_encoder(&Default::default());
        if feed == Feed::Gpu(Pick::First) {
            enc.copy_buffer_to_buffer(&io.cand_i, 0, &io.token, 0, 4);
        }
        {
            let mut pass = enc.begin_compute_pass(&Default::default());
            if let Feed::Gpu(Pick::Sample(_)) = feed {
                self.pick.record(&mut pass);
            }
            for d in self.plan.at(pos + 1) {
                d.record(&mut pass);
            }
        }
        self.copy_results(&mut enc, slot, want_logits);
        let cmd = enc.finish();
        self.host.record_ns += since(t0);
        cmd
    }

    /// Copy the candidates (and optionally the logits) to readback `slot`
    /// (and the logits readback).
    pub(super) fn copy_results(
        &self,
        enc: &mut wgpu::CommandEncoder,
        slot: usize,
        want_logits: bool,
    ) {
        let io = &self.plan.io;
        let k = 4 * self.k as u64;
        enc.copy_buffer_to_buffer(&io.cand_v, 0, &self.readback[slot], 0, k);
        enc.copy_buffer_to_buffer(&io.cand_i, 0, &self.readback[slot], k, k);
        enc.copy_buffer_to_buffer(&io.token, 0, &self.readback[slot], FED_AT, 4);
        if want_logits {
            let n = 4 * self.model.config.n_vocab as u64;
            enc.copy_buffer_to_buffer(&io.logits, 0, &self.logits_readback, 0, n);
        }
    }

    /// `read_candidates` of a decode step, the wait counted in `HostTimes`.
    fn wait_candidates(&mut self, q: &Queued) -> Result<(Candidates, u32)> {
        let t0 = Instant::now();
        let r = self.read_candidates(q);
        self.host.wait_ns += since(t0);
        r
    }

    /// The candidates of a submitted step (waiting for it and nothing
    /// after it), and the token it was fed.
    pub(super) fn read_candidates(&mut self, q: &Queued) -> Result<(Candidates, u32)> {
        let k = self.k;
        let mut bytes = std::mem::take(&mut self.bytes);
        let read = self.gpu.map_read_after(
            &self.readback[q.slot],
            &mut bytes[..SLOT_BYTES as usize],
            Some(q.index.clone()),
        );
        if let Err(e) = read {
            self.bytes = bytes;
            return Err(e);
        }
        let (v, i) = bytes[..8 * k].split_at(4 * k);
        let word = |b: &[u8]| u32::from_le_bytes(b.try_into().expect("4 bytes"));
        let fed = word(&bytes[FED_AT as usize..SLOT_BYTES as usize]);
        let out = v
            .chunks_exact(4)
            .zip(i.chunks_exact(4))
            .map(|(v, i)| (word(i), f32::from_bits(word(v))))
            .filter(|&(id, _)| (id as usize) < self.model.config.n_vocab)
            .collect::<Candidates>();
        self.bytes = bytes;
        // NaN logits lose every comparison in the top-k, so none or
        // fewer than k valid candidates come back.
        if out.len() < k.min(self.model.config.n_vocab) {
            return Err(Error::Model(format!(
                "the GPU returned {} of {k} candidates: the logits are not finite, so the \
                 model's weights or hyperparameters are corrupt",
                out.len()
            )));
        }
        let values: Vec<f32> = out.iter().map(|c| c.1).collect();
        check_finite(&values)?;
        Ok((out, fed))
    }

    pub(super) fn read_logits(&mut self, after: Option<wgpu::SubmissionIndex>) -> Result<Vec<f32>> {
        let mut out = vec![0f32; self.model.config.n_vocab];
        self.gpu.map_read_after(
            &self.logits_readback,
            bytemuck::cast_slice_mut(&mut out),
            after,
        )?;
        check_finite(&out)?;
        Ok(out)
    }
}
