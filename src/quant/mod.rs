//! ggml tensor types: block geometry, CPU dequantization (the reference every
//! GPU kernel is checked against) and quantization (used by `glmw synth`).
//!
//! Layouts follow ggml-common.h exactly; see docs `model-spec.md` §2.

use crate::error::{Error, Result};

mod kquants;
mod legacy;
mod rtn;

/// A ggml tensor type id as stored in GGUF tensor-info records.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[allow(non_camel_case_types)]
pub enum GgmlType {
    F32,
    F16,
    Q4_0,
    Q4_1,
    Q5_0,
    Q5_1,
    Q8_0,
    Q8_1,
    Q2_K,
    Q3_K,
    Q4_K,
    Q5_K,
    Q6_K,
    Q8_K,
    IQ4_NL,
    IQ4_XS,
    I8,
    I16,
    I32,
    I64,
    F64,
    BF16,
    /// A type id ggml knows (an IQ or ternary format) that glmw does not
    /// decode. The file parses; loading such a tensor is an `Unsupported` error.
    Other(u32),
}

/// (type, ggml id, name, elements per block, bytes per block)
const TABLE: &[(GgmlType, u32, &str, u64, u64)] = &[
    (GgmlType::F32, 0, "F32", 1, 4),
    (GgmlType::F16, 1, "F16", 1, 2),
    (GgmlType::Q4_0, 2, "Q4_0", 32, 18),
    (GgmlType::Q4_1, 3, "Q4_1", 32, 20),
    (GgmlType::Q5_0, 6, "Q5_0", 32, 22),
    (GgmlType::Q5_1, 7, "Q5_1", 32, 24),
    (GgmlType::Q8_0, 8, "Q8_0", 32, 34),
    (GgmlType::Q8_1, 9, "Q8_1", 32, 36),
    (GgmlType::Q2_K, 10, "Q2_K", 256, 84),
    (GgmlType::Q3_K, 11, "Q3_K", 256, 110),
    (GgmlType::Q4_K, 12, "Q4_K", 256, 144),
    (GgmlType::Q5_K, 13, "Q5_K", 256, 176),
    (GgmlType::Q6_K, 14, "Q6_K", 256, 210),
    (GgmlType::Q8_K, 15, "Q8_K", 256, 292),
    (GgmlType::IQ4_NL, 20, "IQ4_NL", 32, 18),
    (GgmlType::IQ4_XS, 23, "IQ4_XS", 256, 136),
    (GgmlType::I8, 24, "I8", 1, 1),
    (GgmlType::I16, 25, "I16", 1, 2),
    (GgmlType::I32, 26, "I32", 1, 4),
    (GgmlType::I64, 27, "I64", 1, 8),
    (GgmlType::F64, 28, "F64", 1, 8),
    (GgmlType::BF16, 30, "BF16", 1, 2),
];

/// Known ggml ids without a decoder here, with their geometry so that byte
/// sizes (and therefore file layout checks) still work:
/// IQ2_XXS 16, IQ2_XS 17, IQ3_XXS 18, IQ1_S 19, IQ3_S 21, IQ2_S 22, IQ1_M 29,
/// TQ1_0 34, TQ2_0 35, MXFP4 39.
const OTHER_GEOMETRY: &[(u32, &str, u64, u64)] = &[
    (16, "IQ2_XXS", 256, 66),
    (17, "IQ2_XS", 256, 74),
    (18, "IQ3_XXS", 256, 98),
    (19, "IQ1_S", 256, 50),
    (21, "IQ3_S", 256, 110),
    (22, "IQ2_S", 256, 82),
    (29, "IQ1_M", 256, 56),
    (34, "TQ1_0", 256, 54),
    (35, "TQ2_0", 256, 66),
    (39, "MXFP4", 32, 17),
];

