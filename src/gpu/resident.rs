//! A model's weights resident on the GPU, in kernel layouts: uploaded once
//! at load and shared by every plan (decode, prefill) of every session.
//! The token embedding too (gathered by embed.wgsl): after the upload a
//! GPU session reads nothing from the mapped file, so a file truncated or
//! rewritten while it runs cannot fault it.
//! Fields keep the model's names (`model::Weights`, llama.cpp's): a matrix
//! merged for the kernels is named as llama.cpp names the merged tensor
//! (`ffn_gate_up_exps`).

use super::context::Gpu;
use super::weights::{Matrix, Uploader};
use crate::error::Result;
use crate::model::{ExpertsGateUp, Ffn, Model, QProj};

pub enum QWeights {
    Lora {
        q_a: Matrix,
        q_a_norm: wgpu::Buffer,
        q_b: Matrix,
    },
    Direct(Matrix),
}

/// A feed-forward with gate and up stored as one matrix (`Matrix::gate_up`).
pub struct GateUpDown {
    pub gate_up: Matrix,
    pub down: Matrix,
}

/// A MoE block's feed-forward weights.
pub struct MoeWeights {
    pub gate_inp: Matrix,
    /// Selection bias, if the model has one.
    pub exp_probs_b: Option<wgpu::Buffer>,
    /// Every expert's gate and up, merged (`Matrix::gate_up`).
    pub gate_up_exps: Matrix,
    pub down_exps: Matrix,
    pub shared: Option<GateUpDown>,
}

// One per layer: the size difference between variants costs nothing.
#[allow(clippy::large_enum_variant)]
pub enum FfnWeights {
    Dense(GateUpDown),
    Moe(MoeWeights),
}

pub struct LayerWeights {
    pub attn_norm: wgpu::Buffer,
    pub q: QWeights,
    pub kv_a_mqa: Matrix,
    pub kv_a_norm: wgpu::Buffer,
    pub k_b: Matrix,
    pub v_b: Matrix,
    pub attn_output: Matrix,
    pub ffn_norm: wgpu::Buffer,
    pub ffn: FfnWeights,
}

pub struct ResidentWeights {
    pub token_embd: Matrix,
    pub layers: Vec<LayerWeights>,
    pub output_norm: wgpu::Buffer,
    pub output: Matrix,
}

/// Weight bytes the upload moves (for the progress bar).
pub fn upload_bytes(model: &Model) -> u64 {
    model.file.tensors().iter().map(|t| t.n_bytes).sum::<u64>()
}

impl ResidentWeights {
    /// Upload every weight; no buffer exceeds `limit` bytes (larger
    /// matrices are split by rows).
    pub fn upload(
        gpu: &Gpu,
        model: &Model,
        limit: u64,
        progress: &mut dyn FnMut(u64, u64),
    ) -> Result<ResidentWeights> {
        let w = &model.weights;
        let mut up = Uploader::new(gpu, &model.file, limit, upload_bytes(model), progress);
        let token_embd = up.embedding(&w.token_embd)?;
        let mut layers = Vec::with_capacity(w.layers.len());
        for (il, lw) in w.layers.iter().enumerate() {
            let q = match &lw.q {
                QProj::Lora { q_a, q_a_norm, q_b } => QWeights::Lora {
                    q_a: up.matrix(q_a)?,
                    q_a_norm: up.vector(q_a_norm)?,
                    q_b: up.matrix(q_b)?,
                },
                QProj::Direct { q } => QWeights::Direct(up.matrix(q)?),
            };
            let ffn = match &lw.ffn {
                Ffn::Dense(d) => FfnWeights::Dense(GateUpDown {
                    gate_up: up.gate_up(&format!("blk.{il}.ffn_gate_up"), &d.gate, &d.up)?,
                    down: up.matrix(&d.down)?,
                }),
                Ffn::Moe {
                    gate_inp,
                    exp_probs_b,
                    gate_up_exps,
                    down_exps,
                    shared,
                } => FfnWeights::Moe(MoeWeights {
                    gate_inp: up.matrix(gate_inp)?,
                    exp_probs_b: match exp_probs_b {
                        Some(t) => Some(up.vector(t)?),
                        None => None,
                    },
                    gate_up_exps: match gate_up_exps {
                        ExpertsGateUp::Separate { gate, up: u } => {
                            up.gate_up(&format!("blk.{il}.ffn_gate_up_exps"), gate, u)?
                        }
                        ExpertsGateUp::Merged { gate_up } => up.merged_gate_up(gate_up)?,
                    },
                    down_exps: up.matrix(down_exps)?,
                    shared: match shared {
                        Some(sh) => Some(GateUpDown {
                            gate_up: up.gate_up(
                                &format!("blk.{il}.ffn_gate_up_shexp"),
                                &sh.gate,
                                &sh.up,
                            )?,
                            down: up.matrix(&sh.down)?,
                        }),
                        None => None,
                    },
                }),
            };
            layers.push(LayerWeights {
                attn_norm: up.vector(&lw.attn_norm)?,
                q,
                kv_a_mqa: up.matrix(&lw.kv_a_mqa)?,
                kv_a_norm: up.vector(&lw.kv_a_norm)?,
                k_b: up.matrix(&lw.k_b)?,
                v_b: up.matrix(&lw.v_b)?,
                attn_output: up.matrix(&lw.attn_output)?,
                ffn_norm: up.vector(&lw.ffn_norm)?,
                ffn,
            });
        }
        let out = ResidentWeights {
            token_embd,
            layers,
            output_norm: up.vector(&w.output_norm)?,
            output: up.matrix(&w.output)?,
        };
        let t = up.times;
        log::info!(
            "uploaded {:.2} GB: {:.2} s gathering and repacking, {:.2} s copying into \
             mapped buffers, {:.2} s waiting for the GPU's copies",
            up.done as f64 / 1e9,
            t.repack,
            t.copy,
            t.wait
        );
        Ok(out)
    }

    /// Every matrix, for inspection (`Engine::matrices_split`).
    pub fn matrices(&self) -> Vec<&Matrix> {
        let mut out = vec![&self.token_embd];
        for l in &self.layers {
            match &l.q {
                QWeights::Lora { q_a, q_b, .. } => out.extend([q_a, q_b]),
                QWeights::Direct(q) => out.push(q),
            }
            out.extend([&l.kv_a_mqa, &l.k_b, &l.v_b, &l.attn_output]);
            match &l.ffn {
                FfnWeights::Dense(d) => out.extend([&d.gate_up, &d.down]),
                FfnWeights::Moe(m) => {
                    out.extend([&m.gate_inp, &m.gate_up_exps, &m.down_exps]);
                    if let Some(s) = &m.shared {
                        out.extend([&s.gate_up, &s.down]);
                    }
                }
            }
        }
        out.push(&self.output);
        out
    }
}
