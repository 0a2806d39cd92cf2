//! The synthetic model presets: hyperparameters, metadata and quant mix of
//! GLM-4.7-Flash (Unsloth Q4_0 layout, `model-spec.md` §3), DeepSeek-V2-Lite
//! (no q LoRA, softmax routing, YaRN), and `tiny` and `tiny-v2-lite`, which
//! keep every structural feature of those two at sizes a CPU runs in
//! milliseconds.

use super::mix::Mix;
use super::vocab::synthetic_vocab;
use super::{Dist, SynthTensor};
use crate::gguf::{Array, TensorSpec, Value};
use crate::quant::GgmlType::{self, F32, Q4_0, Q5_K, Q6_K, Q8_0};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Preset {
    Tiny,
    Glm47Flash,
    DeepseekV2Lite,
    TinyV2Lite,
}

impl Preset {
    pub const ALL: [Preset; 4] = [
        Preset::Tiny,
        Preset::Glm47Flash,
        Preset::DeepseekV2Lite,
        Preset::TinyV2Lite,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Preset::Tiny => "tiny",
            Preset::Glm47Flash => "glm-4.7-flash",
            Preset::DeepseekV2Lite => "deepseek-v2-lite",
            Preset::TinyV2Lite => "tiny-v2-lite",
        }
    }

    pub fn from_name(s: &str) -> Option<Preset> {
        Self::ALL.into_iter().find(|p| p.name() == s)
    }

    fn shape(self) -> Shape {
        match self {
            Preset::Glm47Flash => Shape {
                name: "Glm-4.7-Flash (glmw synthetic)",
                n_layer: 47,
                n_embd: 2048,
                n_head: 20,
                n_lora_q: 768,
                n_lora_kv: 512,
                n_nope: 192,
                n_rope: 64,
                n_v: 256,
                n_ff: 10240,
                n_ff_exp: 1536,
                n_expert: 64,
                n_expert_used: 4,
                n_expert_shared: 1,
                n_vocab: 154880,
                first_special: 154820,
                n_ctx: 202752,
                // The real files carry no gating key: llama.cpp's 47-layer /
                // 154880-vocab rule must pick sigmoid, so the preset omits it too.
                gating_key: None,
                bias: true,
                norm: true,
                scale: 1.8,
                freq_base: 1_000_000.0,
                eps: 1e-5,
                yarn: None,
                pre: "glm4",
            },
            Preset::Tiny => Shape {
                name: "glmw tiny (synthetic GLM-4.7-Flash structure)",
                gating_key: Some(2),
                ..Preset::Glm47Flash.shape().tiny_sizes()
            },
            Preset::DeepseekV2Lite => Shape {
                name: "DeepSeek-V2-Lite (glmw synthetic)",
                n_layer: 27,
                n_embd: 2048,
                n_head: 16,
                n_lora_q: 0,
                n_lora_kv: 512,
                n_nope: 128,
                n_rope: 64,
                n_v: 128,
                n_ff: 10944,
                n_ff_exp: 1408,
                n_expert: 64,
                n_expert_used: 6,
                n_expert_shared: 2,
                n_vocab: 102400,
                first_special: 100000,
                n_ctx: 163840,
                gating_key: Some(1),
                bias: false,
                norm: false,
                scale: 1.0,
                freq_base: 10000.0,
                eps: 1e-6,
                yarn: Some((40.0, 4096, 0.0707)),
                pre: "glm4",
            },
            // DeepSeek-V2-Lite's structure (no q LoRA, softmax gating
            // without renormalisation, two shared experts, YaRN) at the
            // tiny preset's sizes.
            Preset::TinyV2Lite => Shape {
                name: "glmw tiny-v2-lite (synthetic DeepSeek-V2-Lite structure)",
                n_lora_q: 0,
                n_expert_used: 3,
                n_expert_shared: 2,
                yarn: Some((40.0, 256, 0.0707)),
                ..Preset::DeepseekV2Lite.shape().tiny_sizes()
            },
        }
    }

    /// Metadata and tensor list of the preset in `mix`; the vocabulary
    /// depends on `seed`.
    pub(crate) fn build(self, mix: Mix, seed: u64) -> (Vec<(String, Value)>, Vec<SynthTensor>) {
        let s = self.shape();
        (metadata(&s, mix, seed), tensors(&s, mix))
    }
}

