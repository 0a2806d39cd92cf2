//! Hyperparameters from `{arch}.*` GGUF keys, validated once, named as
//! llama.cpp names them (`n_lora_kv`, `n_embd_head_qk_rope`, …) so comparing
//! with llama.cpp needs no translation table. Missing keys take llama.cpp's
//! defaults and rules (`model-spec.md` §3.2, §6).

use crate::error::{Error, Result};
use crate::gguf::GgufFile;

// Bounds on the hyperparameters, far above every deepseek2-family model
// (GLM-4.7-Flash: 47 layers, 2048 wide, 20 heads, a 154880-token vocabulary,
// 64 experts of which 4 are used and 1 shared). With every count and width
// below them, a product of a few of them cannot overflow, and a corrupt
// value fails at load with its key's name instead of as a huge allocation.

/// Most blocks (`block_count`).
pub const MAX_LAYERS: usize = 1024;
/// Widest row of any kind: embedding, FFN, LoRA ranks, head widths.
pub const MAX_WIDTH: usize = 1 << 20;
/// Most attention heads.
pub const MAX_HEADS: usize = 1024;
/// Largest vocabulary.
pub const MAX_VOCAB: usize = 1 << 22;
/// Most routed experts (and experts used per token).
pub const MAX_EXPERTS: usize = 4096;
/// Most shared experts.
pub const MAX_SHARED_EXPERTS: usize = 64;

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
    /// Whether any block is MoE; without one, the expert counts and widths
    /// size nothing.
    pub fn has_moe(&self) -> bool {
        self.n_layer_dense_lead < self.n_layer && self.n_expert > 0
    }
    /// What sizes the MoE buffers: (experts, used per token, expert FFN
    /// width, shared FFN width), all 0 when every block is dense (the
    /// expert keys are then unused, whatever they say).
    pub fn moe_dims(&self) -> (usize, usize, usize, usize) {
        if !self.has_moe() {
            return (0, 0, 0, 0);
        }
        let shared = self.n_ff_exp * self.n_expert_shared;
        (self.n_expert, self.n_expert_used, self.n_ff_exp, shared)
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

        let yarn = yarn(f, &k)?;

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
        self.check_ranges(key_length_mla)?;
        self.check_blocks()?;
        self.check_experts()?;
        self.check_floats()
    }

    /// Every count and width in 1..=its bound (`MAX_*`), so that products
    /// of a few of them cannot overflow and a corrupt value is named here.
    fn check_ranges(&self, key_length_mla: usize) -> Result<()> {
        for (name, v, max) in [
            ("block_count", self.n_layer, MAX_LAYERS),
            ("embedding_length", self.n_embd, MAX_WIDTH),
            ("attention.head_count", self.n_head, MAX_HEADS),
            ("attention.kv_lora_rank", self.n_lora_kv, MAX_WIDTH),
            ("attention.key_length_mla", key_length_mla, MAX_WIDTH),
            ("attention.value_length_mla", self.n_embd_head_v, MAX_WIDTH),
            ("rope.dimension_count", self.n_embd_head_qk_rope, MAX_WIDTH),
            ("vocabulary size", self.n_vocab, MAX_VOCAB),
            ("context_length", self.n_ctx_train, u32::MAX as usize),
        ] {
            if v == 0 || v > max {
                return bad(format!("{name} {v} must be in 1..={max}"));
            }
        }
        for (name, v, max) in [
            ("feed_forward_length", self.n_ff, MAX_WIDTH),
            ("attention.q_lora_rank", self.n_lora_q, MAX_WIDTH),
            ("expert_count", self.n_expert, MAX_EXPERTS),
            ("expert_used_count", self.n_expert_used, MAX_EXPERTS),
            (
                "expert_shared_count",
                self.n_expert_shared,
                MAX_SHARED_EXPERTS,
            ),
            ("expert_feed_forward_length", self.n_ff_exp, MAX_WIDTH),
        ] {
            if v > max {
                return bad(format!("{name} {v} must be in 0..={max}"));
            }
        }
        if self.n_embd_head_qk_rope % 2 != 0 || self.n_embd_head_qk_rope >= key_length_mla {
            return bad(format!(
                "rope.dimension_count {} must be even and smaller than key_length_mla {key_length_mla}",
                self.n_embd_head_qk_rope
            ));
        }
        Ok(())
    }

    fn check_blocks(&self) -> Result<()> {
        if self.n_layer_dense_lead > self.n_layer {
            return bad(format!(
                "leading_dense_block_count {} exceeds block_count {}",
                self.n_layer_dense_lead, self.n_layer
            ));
        }
        if self.n_layer_dense_lead > 0 && self.n_ff == 0 {
            return bad("dense blocks need feed_forward_length".into());
        }
        if self.n_layer_dense_lead < self.n_layer && self.n_expert == 0 {
            return bad("MoE blocks need expert_count".into());
        }
        if self.has_moe() && self.n_ff_exp == 0 {
            return bad("MoE blocks need expert_feed_forward_length".into());
        }
        Ok(())
    }

    /// llama.cpp's rule, whatever layers exist: with experts, 1..=n_expert
    /// of them are used per token; without, none.
    fn check_experts(&self) -> Result<()> {
        let ok = if self.n_expert > 0 {
            (1..=self.n_expert).contains(&self.n_expert_used)
        } else {
            self.n_expert_used == 0
        };
        if !ok {
            return bad(format!(
                "expert_used_count {} must be in 1..={} (0 without experts)",
                self.n_expert_used, self.n_expert
            ));
        }
        Ok(())
    }

    /// Every float the forward pass scales by is finite and in the range
    /// real models use; a NaN or infinity here would make every logit NaN.
    fn check_floats(&self) -> Result<()> {
        let mut checks = vec![
            ("attention.layer_norm_rms_epsilon", self.rms_eps, 0.0, 1.0),
            ("rope.freq_base", self.rope_freq_base, 1.0, 1e12),
            ("expert_weights_scale", self.expert_weights_scale, 0.0, 1e3),
        ];
        if let Some(y) = &self.yarn {
            checks.extend([
                ("rope.scaling.yarn_beta_fast", y.beta_fast, 0.0, 1e6),
                ("rope.scaling.yarn_beta_slow", y.beta_slow, 0.0, 1e6),
            ]);
            // ext_factor mixes extrapolation into interpolation (a weight);
            // log_mul is 0.1 × mscale_all_dim (0.0707 for DeepSeek-V2).
            for (name, v, hi) in [
                ("rope.scaling.yarn_ext_factor", y.ext_factor, 1.0),
                ("rope.scaling.yarn_log_multiplier", y.log_mul, 10.0),
            ] {
                if !(0.0..=hi).contains(&v) {
                    return bad(format!("{name} {v} must be in [0, {hi}]"));
                }
            }
        }
        for (name, v, lo, hi) in checks {
            // Written so that NaN fails: lo < v <= hi (open below).
            if !(v > lo && v <= hi) {
                return bad(format!("{name} {v} must be in ({lo}, {hi}]"));
            }
        }
        if !(self.kq_scale().is_finite() && self.kq_scale() > 0.0) {
            return bad(format!(
                "the attention scale {} (from YaRN's factor and log multiplier) must be positive",
                self.kq_scale()
            ));
        }
        Ok(())
    }
}

