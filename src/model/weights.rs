//! GGUF tensor names → typed per-layer weights. Every tensor the forward pass
//! reads is looked up here once, its shape checked against the config and its
//! type checked against what glmw can decode, so the forward code can index
//! without further checks. Names are used verbatim (`blk.{i}.attn_kv_a_mqa.weight`).

use super::config::Config;
use crate::error::{Error, Result};
use crate::gguf::{GgufFile, TensorInfo};
use crate::quant::GgmlType;

/// The query projection: low-rank (GLM-4.7-Flash) or direct (DeepSeek-V2-Lite).
#[derive(Clone, Debug)]
pub enum QProj {
    Lora {
        q_a: TensorInfo,
        q_a_norm: TensorInfo,
        q_b: TensorInfo,
    },
    Direct {
        q: TensorInfo,
    },
}

/// Routed experts' gate and up projections, separate or merged (newer
/// converters write `ffn_gate_up_exps`: gate rows first, then up rows).
#[derive(Clone, Debug)]
pub enum ExpertsGateUp {
    Separate { gate: TensorInfo, up: TensorInfo },
    Merged { gate_up: TensorInfo },
}

#[derive(Clone, Debug)]
pub struct DenseFfn {
    pub gate: TensorInfo,
    pub up: TensorInfo,
    pub down: TensorInfo,
}

#[derive(Clone, Debug)]
// One per layer: the size difference between variants costs nothing.
#[allow(clippy::large_enum_variant)]
pub enum Ffn {
    Dense(DenseFfn),
    Moe {
        gate_inp: TensorInfo,
        exp_probs_b: Option<TensorInfo>,
        gate_up_exps: ExpertsGateUp,
        down_exps: TensorInfo,
        shared: Option<DenseFfn>,
    },
}

#[derive(Clone, Debug)]
pub struct LayerWeights {
    pub attn_norm: TensorInfo,
    pub q: QProj,
    pub kv_a_mqa: TensorInfo,
    pub kv_a_norm: TensorInfo,
    pub k_b: TensorInfo,
    pub v_b: TensorInfo,
    pub attn_output: TensorInfo,
    pub ffn_norm: TensorInfo,
    pub ffn: Ffn,
}

#[derive(Clone, Debug)]
pub struct Weights {
    pub token_embd: TensorInfo,
    pub output_norm: TensorInfo,
    /// `output.weight`, or `token_embd.weight` when the file ties them.
    pub output: TensorInfo,
    pub layers: Vec<LayerWeights>,
}

struct Lookup<'a> {
    f: &'a GgufFile,
}

impl Lookup<'_> {
    fn has(&self, name: &str) -> bool {
        self.f.tensor(name).is_some()
    }

    /// Fetch `name` and check its dims (ne0 first) and that glmw decodes its type.
    fn get(&self, name: &str, dims: &[usize]) -> Result<TensorInfo> {
        let t = self
            .f
            .tensor(name)
            .ok_or_else(|| Error::Model(format!("tensor {name} is missing")))?;
        let want: Vec<u64> = dims.iter().map(|&d| d as u64).collect();
        let mut got = t.dims.clone();
        while got.len() > want.len() && got.last() == Some(&1) {
            got.pop();
        }
        if got != want {
            return Err(Error::Model(format!(
                "tensor {name} has shape {:?}, expected {want:?}",
                t.dims
            )));
        }
        if !t.ggml_type.can_dequantize() {
            return Err(Error::Unsupported(format!(
                "tensor {name} has quant type {}",
                t.ggml_type
            )));
        }
        Ok(t.clone())
    }

    /// Norm gains, router and biases are kept in f32 by every converter; other
    /// types there would change the numerics, so reject them.
    fn get_f32(&self, name: &str, dims: &[usize]) -> Result<TensorInfo> {
        let t = self.get(name, dims)?;
        if t.ggml_type != GgmlType::F32 {
            return Err(Error::Unsupported(format!(
                "tensor {name} is {}, expected F32",
                t.ggml_type
            )));
        }
        Ok(t)
    }
}

