//! Decode submission: a token's command buffer (recorded ahead, while the
//! GPU works), its readback slot, and greedy decoding queued one token
//! ahead. `step_ahead` submits token N+1 on the GPU's own top candidate of
//! token N before the host has read token N back, so between greedy tokens
//! the GPU does not wait for the readback, the sampling, the uploads or the
//! submit (issue 14 item 5: ~0.55 ms per token on an H100).

use super::{Candidates, Engine};
use crate::error::{check_finite, Error, Result};

/// Readback slots: a step in flight and the one queued behind it.
pub(super) const SLOTS: usize = 2;

/// A decode step submitted and not read back yet.
pub(super) struct Queued {
    /// The readback slot its candidates are copied to.
    pub(super) slot: usize,
    pub(super) index: wgpu::SubmissionIndex,
}

/// A step queued on the GPU's own top candidate of the step before it.
pub(super) struct Ahead {
    pos: usize,
    queued: Queued,
    /// The candidate the GPU fed it, once the step before is read back.
    token: Option<u32>,
}

/// A command buffer recorded before it is needed.
pub(super) struct Prepared {
    pos: usize,
    slot: usize,
    chained: bool,
    cmd: wgpu::CommandBuffer,
}

impl Engine<'_> {
    /// Run `token` at the current position; returns the next token's
    /// candidates.
    pub fn step(&mut self, token: u32) -> Result<Candidates> {
        self.ahead = None;
        let q = self.submit_step(Some(token), false)?;
        self.pos += 1;
        self.prepare_next(self.pos, false);
        Ok(self.read_candidates(&q)?.0)
    }

    /// `step` for greedy decoding: also queues the next step on the first
    /// of the returned candidates, which the GPU feeds itself. When the
    /// next call's token is that candidate, its step is already running;
    /// otherwise the queued step is dropped (it wrote only the cache row
    /// that the next token overwrites).
    pub fn step_ahead(&mut self, token: u32) -> Result<Candidates> {
        let q = match self.ahead.take() {
            Some(a) if a.pos == self.pos && a.token == Some(token) => a.queued,
            _ => self.submit_step(Some(token), false)?,
        };
        self.pos += 1;
        if self.pos < self.n_ctx {
            let queued = self.submit_step(None, false)?;
            self.ahead = Some(Ahead {
                pos: self.pos,
                queued,
                token: None,
            });
            self.prepare_next(self.pos + 1, true);
        }
        let (cands, first) = self.read_candidates(&q)?;
        if let Some(a) = &mut self.ahead {
            a.token = Some(first);
        }
        Ok(cands)
    }

    /// Run `token` and return all logits (for tests and `glmw logits`).
    pub fn logits(&mut self, token: u32) -> Result<Vec<f32>> {
        self.ahead = None;
        let q = self.submit_step(Some(token), true)?;
        self.pos += 1;
        self.read_logits(Some(q.index))
    }

    /// Submit the step at the current position (which the caller
    /// advances): of `token`, or of the first candidate of the step
    /// submitted before it (`None`).
    fn submit_step(&mut self, token: Option<u32>, want_logits: bool) -> Result<Queued> {
        match token {
            Some(t) => self.prepare(t)?,
            None => {
                if self.pos >= self.n_ctx {
                    return Err(Error::ContextFull { n_ctx: self.n_ctx });
                }
                self.write_step(self.pos);
            }
        }
        let slot = self.slot;
        self.slot = (slot + 1) % SLOTS;
        let chained = token.is_none();
        let cmd = match self.prepared.take() {
            Some(p) if !want_logits && (p.pos, p.slot, p.chained) == (self.pos, slot, chained) => {
                p.cmd
            }
            _ => self.record(self.pos, slot, chained, want_logits),
        };
        let index = self.gpu.queue.submit([cmd]);
        Ok(Queued { slot, index })
    }

    /// Record the command buffer of the next submission (at `pos`, fed by
    /// the host or `chained`) while the GPU is busy, instead of after the
    /// readback.
    fn prepare_next(&mut self, pos: usize, chained: bool) {
        let cmd = self.record(pos, self.slot, chained, false);
        self.prepared = Some(Prepared {
            pos,
            slot: self.slot,
            chained,
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
    /// buffer. A `chained` step first copies the previous step's first
    /// candidate into the token id the plan gathers.
    fn record(
        &self,
        pos: usize,
        slot: usize,
        chained: bool,
        want_logits: bool,
    ) -> wgpu::CommandBuffer {
        let io = &self.plan.io;
        let mut enc = self.gpu.device.create_command_encoder(&Default::default());
        if chained {
            enc.copy_buffer_to_buffer(&io.cand_i, 0, &io.token, 0, 4);
        }
        {
            let mut pass = enc.begin_compute_pass(&Default::default());
            for d in self.plan.at(pos + 1) {
                d.record(&mut pass);
            }
        }
        self.copy_results(&mut enc, slot, want_logits);
        enc.finish()
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
        if want_logits {
            let n = 4 * self.model.config.n_vocab as u64;
            enc.copy_buffer_to_buffer(&io.logits, 0, &self.logits_readback, 0, n);
        }
    }

    /// The candidates of a submitted step (waiting for it and nothing
    /// after it), and the id of its first candidate as the GPU holds it.
    pub(super) fn read_candidates(&mut self, q: &Queued) -> Result<(Candidates, u32)> {
        let k = self.k;
        let mut bytes = std::mem::take(&mut self.bytes);
        let read = self.gpu.map_read_after(
            &self.readback[q.slot],
            &mut bytes[..8 * k],
            Some(q.index.clone()),
        );
        if let Err(e) = read {
            self.bytes = bytes;
            return Err(e);
        }
        let (v, i) = bytes[..8 * k].split_at(4 * k);
        let word = |b: &[u8]| u32::from_le_bytes(b.try_into().expect("4 bytes"));
        let first = word(&i[..4]);
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
        Ok((out, first))
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
