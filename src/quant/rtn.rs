//! Round-to-nearest encoders for Q2_K, Q3_K, IQ4_NL and IQ4_XS: ggml's
//! layouts (ggml-common.h), but not its scale searches (llama-quantize's
//! `make_qkx2_quants` / `make_q3_quants` / `quantize_row_iq4_nl_impl`).
//! Good enough to write test and synthetic tensors in these formats; the
//! decoders in kquants.rs / legacy.rs are what every GPU kernel is judged
//! against, so the encoder only has to produce valid blocks.

use super::f32_to_f16;
use super::kquants::{IQ4_XS_BYTES, Q2_K_BYTES, Q3_K_BYTES, QK_K};
use super::legacy::{rd_f16, IQ4_NL_BYTES, KVALUES_IQ4NL, QK};

/// Stores `x` as f16 at `at` and returns the value stored.
fn put_f16(b: &mut [u8], at: usize, x: f32) -> f32 {
    b[at..at + 2].copy_from_slice(&f32_to_f16(x).to_le_bytes());
    rd_f16(b, at)
}

/// round(x / d) clamped to lo..=hi (0 where d is 0).
fn level(x: f32, d: f32, lo: i32, hi: i32) -> i32 {
    if d == 0.0 {
        return 0;
    }
    ((x / d).round() as i32).clamp(lo, hi)
}

/// Q2_K: per 16 weights a 4-bit scale and 4-bit min, w = d·sc·q − dmin·m.
pub(super) fn quant_q2_k(x: &[f32; QK_K], b: &mut [u8; Q2_K_BYTES]) {
    let mut scale = [0f32; 16];
    let mut min = [0f32; 16];
    for (i, s) in x.chunks_exact(16).enumerate() {
        let lo = s.iter().fold(0f32, |a, &v| a.min(v));
        let hi = s.iter().fold(lo, |a, &v| a.max(v));
        min[i] = -lo;
        scale[i] = (hi - lo) / 3.0;
    }
    let d = put_f16(b, 80, scale.iter().fold(0f32, |a, &v| a.max(v)) / 15.0);
    let dmin = put_f16(b, 82, min.iter().fold(0f32, |a, &v| a.max(v)) / 15.0);
    b[16..80].fill(0);
    for i in 0..16 {
        let sc = level(scale[i], d, 0, 15);
        let m = level(min[i], dmin, 0, 15);
        b[i] = (sc | (m << 4)) as u8;
        let (dl, ml) = (d * sc as f32, dmin * m as f32);
        for l in 0..16 {
            // Element 16i + l: unit j = i / 2, weight 16·(i % 2) + l.
            let (j, w) = (i / 2, 16 * (i % 2) + l);
            let q = level(x[16 * i + l] + ml, dl, 0, 3) as u8;
            b[16 + 32 * (j / 4) + w] |= q << (2 * (j % 4));
        }
    }
}

/// Q3_K: per 16 weights a signed 6-bit scale, w = d·sc·q, q in −4..=3.
pub(super) fn quant_q3_k(x: &[f32; QK_K], b: &mut [u8; Q3_K_BYTES]) {
    let scale: Vec<f32> = x
        .chunks_exact(16)
        .map(|s| s.iter().fold(0f32, |a, &v| a.max(v.abs())) / 4.0)
        .collect();
    let d = put_f16(b, 108, scale.iter().fold(0f32, |a, &v| a.max(v)) / 31.0);
    b[..108].fill(0);
    for (i, &s) in scale.iter().enumerate() {
        let sc = level(s, d, -32, 31);
        let v = (sc + 32) as u8;
        if i < 8 {
            b[96 + i] |= v & 0xF;
        } else {
            b[96 + i - 8] |= (v & 0xF) << 4;
        }
        b[104 + i % 4] |= (v >> 4) << (2 * (i / 4));
        for l in 0..16 {
            let (j, w) = (i / 2, 16 * (i % 2) + l);
            let q = (level(x[16 * i + l], d * sc as f32, -4, 3) + 4) as u8;
            b[32 + 32 * (j / 4) + w] |= (q & 3) << (2 * (j % 4));
            b[w] |= (q >> 2) << j;
        }
    }
}

/// The codebook index whose value·d is nearest to v.
fn nearest_iq4(v: f32, d: f32) -> u8 {
    let mut best = 0;
    for (i, &k) in KVALUES_IQ4NL.iter().enumerate() {
        if (d * k as f32 - v).abs() < (d * KVALUES_IQ4NL[best] as f32 - v).abs() {
            best = i;
        }
    }
    best as u8
}

/// The scale that maps a block's largest-magnitude weight to −127.
fn iq4_scale(x: &[f32]) -> f32 {
    let m = x
        .iter()
        .fold(0f32, |a, &v| if v.abs() > a.abs() { v } else { a });
    m / -127.0
}

/// 32 weights as 16 bytes of codebook indices (weight j low nibble of
/// byte j, weight 16 + j its high nibble).
fn iq4_nibbles(x: &[f32], d: f32, qs: &mut [u8]) {
    for j in 0..16 {
        qs[j] = nearest_iq4(x[j], d) | (nearest_iq4(x[j + 16], d) << 4);
    }
}

/// IQ4_NL: f16 scale and 32 codebook indices, w = d·kvalues[q].
pub(super) fn quant_iq4_nl(x: &[f32; QK], b: &mut [u8; IQ4_NL_BYTES]) {
    let d = put_f16(b, 0, iq4_scale(x));
    iq4_nibbles(x, d, &mut b[2..]);
}

/// IQ4_XS: per 32 weights a 6-bit scale ls, w = d·(ls − 32)·kvalues[q].
pub(super) fn quant_iq4_xs(x: &[f32; QK_K], b: &mut [u8; IQ4_XS_BYTES]) {
    let scale: Vec<f32> = x.chunks_exact(32).map(iq4_scale).collect();
    let amax = scale.iter().fold(0f32, |a, &v| a.max(v.abs()));
    let d = put_f16(b, 0, amax / 31.0);
    let mut scales_h = 0u16;
    b[4..8].fill(0);
    for (ib, &s) in scale.iter().enumerate() {
        let ls = (level(s, d, -32, 31) + 32) as u8;
        b[4 + ib / 2] |= (ls & 0xF) << (4 * (ib % 2));
        scales_h |= ((ls >> 4) as u16) << (2 * ib);
        let dl = d * (ls as i32 - 32) as f32;
        iq4_nibbles(
            &x[32 * ib..32 * ib + 32],
            dl,
            &mut b[8 + 16 * ib..24 + 16 * ib],
        );
    }
    b[2..4].copy_from_slice(&scales_h.to_le_bytes());
}