struct Shape {
    name: &'static str,
    n_layer: usize,
    n_embd: usize,
    n_head: usize,
    n_lora_q: usize,
    n_lora_kv: usize,
    n_nope: usize,
    n_rope: usize,
    n_v: usize,
    n_ff: usize,
    n_ff_exp: usize,
    n_expert: usize,
    n_expert_used: usize,
    n_expert_shared: usize,
    n_vocab: usize,
    first_special: usize,
    n_ctx: usize,
    gating_key: Option<u32>,
    bias: bool,
    norm: bool,
    scale: f32,
    freq_base: f32,
    eps: f32,
    /// (factor, original context, yarn_log_multiplier)
    yarn: Option<(f32, u32, f32)>,
    pre: &'static str,
}

impl Shape {
    /// This structure at the sizes of the tiny presets.
    fn tiny_sizes(self) -> Shape {
        Shape {
            n_layer: 3,
            n_embd: 256,
            n_head: 4,
            n_lora_q: self.n_lora_q.min(64),
            n_lora_kv: 64,
            n_nope: 32,
            n_rope: 16,
            n_v: 32,
            n_ff: 512,
            n_ff_exp: 256,
            n_expert: 8,
            n_vocab: 512,
            first_special: 476,
            n_ctx: 1024,
            ..self
        }
    }
}

const WEIGHT: Dist = Dist {
    mean: 0.0,
    std: 0.02,
};
const GAIN: Dist = Dist {
    mean: 1.0,
    std: 0.05,
};
const BIAS: Dist = Dist {
    mean: 0.0,
    std: 0.05,
};

/// The preset's tensors; the types written below are the Q4_0 layout's,
/// which `mix` re-types.
fn tensors(s: &Shape, mix: Mix) -> Vec<SynthTensor> {
    let mut v = Vec::new();
    let mut t = |name: String, dims: &[usize], ty: GgmlType, dist: Dist| {
        let dims: Vec<u64> = dims.iter().map(|&d| d as u64).collect();
        let ty = mix.retype(&name, &dims, ty, s.n_layer);
        v.push(SynthTensor {
            spec: TensorSpec::new(name, &dims, ty),
            dist,
        });
    };
    let (e, h) = (s.n_embd, s.n_head);
    let qk = s.n_nope + s.n_rope;
    t("token_embd.weight".into(), &[e, s.n_vocab], Q4_0, WEIGHT);
    for il in 0..s.n_layer {
        let n = |x: &str| format!("blk.{il}.{x}.weight");
        t(n("attn_norm"), &[e], F32, GAIN);
        if s.n_lora_q > 0 {
            t(n("attn_q_a"), &[e, s.n_lora_q], Q4_0, WEIGHT);
            t(n("attn_q_a_norm"), &[s.n_lora_q], F32, GAIN);
            t(n("attn_q_b"), &[s.n_lora_q, h * qk], Q4_0, WEIGHT);
        } else {
            t(n("attn_q"), &[e, h * qk], Q4_0, WEIGHT);
        }
        t(
            n("attn_kv_a_mqa"),
            &[e, s.n_lora_kv + s.n_rope],
            Q8_0,
            WEIGHT,
        );
        t(n("attn_kv_a_norm"), &[s.n_lora_kv], F32, GAIN);
        t(n("attn_k_b"), &[s.n_nope, s.n_lora_kv, h], Q8_0, WEIGHT);
        t(n("attn_v_b"), &[s.n_lora_kv, s.n_v, h], Q8_0, WEIGHT);
        t(n("attn_output"), &[h * s.n_v, e], Q4_0, WEIGHT);
        t(n("ffn_norm"), &[e], F32, GAIN);
        if il == 0 {
            t(n("ffn_gate"), &[e, s.n_ff], Q4_0, WEIGHT);
            t(n("ffn_up"), &[e, s.n_ff], Q4_0, WEIGHT);
            t(n("ffn_down"), &[s.n_ff, e], Q4_0, WEIGHT);
        } else {
            let sh = s.n_ff_exp * s.n_expert_shared;
            t(n("ffn_gate_inp"), &[e, s.n_expert], F32, WEIGHT);
            if s.bias {
                t(
                    format!("blk.{il}.exp_probs_b.bias"),
                    &[s.n_expert],
                    F32,
                    BIAS,
                );
            }
            t(
                n("ffn_gate_exps"),
                &[e, s.n_ff_exp, s.n_expert],
                Q4_0,
                WEIGHT,
            );
            t(n("ffn_up_exps"), &[e, s.n_ff_exp, s.n_expert], Q4_0, WEIGHT);
            t(
                n("ffn_down_exps"),
                &[s.n_ff_exp, e, s.n_expert],
                Q4_0,
                WEIGHT,
            );
            t(n("ffn_gate_shexp"), &[e, sh], Q5_K, WEIGHT);
            t(n("ffn_up_shexp"), &[e, sh], Q5_K, WEIGHT);
            t(n("ffn_down_shexp"), &[sh, e], Q6_K, WEIGHT);
        }
    }
    t("output_norm.weight".into(), &[e], F32, GAIN);
    t("output.weight".into(), &[e, s.n_vocab], Q6_K, WEIGHT);
    v
}