impl GgmlType {
    /// The type for a ggml id, or None for ids ggml does not define.
    pub fn from_id(id: u32) -> Option<GgmlType> {
        if let Some(row) = TABLE.iter().find(|r| r.1 == id) {
            return Some(row.0);
        }
        OTHER_GEOMETRY
            .iter()
            .find(|r| r.0 == id)
            .map(|_| GgmlType::Other(id))
    }

    pub fn id(self) -> u32 {
        match self {
            GgmlType::Other(id) => id,
            t => TABLE
                .iter()
                .find(|r| r.0 == t)
                .map(|r| r.1)
                .expect("every named type is in TABLE"),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            GgmlType::Other(id) => OTHER_GEOMETRY
                .iter()
                .find(|r| r.0 == id)
                .map(|r| r.1)
                .unwrap_or("?"),
            t => TABLE.iter().find(|r| r.0 == t).map(|r| r.2).unwrap_or("?"),
        }
    }

    /// Elements per block (1 for plain scalar types).
    pub fn block_size(self) -> u64 {
        self.geometry().0
    }

    /// Bytes per block.
    pub fn type_size(self) -> u64 {
        self.geometry().1
    }

    fn geometry(self) -> (u64, u64) {
        match self {
            GgmlType::Other(id) => OTHER_GEOMETRY
                .iter()
                .find(|r| r.0 == id)
                .map(|r| (r.2, r.3))
                .expect("Other ids come from OTHER_GEOMETRY"),
            t => TABLE
                .iter()
                .find(|r| r.0 == t)
                .map(|r| (r.3, r.4))
                .expect("in TABLE"),
        }
    }

    /// Bytes of one row of `ne0` elements, or None when `ne0` is not a whole
    /// number of blocks.
    pub fn row_bytes(self, ne0: u64) -> Option<u64> {
        let bs = self.block_size();
        if ne0 % bs != 0 {
            return None;
        }
        (ne0 / bs).checked_mul(self.type_size())
    }

    /// Whether `dequantize` handles this type.
    pub fn can_dequantize(self) -> bool {
        matches!(
            self,
            GgmlType::F32
                | GgmlType::F16
                | GgmlType::BF16
                | GgmlType::Q4_0
                | GgmlType::Q4_1
                | GgmlType::Q5_0
                | GgmlType::Q5_1
                | GgmlType::Q8_0
                | GgmlType::Q2_K
                | GgmlType::Q3_K
                | GgmlType::Q4_K
                | GgmlType::Q5_K
                | GgmlType::Q6_K
                | GgmlType::IQ4_NL
                | GgmlType::IQ4_XS
        )
    }
}

impl std::fmt::Display for GgmlType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

// ------------------------------------------------------------ conversions

/// IEEE binary16 bits to f32 (exact; subnormals, inf and NaN preserved).
pub fn f16_to_f32(bits: u16) -> f32 {
    half::f16::from_bits(bits).to_f32()
}

/// f32 to IEEE binary16 bits, round to nearest even (as ggml and numpy).
pub fn f32_to_f16(x: f32) -> u16 {
    half::f16::from_f32(x).to_bits()
}

/// bfloat16 bits to f32: the upper half of an f32.
pub fn bf16_to_f32(bits: u16) -> f32 {
    f32::from_bits((bits as u32) << 16)
}

/// f32 to bfloat16 bits exactly as ggml's `ggml_compute_fp32_to_bf16`:
/// NaNs are forced quiet (not rounded, which could turn them into inf),
/// everything else is rounded to nearest even.
pub fn f32_to_bf16(x: f32) -> u16 {
    let u = x.to_bits();
    if (u & 0x7FFF_FFFF) > 0x7F80_0000 {
        return ((u >> 16) | 64) as u16;
    }
    // No overflow: the largest non-NaN pattern is 0xFF80_0000.
    ((u + (0x7FFF + ((u >> 16) & 1))) >> 16) as u16
}

// ---------------------------------------------------- (de)quantization

