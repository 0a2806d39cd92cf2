//! The 32-element block formats (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, IQ4_NL):
//! decoders that mirror ggml's `dequantize_row_*` and encoders that mirror
//! `quantize_row_*_ref` operation for operation.
//!
//! Bit-exactness rests on doing the same f32 operations in the same order as
//! ggml-quants.c. Rust never fuses `a*b + c` into an FMA; neither does gguf-py
//! (numpy), and tests/gguf_py_crosscheck.rs checks both directions against it
//! bit for bit. A ggml built with FP contraction on an FMA target may fuse
//! `q*d + m` (Q4_1/Q5_1 and the K-quant decoders: 1 ulp apart at most) and
//! `x*id + 8.5` in the Q4_0/Q5_0 encoders (a level off by one when x*id lands
//! within an ulp of a rounding boundary).

use super::{f16_to_f32, f32_to_f16};

pub(super) const QK: usize = 32;
pub(super) const Q4_0_BYTES: usize = 18;
pub(super) const Q4_1_BYTES: usize = 20;
pub(super) const Q5_0_BYTES: usize = 22;
pub(super) const Q5_1_BYTES: usize = 24;
pub(super) const Q8_0_BYTES: usize = 34;
pub(super) const IQ4_NL_BYTES: usize = 18;

/// The IQ4_NL / IQ4_XS non-linear codebook (`kvalues_iq4nl` in ggml-common.h).
pub(super) const KVALUES_IQ4NL: [i8; 16] = [
    -127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113,
];

#[inline(always)]
pub(super) fn rd_f16(b: &[u8], at: usize) -> f32 {
    f16_to_f32(u16::from_le_bytes([b[at], b[at + 1]]))
}

#[inline(always)]
fn wr_f16(b: &mut [u8], at: usize, x: f32) {
    b[at..at + 2].copy_from_slice(&f32_to_f16(x).to_le_bytes());
}

// ---------------------------------------------------------------- decoders

pub(super) fn dequant_q4_0(b: &[u8; Q4_0_BYTES], y: &mut [f32; QK]) {
    let d = rd_f16(b, 0);
    let qs = &b[2..18];
    for j in 0..16 {
        // Low nibbles are elements 0..15, high nibbles 16..31 (not interleaved).
        y[j] = ((qs[j] & 0x0F) as i32 - 8) as f32 * d;
        y[j + 16] = ((qs[j] >> 4) as i32 - 8) as f32 * d;
    }
}

pub(super) fn dequant_q4_1(b: &[u8; Q4_1_BYTES], y: &mut [f32; QK]) {
    let d = rd_f16(b, 0);
    let m = rd_f16(b, 2);
    let qs = &b[4..20];
    for j in 0..16 {
        y[j] = (qs[j] & 0x0F) as f32 * d + m;
        y[j + 16] = (qs[j] >> 4) as f32 * d + m;
    }
}

pub(super) fn dequant_q5_0(b: &[u8; Q5_0_BYTES], y: &mut [f32; QK]) {
    let d = rd_f16(b, 0);
    let qh = u32::from_le_bytes([b[2], b[3], b[4], b[5]]);
    let qs = &b[6..22];
    for j in 0..16 {
        // Bit j of qh is the 5th bit of element j, bit j+16 that of element j+16.
        let h0 = ((qh >> j) << 4) as u8 & 0x10;
        let h1 = (qh >> (j + 12)) as u8 & 0x10;
        y[j] = (((qs[j] & 0x0F) | h0) as i32 - 16) as f32 * d;
        y[j + 16] = (((qs[j] >> 4) | h1) as i32 - 16) as f32 * d;
    }
}

pub(super) fn dequant_q5_1(b: &[u8; Q5_1_BYTES], y: &mut [f32; QK]) {
    let d = rd_f16(b, 0);
    let m = rd_f16(b, 2);
    let qh = u32::from_le_bytes([b[4], b[5], b[6], b[7]]);
    let qs = &b[8..24];
    for j in 0..16 {
        let h0 = ((qh >> j) << 4) as u8 & 0x10;
        let h1 = (qh >> (j + 12)) as u8 & 0x10;
        y[j] = ((qs[j] & 0x0F) | h0) as f32 * d + m;
        y[j + 16] = ((qs[j] >> 4) | h1) as f32 * d + m;
    }
}

pub(super) fn dequant_q8_0(b: &[u8; Q8_0_BYTES], y: &mut [f32; QK]) {
    let d = rd_f16(b, 0);
    for j in 0..QK {
        y[j] = b[2 + j] as i8 as f32 * d;
    }
}