fn metadata(s: &Shape, mix: Mix, seed: u64) -> Vec<(String, Value)> {
    let mut m: Vec<(String, Value)> = Vec::new();
    let mut kv = |k: &str, v: Value| m.push((k.to_string(), v));
    let u = |x: usize| Value::U32(x as u32);
    let a = |k: &str| format!("deepseek2.{k}");
    kv("general.architecture", Value::Str("deepseek2".into()));
    kv("general.type", Value::Str("model".into()));
    kv("general.name", Value::Str(s.name.into()));
    kv("general.quantization_version", Value::U32(2));
    kv("general.file_type", Value::U32(mix.file_type()));
    kv(&a("block_count"), u(s.n_layer));
    kv(&a("context_length"), u(s.n_ctx));
    kv(&a("embedding_length"), u(s.n_embd));
    kv(&a("feed_forward_length"), u(s.n_ff));
    kv(&a("attention.head_count"), u(s.n_head));
    kv(&a("attention.head_count_kv"), u(1));
    kv(&a("rope.freq_base"), Value::F32(s.freq_base));
    kv(&a("attention.layer_norm_rms_epsilon"), Value::F32(s.eps));
    kv(&a("expert_used_count"), u(s.n_expert_used));
    kv(&a("expert_group_count"), u(1));
    kv(&a("expert_group_used_count"), u(1));
    kv(&a("leading_dense_block_count"), u(1));
    kv(&a("vocab_size"), u(s.n_vocab));
    if s.n_lora_q > 0 {
        kv(&a("attention.q_lora_rank"), u(s.n_lora_q));
    }
    kv(&a("attention.kv_lora_rank"), u(s.n_lora_kv));
    kv(&a("attention.key_length"), u(s.n_lora_kv + s.n_rope));
    kv(&a("attention.value_length"), u(s.n_lora_kv));
    kv(&a("attention.key_length_mla"), u(s.n_nope + s.n_rope));
    kv(&a("attention.value_length_mla"), u(s.n_v));
    kv(&a("expert_feed_forward_length"), u(s.n_ff_exp));
    kv(&a("expert_count"), u(s.n_expert));
    kv(&a("expert_shared_count"), u(s.n_expert_shared));
    kv(&a("expert_weights_scale"), Value::F32(s.scale));
    kv(&a("expert_weights_norm"), Value::Bool(s.norm));
    if let Some(g) = s.gating_key {
        kv(&a("expert_gating_func"), Value::U32(g));
    }
    kv(&a("rope.dimension_count"), u(s.n_rope));
    if let Some((factor, orig, log_mul)) = s.yarn {
        kv(&a("rope.scaling.type"), Value::Str("yarn".into()));
        kv(&a("rope.scaling.factor"), Value::F32(factor));
        kv(&a("rope.scaling.original_context_length"), Value::U32(orig));
        kv(&a("rope.scaling.yarn_log_multiplier"), Value::F32(log_mul));
    }

    let voc = synthetic_vocab(s.n_vocab, s.first_special, seed);
    let special = |i: usize| Value::U32((s.first_special + i) as u32);
    kv("tokenizer.ggml.model", Value::Str("gpt2".into()));
    kv("tokenizer.ggml.pre", Value::Str(s.pre.into()));
    kv(
        "tokenizer.ggml.tokens",
        Value::Array(Array::Str(voc.tokens.iter().collect())),
    );
    kv(
        "tokenizer.ggml.token_type",
        Value::Array(Array::I32(voc.token_types)),
    );
    kv(
        "tokenizer.ggml.merges",
        Value::Array(Array::Str(voc.merges.iter().collect())),
    );
    // GLM order of the added tokens: <|endoftext|> +0, [gMASK] +2, <|user|> +7, <|observation|> +9.
    kv("tokenizer.ggml.eos_token_id", special(0));
    kv("tokenizer.ggml.padding_token_id", special(0));
    kv("tokenizer.ggml.bos_token_id", special(2));
    kv("tokenizer.ggml.eot_token_id", special(7));
    kv("tokenizer.ggml.unknown_token_id", special(0));
    kv("tokenizer.ggml.eom_token_id", special(9));
    // GLM's own template, so that synthetic files render chats (tools,
    // thinking off) as the published ones do.
    kv(
        "tokenizer.chat_template",
        Value::Str(crate::tokenizer::GLM_TEMPLATE.into()),
    );
    m
}