/// Runs `f` over whole blocks. Both slices have been length-checked by the
/// caller, so the array conversions cannot fail.
fn each_block<const BS: usize, const TS: usize>(
    data: &[u8],
    out: &mut [f32],
    f: impl Fn(&[u8; TS], &mut [f32; BS]),
) {
    for (b, y) in data.chunks_exact(TS).zip(out.chunks_exact_mut(BS)) {
        f(
            b.try_into().expect("chunks_exact"),
            y.try_into().expect("chunks_exact"),
        );
    }
}

fn each_block_q<const BS: usize, const TS: usize>(
    src: &[f32],
    out: &mut [u8],
    f: impl Fn(&[f32; BS], &mut [u8; TS]),
) {
    for (x, b) in src.chunks_exact(BS).zip(out.chunks_exact_mut(TS)) {
        f(
            x.try_into().expect("chunks_exact"),
            b.try_into().expect("chunks_exact"),
        );
    }
}

/// Number of blocks covering `n` elements of `ty`, or an error when `n` is
/// not a whole number of blocks.
fn whole_blocks(ty: GgmlType, n: usize) -> Result<usize> {
    let bs = ty.block_size() as usize;
    if n % bs != 0 {
        return Err(Error::InvalidArgument(format!(
            "{n} elements is not a whole number of {ty} blocks of {bs}"
        )));
    }
    Ok(n / bs)
}

/// Checks that `n_bytes` bytes are exactly `n` elements of a decodable `ty`.
fn check_dequant(ty: GgmlType, n: usize, n_bytes: usize) -> Result<()> {
    if !ty.can_dequantize() {
        return Err(Error::Unsupported(format!(
            "no CPU decoder for tensor type {ty}"
        )));
    }
    let nb = whole_blocks(ty, n)?;
    if nb.checked_mul(ty.type_size() as usize) != Some(n_bytes) {
        return Err(Error::InvalidArgument(format!(
            "{ty}: {n} elements need {} bytes, got {n_bytes}",
            nb as u128 * ty.type_size() as u128
        )));
    }
    Ok(())
}

/// Dequantize `data` (exactly out.len()/block_size whole blocks of `ty`) into `out`.
/// Errors (crate::Error::Unsupported / InvalidArgument) for types without a decoder or wrong lengths; never panics.
pub fn dequantize(ty: GgmlType, data: &[u8], out: &mut [f32]) -> Result<()> {
    check_dequant(ty, out.len(), data.len())?;
    use kquants as k;
    use legacy as l;
    match ty {
        GgmlType::F32 => each_block::<1, 4>(data, out, |b, y| y[0] = f32::from_le_bytes(*b)),
        GgmlType::F16 => {
            each_block::<1, 2>(data, out, |b, y| y[0] = f16_to_f32(u16::from_le_bytes(*b)))
        }
        GgmlType::BF16 => {
            each_block::<1, 2>(data, out, |b, y| y[0] = bf16_to_f32(u16::from_le_bytes(*b)))
        }
        GgmlType::Q4_0 => each_block::<{ l::QK }, { l::Q4_0_BYTES }>(data, out, l::dequant_q4_0),
        GgmlType::Q4_1 => each_block::<{ l::QK }, { l::Q4_1_BYTES }>(data, out, l::dequant_q4_1),
        GgmlType::Q5_0 => each_block::<{ l::QK }, { l::Q5_0_BYTES }>(data, out, l::dequant_q5_0),
        GgmlType::Q5_1 => each_block::<{ l::QK }, { l::Q5_1_BYTES }>(data, out, l::dequant_q5_1),
        GgmlType::Q8_0 => each_block::<{ l::QK }, { l::Q8_0_BYTES }>(data, out, l::dequant_q8_0),
        GgmlType::IQ4_NL => {
            each_block::<{ l::QK }, { l::IQ4_NL_BYTES }>(data, out, l::dequant_iq4_nl)
        }
        GgmlType::Q2_K => each_block::<{ k::QK_K }, { k::Q2_K_BYTES }>(data, out, k::dequant_q2_k),
        GgmlType::Q3_K => each_block::<{ k::QK_K }, { k::Q3_K_BYTES }>(data, out, k::dequant_q3_k),
        GgmlType::Q4_K => each_block::<{ k::QK_K }, { k::Q4_K_BYTES }>(data, out, k::dequant_q4_k),
        GgmlType::Q5_K => each_block::<{ k::QK_K }, { k::Q5_K_BYTES }>(data, out, k::dequant_q5_k),
        GgmlType::Q6_K => each_block::<{ k::QK_K }, { k::Q6_K_BYTES }>(data, out, k::dequant_q6_k),
        GgmlType::IQ4_XS => {
            each_block::<{ k::QK_K }, { k::IQ4_XS_BYTES }>(data, out, k::dequant_iq4_xs)
        }
        // can_dequantize() lists exactly the arms above.
        _ => {
            return Err(Error::Unsupported(format!(
                "no CPU decoder for tensor type {ty}"
            )))
        }
    }
    Ok(())
}