pub(super) fn dequant_iq4_nl(b: &[u8; IQ4_NL_BYTES], y: &mut [f32; QK]) {
    let d = rd_f16(b, 0);
    let qs = &b[2..18];
    for j in 0..16 {
        y[j] = d * KVALUES_IQ4NL[(qs[j] & 0x0F) as usize] as f32;
        y[j + 16] = d * KVALUES_IQ4NL[(qs[j] >> 4) as usize] as f32;
    }
}

// ---------------------------------------------------------------- encoders

/// The element with the largest magnitude, signed; the first one on ties
/// (ggml compares with a strict `<`, numpy's argmax also takes the first).
#[inline(always)]
fn signed_absmax(x: &[f32; QK]) -> f32 {
    let mut amax = 0.0f32;
    let mut max = 0.0f32;
    for &v in x {
        if amax < v.abs() {
            amax = v.abs();
            max = v;
        }
    }
    max
}

#[inline(always)]
fn min_max(x: &[f32; QK]) -> (f32, f32) {
    let mut min = f32::MAX;
    let mut max = -f32::MAX;
    for &v in x {
        if v < min {
            min = v;
        }
        if v > max {
            max = v;
        }
    }
    (min, max)
}

#[inline(always)]
fn inverse(d: f32) -> f32 {
    if d != 0.0 {
        1.0 / d
    } else {
        0.0
    }
}

pub(super) fn quant_q4_0(x: &[f32; QK], b: &mut [u8; Q4_0_BYTES]) {
    // The extreme element maps to -8, so the sign of d follows it and the
    // full range [-8, 7] is used on the side where the extreme lies.
    let d = signed_absmax(x) / -8.0;
    let id = inverse(d);
    wr_f16(b, 0, d);
    for j in 0..16 {
        // `as i8` truncates toward zero like C's (int8_t) conversion; the
        // +8.5 makes that a round-to-nearest of x*id + 8.
        let q0 = ((x[j] * id + 8.5) as i8).min(15) as u8;
        let q1 = ((x[j + 16] * id + 8.5) as i8).min(15) as u8;
        b[2 + j] = q0 | (q1 << 4);
    }
}

pub(super) fn quant_q4_1(x: &[f32; QK], b: &mut [u8; Q4_1_BYTES]) {
    let (min, max) = min_max(x);
    let d = (max - min) / 15.0;
    let id = inverse(d);
    wr_f16(b, 0, d);
    wr_f16(b, 2, min);
    for j in 0..16 {
        let q0 = (((x[j] - min) * id + 0.5) as i8).min(15) as u8;
        let q1 = (((x[j + 16] - min) * id + 0.5) as i8).min(15) as u8;
        b[4 + j] = q0 | (q1 << 4);
    }
}

pub(super) fn quant_q5_0(x: &[f32; QK], b: &mut [u8; Q5_0_BYTES]) {
    let d = signed_absmax(x) / -16.0;
    let id = inverse(d);
    wr_f16(b, 0, d);
    let mut qh = 0u32;
    for j in 0..16 {
        let q0 = ((x[j] * id + 16.5) as i8).min(31) as u8;
        let q1 = ((x[j + 16] * id + 16.5) as i8).min(31) as u8;
        b[6 + j] = (q0 & 0x0F) | ((q1 & 0x0F) << 4);
        qh |= ((q0 as u32 & 0x10) >> 4) << j;
        qh |= ((q1 as u32 & 0x10) >> 4) << (j + 16);
    }
    b[2..6].copy_from_slice(&qh.to_le_bytes());
}

pub(super) fn quant_q5_1(x: &[f32; QK], b: &mut [u8; Q5_1_BYTES]) {
    let (min, max) = min_max(x);
    let d = (max - min) / 31.0;
    let id = inverse(d);
    wr_f16(b, 0, d);
    wr_f16(b, 2, min);
    let mut qh = 0u32;
    for j in 0..16 {
        // ggml converts straight to uint8_t here; the min(31) only guards
        // against x*id rounding a hair above 31.5 (gguf-py clips too).
        let q0 = (((x[j] - min) * id + 0.5) as u8).min(31);
        let q1 = (((x[j + 16] - min) * id + 0.5) as u8).min(31);
        b[8 + j] = (q0 & 0x0F) | ((q1 & 0x0F) << 4);
        qh |= ((q0 as u32 & 0x10) >> 4) << j;
        qh |= ((q1 as u32 & 0x10) >> 4) << (j + 16);
    }
    b[4..8].copy_from_slice(&qh.to_le_bytes());
}

pub(super) fn quant_q8_0(x: &[f32; QK], b: &mut [u8; Q8_0_BYTES]) {
    let mut amax = 0.0f32;
    for &v in x {
        amax = amax.max(v.abs());
    }
    let d = amax / 127.0;
    let id = inverse(d);
    wr_f16(b, 0, d);
    for j in 0..QK {
        // f32::round is C's roundf (half away from zero), as ggml uses.
        b[2 + j] = (x[j] * id).round() as i8 as u8;
    }
}
