//! Hyperparameters from `{arch}.*` GGUF keys, validated once, named as
//! llama.cpp names them (`n_lora_kv`, `n_embd_head_qk_rope`, …) so comparing
//! with llama.cpp needs no translation table. Missing keys take llama.cpp's
//! defaults and rules (`model-spec.md` §3.2, §6).

use crate::error::{Error, Result};
use crate::gguf::GgufFile;

/// The expert gating function (`{arch}.expert_gating_func`: 1 softmax, 2 sigmoid).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Gating {
    Softmax,
    Sigmoid,
}

/// YaRN RoPE scaling, present only when the file sets `rope.scaling.type = yarn`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Yarn {
    /// 1 / rope.scaling.factor
    pub freq_scale: f32,
    pub n_ctx_orig: u32,
    pub beta_fast: f32,
    pub beta_slow: f32,
    pub ext_factor: f32,
    /// `rope.scaling.yarn_log_multiplier` as stored (0.1 × mscale_all_dim).
    pub log_mul: f32,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    pub arch: String,
    pub n_layer: usize,
    pub n_ctx_train: usize,
    pub n_embd: usize,
    pub n_vocab: usize,
    pub n_head: usize,
    /// Dense FFN width (`feed_forward_length`).
    pub n_ff: usize,
    pub n_layer_dense_lead: usize,
    /// q LoRA rank; 0 = a single `attn_q` projection (DeepSeek-V2-Lite).
    pub n_lora_q: usize,
    pub n_lora_kv: usize,
    pub n_embd_head_qk_nope: usize,
    pub n_embd_head_qk_rope: usize,
    /// Per-head value width after decompression (`value_length_mla`).
    pub n_embd_head_v: usize,
    pub n_expert: usize,
    pub n_expert_used: usize,
    pub n_expert_shared: usize,
    pub n_ff_exp: usize,
    pub expert_weights_scale: f32,
    pub expert_weights_norm: bool,
    pub gating: Gating,
    pub rope_freq_base: f32,
    pub yarn: Option<Yarn>,
    pub rms_eps: f32,
}

impl Config {
    /// Width of one latent KV cache row: compressed latent + shared rope key.
    pub fn kv_row(&self) -> usize {
        self.n_lora_kv + self.n_embd_head_qk_rope
    }
    /// Per-head q/k width (`key_length_mla`).
    pub fn n_embd_head_qk(&self) -> usize {
        self.n_embd_head_qk_nope + self.n_embd_head_qk_rope
    }
    pub fn is_moe_layer(&self, il: usize) -> bool {
        il >= self.n_layer_dense_lead && self.n_expert > 0
    }

    /// Attention scale, deepseek2.cpp: mscale² / sqrt(key_length_mla), with
    /// mscale = 1 + yarn_log_mul · ln(1/freq_scale) under YaRN, else 1.
    pub fn kq_scale(&self) -> f32 {
        let mscale = match self.yarn {
            Some(y) => 1.0 + y.log_mul * (1.0 / y.freq_scale).ln(),
            None => 1.0,
        };
        mscale * mscale / (self.n_embd_head_qk() as f32).sqrt()
    }