/// YaRN RoPE scaling, when `rope.scaling.type` says so (`k` makes the
/// architecture's key names).
fn yarn(f: &GgufFile, k: &dyn Fn(&str) -> String) -> Result<Option<Yarn>> {
    Ok(match f.get_str(&k("rope.scaling.type"))? {
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
            let n_ctx_orig = f
                .get_u32(&k("rope.scaling.original_context_length"))?
                .unwrap_or(0);
            Some(Yarn {
                freq_scale: 1.0 / factor,
                // llama.cpp: 0 or missing means the training context.
                n_ctx_orig: match n_ctx_orig {
                    0 => f.get_u32(&k("context_length"))?.unwrap_or(4096),
                    n => n,
                },
                beta_fast: f
                    .get_f32(&k("rope.scaling.yarn_beta_fast"))?
                    .unwrap_or(32.0),
                beta_slow: f.get_f32(&k("rope.scaling.yarn_beta_slow"))?.unwrap_or(1.0),
                // A negative value is llama.cpp's "unset": full YaRN.
                ext_factor: f
                    .get_f32(&k("rope.scaling.yarn_ext_factor"))?
                    .map(|v| if v < 0.0 { 1.0 } else { v })
                    .unwrap_or(1.0),
                log_mul: f
                    .get_f32(&k("rope.scaling.yarn_log_multiplier"))?
                    .unwrap_or(0.0),
            })
        }
        Some(other) => return Err(Error::Unsupported(format!("RoPE scaling type {other:?}"))),
    })
}

fn bad<T>(m: String) -> Result<T> {
    Err(Error::Model(m))
}
