//! Quant mixes: which GGML type each tensor of a preset gets. `Q4_0` is the
//! layout of the Unsloth Q4_0 file the presets were drawn from (the types
//! `presets.rs` writes); the others re-type it as llama.cpp writes the files
//! people download: `Q4KM`, `Q5KM`, `Q6K`, `Q2K`, `Q3KM` and `IQ4XS` by
//! `llama-quantize`'s rules
//! for this architecture (src/llama-quant.cpp: `llama_tensor_get_type_impl`
//! and `tensor_type_fallback`), `Q8_0`, `F16` and `BF16` every matrix in
//! that type (llama-quantize Q8_0 keeps the output head in Q8_0 too;
//! convert's f16 / bf16 keep the router in F32). Vectors and the router stay F32 in every mix.

use crate::quant::GgmlType::{
    self, BF16, F16, F32, IQ4_NL, IQ4_XS, Q2_K, Q3_K, Q4_K, Q5_0, Q5_1, Q5_K, Q6_K, Q8_0,
};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mix {
    Q4_0,
    Q4KM,
    Q5KM,
    Q6K,
    Q8_0,
    F16,
    BF16,
    Q2K,
    Q3KM,
    IQ4XS,
}

impl Mix {
    pub const ALL: [Mix; 10] = [
        Mix::Q4_0,
        Mix::Q4KM,
        Mix::Q5KM,
        Mix::Q6K,
        Mix::Q8_0,
        Mix::F16,
        Mix::BF16,
        Mix::Q2K,
        Mix::Q3KM,
        Mix::IQ4XS,
    ];

    /// llama.cpp's name for the file type.
    pub fn name(self) -> &'static str {
        match self {
            Mix::Q4_0 => "q4_0",
            Mix::Q4KM => "q4_k_m",
            Mix::Q5KM => "q5_k_m",
            Mix::Q6K => "q6_k",
            Mix::Q8_0 => "q8_0",
            Mix::F16 => "f16",
            Mix::BF16 => "bf16",
            Mix::Q2K => "q2_k",
            Mix::Q3KM => "q3_k_m",
            Mix::IQ4XS => "iq4_xs",
        }
    }

    pub fn from_name(s: &str) -> Option<Mix> {
        Self::ALL.into_iter().find(|m| m.name() == s)
    }

    /// `general.file_type` (llama.cpp's `llama_ftype`).
    pub fn file_type(self) -> u32 {
        match self {
            Mix::Q4_0 => 2,
            Mix::Q4KM => 15,
            Mix::Q5KM => 17,
            Mix::Q6K => 18,
            Mix::Q8_0 => 7,
            Mix::F16 => 1,
            Mix::BF16 => 32,
            Mix::Q2K => 10,
            Mix::Q3KM => 12,
            Mix::IQ4XS => 30,
        }
    }

    /// The type of tensor `name` (`dims` in GGUF order) of a model with
    /// `n_layer` blocks, given its type in the Q4_0 layout.
    pub(crate) fn retype(
        self,
        name: &str,
        dims: &[u64],
        q4_0: GgmlType,
        n_layer: usize,
    ) -> GgmlType {
        match self {
            // F32 tensors (norms, the router, its bias) are never quantized.
            _ if q4_0 == F32 => F32,
            Mix::Q4_0 => q4_0,
            Mix::Q4KM => fallback(k_mix(name, n_layer, Q4_K), dims[0]),
            Mix::Q5KM => fallback(k_mix(name, n_layer, Q5_K), dims[0]),
            Mix::Q6K => fallback(Q6_K, dims[0]),
            Mix::Q8_0 => Q8_0,
            Mix::F16 => F16,
            Mix::BF16 => BF16,
            Mix::Q2K | Mix::Q3KM | Mix::IQ4XS => fallback(self.low_mix(name, n_layer), dims[0]),
        }
    }

    /// llama.cpp's Q2_K / Q3_K_M / IQ4_XS choice before the shape fallback
    /// (this model has 64 experts, so attn_output takes the non-8-expert
    /// rule): Q6_K output head; Q2_K: Q3_K ffn_down (every kind) and
    /// attn_output, Q2_K the rest; Q3_K_M: ffn_down Q5_K in the first
    /// sixteenth of the layers and Q4_K after, attn_output Q4_K, Q3_K the
    /// rest; IQ4_XS: IQ4_XS everywhere else.
    fn low_mix(self, name: &str, n_layer: usize) -> GgmlType {
        if name == "output.weight" {
            return Q6_K;
        }
        let down = name.contains("ffn_down");
        let attn_out = name.contains("attn_output.weight");
        match (self, layer_of(name)) {
            (Mix::Q2K, _) if down || attn_out => Q3_K,
            (Mix::Q2K, _) => Q2_K,
            (Mix::Q3KM, Some(il)) if down && il < n_layer / 16 => Q5_K,
            (Mix::Q3KM, _) if down || attn_out => Q4_K,
            (Mix::Q3KM, _) => Q3_K,
            _ => IQ4_XS,
        }
    }
}

/// llama.cpp's Q4_K_M / Q5_K_M choice (`base` Q4_K / Q5_K) before the shape
/// fallback: Q6_K for the output head and for ffn_down (dense, shared and
/// routed) in the layers `use_more_bits` picks, `base` for every other
/// matrix. Nothing in this architecture matches the attn_v / attn_qkv /
/// attn_kv_b rules (attn_v_b is not `attn_v.weight`), and attn_output's
/// bump is for 8-expert models only.
fn k_mix(name: &str, n_layer: usize, base: GgmlType) -> GgmlType {
    if name == "output.weight" {
        return Q6_K;
    }
    match layer_of(name) {
        Some(il) if name.contains("ffn_down") && use_more_bits(il, n_layer) => Q6_K,
        _ => base,
    }
}

/// The block index of a `blk.N.…` tensor name.
fn layer_of(name: &str) -> Option<usize> {
    name.strip_prefix("blk.")
        .and_then(|r| r.split('.').next())
        .and_then(|l| l.parse::<usize>().ok())
}

/// The first and last eighth of the layers and every third one between.
fn use_more_bits(il: usize, n_layer: usize) -> bool {
    let (il, n) = (il as i64, n_layer as i64);
    il < n / 8 || il >= 7 * n / 8 || (il - n / 8) % 3 == 2
}

/// A row (`ne0` weights) that the chosen type's block does not divide falls
/// back to a 32-weight type (Q4_K to Q5_0, Q5_K to Q5_1, Q6_K to Q8_0, Q2_K,
/// Q3_K and IQ4_XS to IQ4_NL), and
/// to F16 if even that does not divide it.
fn fallback(ty: GgmlType, ne0: u64) -> GgmlType {
    if ne0 % ty.block_size() == 0 {
        return ty;
    }
    let small = match ty {
        Q4_K => Q5_0,
        Q5_K => Q5_1,
        Q2_K | Q3_K | IQ4_XS => IQ4_NL,
        _ => Q8_0,
    };
    if ne0 % small.block_size() == 0 {
        small
    } else {
        F16
    }
}