    pub fn from_gguf(f: &GgufFile) -> Result<Config> {
        let arch = f
            .get_str("general.architecture")?
            .ok_or_else(|| Error::Model("general.architecture is missing".into()))?
            .to_string();
        if arch != "deepseek2" {
            return Err(Error::Unsupported(format!(
                "architecture {arch:?}; glmw runs the deepseek2 family (GLM-4.7-Flash, DeepSeek-V2-Lite, Youtu-LLM)"
            )));
        }
        let k = |name: &str| format!("{arch}.{name}");
        let req = |name: &str| -> Result<usize> {
            f.get_u32(&k(name))?
                .map(|v| v as usize)
                .ok_or_else(|| Error::Model(format!("required metadata {} is missing", k(name))))
        };
        let opt = |name: &str, default: usize| -> Result<usize> {
            Ok(f.get_u32(&k(name))?.map(|v| v as usize).unwrap_or(default))
        };

        let n_layer = req("block_count")?;
        let n_embd = req("embedding_length")?;
        let n_head = req("attention.head_count")?;
        let n_vocab = match f.get_str_array("tokenizer.ggml.tokens")? {
            Some(t) => t.len(),
            None => match f.get_u32(&k("vocab_size"))? {
                Some(v) => v as usize,
                None => f
                    .tensor("token_embd.weight")
                    .map(|t| t.ne(1) as usize)
                    .unwrap_or(0),
            },
        };
        if f.get(&k("attention.key_length_mla")).is_none()
            || f.get(&k("attention.value_length_mla")).is_none()
        {
            return Err(Error::Unsupported(
                "a legacy deepseek2 file without attention.key_length_mla (non-MLA attn_kv_b layout); \
                 re-convert it with a current llama.cpp"
                    .into(),
            ));
        }
        let key_length_mla = req("attention.key_length_mla")?;
        let n_rot = req("rope.dimension_count")?;
        let n_expert = opt("expert_count", 0)?;
        let n_layer_dense_lead = opt("leading_dense_block_count", 0)?;

        let gating = match f.get_u32(&k("expert_gating_func"))? {
            Some(1) => Gating::Softmax,
            Some(2) => Gating::Sigmoid,
            Some(v) => {
                return Err(Error::Unsupported(format!(
                    "{} = {v} (1 softmax and 2 sigmoid are known)",
                    k("expert_gating_func")
                )))
            }
            // llama.cpp PR #18980: GLM-4.7-Flash files carry no key and need sigmoid.
            None if (n_layer == 47 || n_layer == 48) && n_vocab == 154880 => Gating::Sigmoid,
            None => Gating::Softmax,
        };

        let yarn = match f.get_str(&k("rope.scaling.type"))? {
            None | Some("none") | Some("linear") => {
                let factor = f.get_f32(&k("rope.scaling.factor"))?.unwrap_or(0.0);
                if factor != 0.0 && factor != 1.0 {
                    return Err(Error::Unsupported(format!(
                        "linear RoPE scaling with factor {factor}"
                    )));
                }
                None
            }
            Some("yarn") => {
                let factor = f.get_f32(&k("rope.scaling.factor"))?.unwrap_or(1.0);
                if !(factor >= 1.0 && factor.is_finite()) {
                    return Err(Error::Model(format!(
                        "rope.scaling.factor {factor} must be >= 1"
                    )));
                }
                Some(Yarn {
                    freq_scale: 1.0 / factor,
                    n_ctx_orig: f
                        .get_u32(&k("rope.scaling.original_context_length"))?
                        .unwrap_or(0),
                    beta_fast: f
                        .get_f32(&k("rope.scaling.yarn_beta_fast"))?
                        .unwrap_or(32.0),
                    beta_slow: f.get_f32(&k("rope.scaling.yarn_beta_slow"))?.unwrap_or(1.0),
                    ext_factor: f
                        .get_f32(&k("rope.scaling.yarn_ext_factor"))?
                        .filter(|v| *v >= 0.0)
                        .unwrap_or(1.0),
                    log_mul: f
                        .get_f32(&k("rope.scaling.yarn_log_multiplier"))?
                        .unwrap_or(0.0),
                })
            }
            Some(other) => return Err(Error::Unsupported(format!("RoPE scaling type {other:?}"))),
        };

        let mut c = Config {
            n_layer,
            n_ctx_train: opt("context_length", 4096)?,
            n_embd,
            n_vocab,
            n_head,
            n_ff: opt("feed_forward_length", 0)?,
            n_layer_dense_lead,
            n_lora_q: opt("attention.q_lora_rank", 0)?,
            n_lora_kv: req("attention.kv_lora_rank")?,
            n_embd_head_qk_nope: key_length_mla.saturating_sub(n_rot),
            n_embd_head_qk_rope: n_rot,
            n_embd_head_v: req("attention.value_length_mla")?,
            n_expert,
            n_expert_used: opt("expert_used_count", 0)?,
            n_expert_shared: opt("expert_shared_count", 0)?,
            n_ff_exp: opt("expert_feed_forward_length", 0)?,
            expert_weights_scale: f.get_f32(&k("expert_weights_scale"))?.unwrap_or(0.0),
            expert_weights_norm: f.get_bool(&k("expert_weights_norm"))?.unwrap_or(false),
            gating,
            rope_freq_base: f.get_f32(&k("rope.freq_base"))?.unwrap_or(10000.0),
            yarn,
            rms_eps: f
                .get_f32(&k("attention.layer_norm_rms_epsilon"))?
                .unwrap_or(1e-6),
            arch,
        };
        // llama.cpp treats a stored scale of 0 as "do not scale".
        if c.expert_weights_scale == 0.0 {
            c.expert_weights_scale = 1.0;
        }
        c.validate(key_length_mla)?;
        Ok(c)
    }

    fn validate(&self, key_length_mla: usize) -> Result<()> {
        let bad = |m: String| Err(Error::Model(m));
        for (name, v) in [
            ("block_count", self.n_layer),
            ("embedding_length", self.n_embd),
            ("attention.head_count", self.n_head),
            ("attention.kv_lora_rank", self.n_lora_kv),
            ("attention.value_length_mla", self.n_embd_head_v),
            ("rope.dimension_count", self.n_embd_head_qk_rope),
            ("vocabulary size", self.n_vocab),
        ] {
            if v == 0 {
                return bad(format!("{} must be positive", name));
            }
        }
        if self.n_embd_head_qk_rope % 2 != 0 || self.n_embd_head_qk_rope >= key_length_mla {
            return bad(format!(
                "rope.dimension_count {} must be even and smaller than key_length_mla {key_length_mla}",
                self.n_embd_head_qk_rope
            ));
        }
        if self.n_layer_dense_lead > self.n_layer {
            return bad(format!(
                "leading_dense_block_count {} exceeds block_count {}",
                self.n_layer_dense_lead, self.n_layer
            ));
        }
        if self.n_layer_dense_lead > 0 && self.n_ff == 0 {
            return bad("dense blocks need feed_forward_length".into());
        }
        if self.n_layer_dense_lead < self.n_layer {
            if self.n_expert == 0 {
                return bad("MoE blocks need expert_count".into());
            }
            if self.n_expert_used == 0 || self.n_expert_used > self.n_expert {
                return bad(format!(
                    "expert_used_count {} must be in 1..={}",
                    self.n_expert_used, self.n_expert
                ));
            }
            if self.n_ff_exp == 0 {
                return bad("MoE blocks need expert_feed_forward_length".into());
            }
        }
        if !(self.rms_eps > 0.0 && self.rms_eps < 1.0) {
            return bad(format!(
                "layer_norm_rms_epsilon {} out of range",
                self.rms_eps
            ));
        }
        if !(self.rope_freq_base > 0.0 && self.rope_freq_base.is_finite()) {
            return bad(format!(
                "rope.freq_base {} must be positive",
                self.rope_freq_base
            ));
        }
        Ok(())
    }
}