impl Weights {
    pub fn from_gguf(f: &GgufFile, c: &Config) -> Result<Weights> {
        let l = Lookup { f };
        let token_embd = l.get("token_embd.weight", &[c.n_embd, c.n_vocab])?;
        let output = if l.has("output.weight") {
            l.get("output.weight", &[c.n_embd, c.n_vocab])?
        } else {
            token_embd.clone()
        };
        let output_norm = l.get_f32("output_norm.weight", &[c.n_embd])?;
        let layers = (0..c.n_layer)
            .map(|il| layer(&l, c, il))
            .collect::<Result<Vec<_>>>()?;
        Ok(Weights {
            token_embd,
            output_norm,
            output,
            layers,
        })
    }
}

fn layer(l: &Lookup, c: &Config, il: usize) -> Result<LayerWeights> {
    let n = |s: &str| format!("blk.{il}.{s}.weight");
    let n_qk = c.n_embd_head_qk();
    let q = if c.n_lora_q > 0 {
        QProj::Lora {
            q_a: l.get(&n("attn_q_a"), &[c.n_embd, c.n_lora_q])?,
            q_a_norm: l.get_f32(&n("attn_q_a_norm"), &[c.n_lora_q])?,
            q_b: l.get(&n("attn_q_b"), &[c.n_lora_q, c.n_head * n_qk])?,
        }
    } else {
        QProj::Direct {
            q: l.get(&n("attn_q"), &[c.n_embd, c.n_head * n_qk])?,
        }
    };
    let ffn = if c.is_moe_layer(il) {
        let gate_up_exps = if l.has(&n("ffn_gate_up_exps")) {
            ExpertsGateUp::Merged {
                gate_up: l.get(
                    &n("ffn_gate_up_exps"),
                    &[c.n_embd, 2 * c.n_ff_exp, c.n_expert],
                )?,
            }
        } else {
            ExpertsGateUp::Separate {
                gate: l.get(&n("ffn_gate_exps"), &[c.n_embd, c.n_ff_exp, c.n_expert])?,
                up: l.get(&n("ffn_up_exps"), &[c.n_embd, c.n_ff_exp, c.n_expert])?,
            }
        };
        let n_ff_sh = c.n_ff_exp * c.n_expert_shared;
        let shared = if c.n_expert_shared > 0 {
            Some(DenseFfn {
                gate: l.get(&n("ffn_gate_shexp"), &[c.n_embd, n_ff_sh])?,
                up: l.get(&n("ffn_up_shexp"), &[c.n_embd, n_ff_sh])?,
                down: l.get(&n("ffn_down_shexp"), &[n_ff_sh, c.n_embd])?,
            })
        } else {
            None
        };
        let bias = format!("blk.{il}.exp_probs_b.bias");
        Ffn::Moe {
            gate_inp: l.get_f32(&n("ffn_gate_inp"), &[c.n_embd, c.n_expert])?,
            exp_probs_b: if l.has(&bias) {
                Some(l.get_f32(&bias, &[c.n_expert])?)
            } else {
                None
            },
            gate_up_exps,
            down_exps: l.get(&n("ffn_down_exps"), &[c.n_ff_exp, c.n_embd, c.n_expert])?,
            shared,
        }
    } else {
        Ffn::Dense(DenseFfn {
            gate: l.get(&n("ffn_gate"), &[c.n_embd, c.n_ff])?,
            up: l.get(&n("ffn_up"), &[c.n_embd, c.n_ff])?,
            down: l.get(&n("ffn_down"), &[c.n_ff, c.n_embd])?,
        })
    };
    Ok(LayerWeights {
        attn_norm: l.get_f32(&n("attn_norm"), &[c.n_embd])?,
        q,
        kv_a_mqa: l.get(&n("attn_kv_a_mqa"), &[c.n_embd, c.kv_row()])?,
        kv_a_norm: l.get_f32(&n("attn_kv_a_norm"), &[c.n_lora_kv])?,
        k_b: l.get(
            &n("attn_k_b"),
            &[c.n_embd_head_qk_nope, c.n_lora_kv, c.n_head],
        )?,
        v_b: l.get(&n("attn_v_b"), &[c.n_lora_kv, c.n_embd_head_v, c.n_head])?,
        attn_output: l.get(&n("attn_output"), &[c.n_head * c.n_embd_head_v, c.n_embd])?,
        ffn_norm: l.get_f32(&n("ffn_norm"), &[c.n_embd])?,
        ffn,
    })
}
