//! Quant mixes: which GGML type each tensor of a preset gets. `Q4_0` is the
//! layout of the Unsloth Q4_0 file the presets were drawn from (the types
//! `presets.rs` writes); the others re-type it as llama.cpp writes the files
//! people download: `Q4KM`, `Q5KM` and `Q6K` by `llama-quantize`'s rules
//! for this architecture (src/llama-quant.cpp: `llama_tensor_get_type_impl`
//! and `tensor_type_fallback`), `Q8_0`, `F16` and `BF16` every matrix in
//! that type (llama-quantize Q8_0 keeps the output head in Q8_0 too;
//! convert's f16 / bf16 keep the router in F32). Vectors and the router stay F32 in every mix.

use crate::quant::GgmlType::{self, BF16, F16, F32, Q4_K, Q5_0, Q5_1, Q5_K, Q6_K, Q8_0};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mix {
    Q4_0,
    Q4KM,
    Q5KM,
    Q6K,
    Q8_0,
    F16,
    BF16,
}

impl Mix {
    pub const ALL: [Mix; 7] = [
        Mix::Q4_0,
        Mix::Q4KM,
        Mix::Q5KM,
        Mix::Q6K,
        Mix::Q8_0,
        Mix::F16,
        Mix::BF16,
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
    let layer = name
        .strip_prefix("blk.")
        .and_then(|r| r.split('.').next())
        .and_then(|l| l.parse::<usize>().ok());
    match layer {
        Some(il) if name.contains("ffn_down") && use_more_bits(il, n_layer) => Q6_K,
        _ => base,
    }
}

/// The first and last eighth of the layers and every third one between.
fn use_more_bits(il: usize, n_layer: usize) -> bool {
    let (il, n) = (il as i64, n_layer as i64);
    il < n / 8 || il >= 7 * n / 8 || (il - n / 8) % 3 == 2
}

/// A row (`ne0` weights) that the chosen type's block does not divide falls
/// back to a 32-weight type (Q4_K to Q5_0, Q5_K to Q5_1, Q6_K to Q8_0), and
/// to F16 if even that does not divide it.
fn fallback(ty: GgmlType, ne0: u64) -> GgmlType {
    if ne0 % ty.block_size() == 0 {
        return ty;
    }
    let small = match ty {
        Q4_K => Q5_0,
        Q5_K => Q5_1,
        _ => Q8_0,
    };
    if ne0 % small.block_size() == 0 {
        small
    } else {
        F16
    }
}