/// Convenience: allocate and dequantize `n` elements.
pub fn dequantize_vec(ty: GgmlType, data: &[u8], n: usize) -> Result<Vec<f32>> {
    // Validate before allocating so a bogus `n` cannot trigger a huge allocation.
    check_dequant(ty, n, data.len())?;
    let mut out = vec![0.0f32; n];
    dequantize(ty, data, &mut out)?;
    Ok(out)
}

/// Whether `quantize_into` can encode this type.
pub fn can_quantize(ty: GgmlType) -> bool {
    matches!(
        ty,
        GgmlType::F32
            | GgmlType::F16
            | GgmlType::BF16
            | GgmlType::Q4_0
            | GgmlType::Q4_1
            | GgmlType::Q5_0
            | GgmlType::Q5_1
            | GgmlType::Q8_0
            | GgmlType::Q4_K
            | GgmlType::Q5_K
            | GgmlType::Q6_K
            | GgmlType::Q2_K
            | GgmlType::Q3_K
            | GgmlType::IQ4_NL
            | GgmlType::IQ4_XS
    )
}

/// Quantize src (len a multiple of the block size) into blocks of `ty`, appending to `out`.
///
/// The legacy types (and F16/BF16) reproduce ggml's `quantize_row_*_ref` and
/// gguf-py's `quants.quantize` byte for byte. Q4_K/Q5_K/Q6_K follow ggml's
/// reference (no importance matrix) quantizers. Q2_K, Q3_K, IQ4_NL and
/// IQ4_XS are plain round-to-nearest (`rtn.rs`): valid blocks, not
/// llama-quantize's bytes.
pub fn quantize_into(ty: GgmlType, src: &[f32], out: &mut Vec<u8>) -> Result<()> {
    if !can_quantize(ty) {
        return Err(Error::Unsupported(format!(
            "no quantizer for tensor type {ty}"
        )));
    }
    let nb = whole_blocks(ty, src.len())?;
    let start = out.len();
    out.resize(start + nb * ty.type_size() as usize, 0);
    let dst = &mut out[start..];
    use kquants as k;
    use legacy as l;
    match ty {
        GgmlType::F32 => each_block_q::<1, 4>(src, dst, |x, b| *b = x[0].to_le_bytes()),
        GgmlType::F16 => each_block_q::<1, 2>(src, dst, |x, b| *b = f32_to_f16(x[0]).to_le_bytes()),
        GgmlType::BF16 => {
            each_block_q::<1, 2>(src, dst, |x, b| *b = f32_to_bf16(x[0]).to_le_bytes())
        }
        GgmlType::Q4_0 => each_block_q::<{ l::QK }, { l::Q4_0_BYTES }>(src, dst, l::quant_q4_0),
        GgmlType::Q4_1 => each_block_q::<{ l::QK }, { l::Q4_1_BYTES }>(src, dst, l::quant_q4_1),
        GgmlType::Q5_0 => each_block_q::<{ l::QK }, { l::Q5_0_BYTES }>(src, dst, l::quant_q5_0),
        GgmlType::Q5_1 => each_block_q::<{ l::QK }, { l::Q5_1_BYTES }>(src, dst, l::quant_q5_1),
        GgmlType::Q8_0 => each_block_q::<{ l::QK }, { l::Q8_0_BYTES }>(src, dst, l::quant_q8_0),
        GgmlType::Q4_K => each_block_q::<{ k::QK_K }, { k::Q4_K_BYTES }>(src, dst, k::quant_q4_k),
        GgmlType::Q5_K => each_block_q::<{ k::QK_K }, { k::Q5_K_BYTES }>(src, dst, k::quant_q5_k),
        GgmlType::Q6_K => each_block_q::<{ k::QK_K }, { k::Q6_K_BYTES }>(src, dst, k::quant_q6_k),
        GgmlType::Q2_K => each_block_q::<{ k::QK_K }, { k::Q2_K_BYTES }>(src, dst, rtn::quant_q2_k),
        GgmlType::Q3_K => each_block_q::<{ k::QK_K }, { k::Q3_K_BYTES }>(src, dst, rtn::quant_q3_k),
        GgmlType::IQ4_NL => {
            each_block_q::<{ l::QK }, { l::IQ4_NL_BYTES }>(src, dst, rtn::quant_iq4_nl)
        }
        GgmlType::IQ4_XS => {
            each_block_q::<{ k::QK_K }, { k::IQ4_XS_BYTES }>(src, dst, rtn::quant_iq4_xs)
        }
        // can_quantize() lists exactly the arms above.
        _ => {
            out.truncate(start);
            return Err(Error::Unsupported(format!("no quantizer for {ty}")));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The per-module byte sizes must agree with the type table.
    #[test]
    fn block_sizes_match_table() {
        use kquants as k;
        use legacy as l;
        let cases = [
            (GgmlType::Q4_0, l::QK, l::Q4_0_BYTES),
            (GgmlType::Q4_1, l::QK, l::Q4_1_BYTES),
            (GgmlType::Q5_0, l::QK, l::Q5_0_BYTES),
            (GgmlType::Q5_1, l::QK, l::Q5_1_BYTES),
            (GgmlType::Q8_0, l::QK, l::Q8_0_BYTES),
            (GgmlType::IQ4_NL, l::QK, l::IQ4_NL_BYTES),
            (GgmlType::Q2_K, k::QK_K, k::Q2_K_BYTES),
            (GgmlType::Q3_K, k::QK_K, k::Q3_K_BYTES),
            (GgmlType::Q4_K, k::QK_K, k::Q4_K_BYTES),
            (GgmlType::Q5_K, k::QK_K, k::Q5_K_BYTES),
            (GgmlType::Q6_K, k::QK_K, k::Q6_K_BYTES),
            (GgmlType::IQ4_XS, k::QK_K, k::IQ4_XS_BYTES),
        ];
        for (t, bs, ts) in cases {
            assert_eq!(
                (t.block_size() as usize, t.type_size() as usize),
                (bs, ts),
                "{t}"
            );
        }
    }

    #[test]
    fn bf16_rounding_matches_ggml() {
        assert_eq!(f32_to_bf16(1.0), 0x3F80);
        // Exactly halfway between two bf16 values: ties to even.
        assert_eq!(f32_to_bf16(f32::from_bits(0x3F80_8000)), 0x3F80);
        assert_eq!(f32_to_bf16(f32::from_bits(0x3F81_8000)), 0x3F82);
        assert_eq!(f32_to_bf16(f32::from_bits(0x7FA0_0001)), 0x7FE0); // signalling NaN made quiet
        assert_eq!(f32_to_bf16(f32::MAX), 0x7F80); // rounds up to inf
    }
}
