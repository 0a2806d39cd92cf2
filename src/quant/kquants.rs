//! The 256-element super-block formats: decoders for Q2_K, Q3_K, Q4_K, Q5_K,
//! Q6_K and IQ4_XS mirroring ggml's `dequantize_row_*`, and encoders for
//! Q4_K, Q5_K and Q6_K that follow ggml's `quantize_row_*_ref` (the search
//! used by llama-quantize without an importance matrix), so synthetic weights
//! look like real ones statistically.
//!
//! Layouts: model-spec.md §2.8. Same f32-operation-order rule as legacy.rs.

use super::f32_to_f16;
use super::legacy::{rd_f16, KVALUES_IQ4NL};

pub(super) const QK_K: usize = 256;
pub(super) const Q2_K_BYTES: usize = 84;
pub(super) const Q3_K_BYTES: usize = 110;
pub(super) const Q4_K_BYTES: usize = 144;
pub(super) const Q5_K_BYTES: usize = 176;
pub(super) const Q6_K_BYTES: usize = 210;
pub(super) const IQ4_XS_BYTES: usize = 136;

/// Sub-blocks whose largest magnitude is below this are stored as zero
/// (ggml's GROUP_MAX_EPS).
const GROUP_MAX_EPS: f32 = 1e-15;

// ---------------------------------------------------------------- decoders

pub(super) fn dequant_q2_k(b: &[u8; Q2_K_BYTES], y: &mut [f32; QK_K]) {
    let (scales, qs) = (&b[0..16], &b[16..80]);
    let d = rd_f16(b, 80);
    let min = rd_f16(b, 82);
    let mut is = 0;
    let mut o = 0;
    for n in 0..2 {
        let q = &qs[32 * n..32 * n + 32];
        for shift in [0, 2, 4, 6] {
            // Two 16-element sub-blocks per shift: q[0..16] then q[16..32].
            for half in 0..2 {
                let sc = scales[is];
                is += 1;
                let dl = d * (sc & 0x0F) as f32;
                let ml = min * (sc >> 4) as f32;
                for l in 0..16 {
                    y[o] = dl * ((q[16 * half + l] >> shift) & 3) as f32 - ml;
                    o += 1;
                }
            }
        }
    }
}

/// The sixteen 6-bit Q3_K scales, minus their bias of 32.
#[inline(always)]
fn q3_k_scales(sb: &[u8]) -> [i32; 16] {
    let mut out = [0i32; 16];
    for (i, s) in out.iter_mut().enumerate() {
        let low = if i < 8 { sb[i] & 0x0F } else { sb[i - 8] >> 4 };
        let high = (sb[8 + i % 4] >> (2 * (i / 4))) & 3;
        *s = (low | (high << 4)) as i32 - 32;
    }
    out
}

pub(super) fn dequant_q3_k(b: &[u8; Q3_K_BYTES], y: &mut [f32; QK_K]) {
    let (hm, qs) = (&b[0..32], &b[32..96]);
    let scales = q3_k_scales(&b[96..108]);
    let d_all = rd_f16(b, 108);
    // hmask bit k (k = 0..7) belongs to the k-th group of 32 outputs; the
    // same 32 bytes are reused by both 128-element halves.
    let mut m = 1u8;
    let mut is = 0;
    let mut o = 0;
    for n in 0..2 {
        let q = &qs[32 * n..32 * n + 32];
        for shift in [0, 2, 4, 6] {
            for half in 0..2 {
                let dl = d_all * scales[is] as f32;
                is += 1;
                for l in 0..16 {
                    let i = 16 * half + l;
                    let v = ((q[i] >> shift) & 3) as i32 - if hm[i] & m != 0 { 0 } else { 4 };
                    y[o] = dl * v as f32;
                    o += 1;
                }
            }
            m <<= 1;
        }
    }
}

/// ggml's `get_scale_min_k4`: the 6-bit scale and min of sub-block `j`.
#[inline(always)]
pub(super) fn scale_min_k4(j: usize, s: &[u8]) -> (u8, u8) {
    if j < 4 {
        (s[j] & 63, s[j + 4] & 63)
    } else {
        (
            (s[j + 4] & 0x0F) | ((s[j - 4] >> 6) << 4),
            (s[j + 4] >> 4) | ((s[j] >> 6) << 4),
        )
    }
}

pub(super) fn dequant_q4_k(b: &[u8; Q4_K_BYTES], y: &mut [f32; QK_K]) {
    let d = rd_f16(b, 0);
    let min = rd_f16(b, 2);
    let (sc, qs) = (&b[4..16], &b[16..144]);
    for p in 0..4 {
        let (s1, m1) = scale_min_k4(2 * p, sc);
        let (s2, m2) = scale_min_k4(2 * p + 1, sc);
        // ggml forms d*sc and min*m as f32 first, then one multiply-subtract.
        let (d1, m1) = (d * s1 as f32, min * m1 as f32);
        let (d2, m2) = (d * s2 as f32, min * m2 as f32);
        let q = &qs[32 * p..32 * p + 32];
        for l in 0..32 {
            y[64 * p + l] = d1 * (q[l] & 0x0F) as f32 - m1;
            y[64 * p + 32 + l] = d2 * (q[l] >> 4) as f32 - m2;
        }
    }
}

pub(super) fn dequant_q5_k(b: &[u8; Q5_K_BYTES], y: &mut [f32; QK_K]) {
    let d = rd_f16(b, 0);
    let min = rd_f16(b, 2);
    let (sc, qh, qs) = (&b[4..16], &b[16..48], &b[48..176]);
    for p in 0..4 {
        let (s1, m1) = scale_min_k4(2 * p, sc);
        let (s2, m2) = scale_min_k4(2 * p + 1, sc);
        let (d1, m1) = (d * s1 as f32, min * m1 as f32);
        let (d2, m2) = (d * s2 as f32, min * m2 as f32);
        let q = &qs[32 * p..32 * p + 32];
        let (u1, u2) = (1u8 << (2 * p), 2u8 << (2 * p));
        for l in 0..32 {
            let h1 = if qh[l] & u1 != 0 { 16 } else { 0 };
            let h2 = if qh[l] & u2 != 0 { 16 } else { 0 };
            y[64 * p + l] = d1 * ((q[l] & 0x0F) + h1) as f32 - m1;
            y[64 * p + 32 + l] = d2 * ((q[l] >> 4) + h2) as f32 - m2;
        }
    }
}

pub(super) fn dequant_q6_k(b: &[u8; Q6_K_BYTES], y: &mut [f32; QK_K]) {
    let d = rd_f16(b, 208);
    for h in 0..2 {
        let ql = &b[64 * h..64 * h + 64];
        let qh = &b[128 + 32 * h..128 + 32 * h + 32];
        let sc = &b[192 + 8 * h..192 + 8 * h + 8];
        let o = 128 * h;
        for l in 0..32 {
            let is = l / 16;
            let q1 = ((ql[l] & 0x0F) | ((qh[l] & 3) << 4)) as i32 - 32;
            let q2 = ((ql[l + 32] & 0x0F) | (((qh[l] >> 2) & 3) << 4)) as i32 - 32;
            let q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) as i32 - 32;
            let q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) as i32 - 32;
            // (d * scale) * q, left to right as in C.
            y[o + l] = d * sc[is] as i8 as f32 * q1 as f32;
            y[o + l + 32] = d * sc[is + 2] as i8 as f32 * q2 as f32;
            y[o + l + 64] = d * sc[is + 4] as i8 as f32 * q3 as f32;
            y[o + l + 96] = d * sc[is + 6] as i8 as f32 * q4 as f32;
        }
    }
}

pub(super) fn dequant_iq4_xs(b: &[u8; IQ4_XS_BYTES], y: &mut [f32; QK_K]) {
    let d = rd_f16(b, 0);
    let scales_h = u16::from_le_bytes([b[2], b[3]]);
    let (scales_l, qs) = (&b[4..8], &b[8..136]);
    for ib in 0..8 {
        let ls = ((scales_l[ib / 2] >> (4 * (ib % 2))) & 0x0F) as i32
            | ((((scales_h >> (2 * ib)) & 3) as i32) << 4);
        let dl = d * (ls - 32) as f32;
        let q = &qs[16 * ib..16 * ib + 16];
        for j in 0..16 {
            y[32 * ib + j] = dl * KVALUES_IQ4NL[(q[j] & 0x0F) as usize] as f32;
            y[32 * ib + j + 16] = dl * KVALUES_IQ4NL[(q[j] >> 4) as usize] as f32;
        }
    }
}

// ---------------------------------------------------------------- encoders
//
// ggml's scale searches sum f32 products serially, and each pass is short
// (16 or 32 elements), so a scalar port is bound by add latency (~20 µs per
// super-block). The sub-blocks of a super-block are independent, so the
// searches below run all of them side by side, one lane per sub-block
// (`xt[i][j]` = element i of sub-block j). Within a lane every operation is
// ggml's, in ggml's order, so the chosen scales and levels are the ones
// ggml's reference quantizer picks; only the lanes interleave.

/// ggml's `nearest_int`: adding 1.5 * 2^23 leaves round-half-to-even of
/// `fval` in the low mantissa bits. The clamp keeps ggml's asserted domain
/// (and makes NaN come out as 0) instead of asserting.
#[inline(always)]
fn nearest_int(fval: f32) -> i32 {
    let val = fval.clamp(-4_194_303.0, 4_194_303.0) + 12_582_912.0;
    (val.to_bits() & 0x007F_FFFF) as i32 - 0x0040_0000
}

/// `clamp(nearest_int(v), lo, hi)` as an f32, for integer `lo`/`hi`.
/// Clamping before rounding gives the same result (rounding is monotone and
/// fixes integers) and keeps everything in f32 so the lane loops vectorize.
/// The comparisons are written so that NaN maps to `lo` and they compile to
/// plain maxps/minps (f32::max/min need extra NaN fix-ups).
#[inline(always)]
fn round_clamped(v: f32, lo: f32, hi: f32) -> f32 {
    const MAGIC: f32 = 12_582_912.0;
    let v = if v > lo { v } else { lo };
    let v = if v < hi { v } else { hi };
    (v + MAGIC) - MAGIC
}

/// ggml's `make_qkx2_quants` (squared error, no MAD) on the eight 32-element
/// sub-blocks of a super-block at once: finds per sub-block `scale` and
/// `the_min` so that `x ≈ scale*L - the_min` with integer L in 0..=nmax.
/// Levels are returned in `lt` (as f32, transposed like `xt`).
struct Qkx2 {
    nmax: f32,
    rmin: f32,
    rdelta: f32,
    nstep: i32,
}

impl Qkx2 {
    fn run(
        &self,
        xt: &[[f32; 8]; 32],
        wt: &[[f32; 8]; 32],
        lt: &mut [[f32; 8]; 32],
    ) -> ([f32; 8], [f32; 8]) {
        let nmax = self.nmax;
        let mut min = xt[0];
        let mut max = xt[0];
        let mut sum_w = wt[0];
        let mut sum_x = [0.0f32; 8];
        for j in 0..8 {
            sum_x[j] = sum_w[j] * xt[0][j];
        }
        for i in 1..32 {
            for j in 0..8 {
                let x = xt[i][j];
                if x < min[j] {
                    min[j] = x;
                }
                if x > max[j] {
                    max[j] = x;
                }
                sum_w[j] += wt[i][j];
                sum_x[j] += wt[i][j] * x;
            }
        }
        let mut iscale = [0.0f32; 8];
        let mut scale = [0.0f32; 8];
        for j in 0..8 {
            if min[j] > 0.0 {
                min[j] = 0.0;
            }
            iscale[j] = nmax / (max[j] - min[j]);
            scale[j] = 1.0 / iscale[j];
        }
        // Lanes with max == min get ggml's early return at the end; until
        // then they compute harmless NaNs/infs that are never used.
        let flat: [bool; 8] = std::array::from_fn(|j| max[j] == min[j]);

        let mut best = [0.0f32; 8];
        for i in 0..32 {
            for j in 0..8 {
                let x = xt[i][j];
                let l = round_clamped(iscale[j] * (x - min[j]), 0.0, nmax);
                lt[i][j] = l;
                let diff = scale[j] * l + min[j] - x;
                best[j] += wt[i][j] * (diff * diff);
            }
        }
        let mut laux = [[0.0f32; 8]; 32];
        for is in 0..=self.nstep {
            let step = self.rmin + self.rdelta * is as f32 + nmax;
            for j in 0..8 {
                // ggml divides by (max - min) with the *current* min, which
                // an accepted step below may have changed.
                iscale[j] = step / (max[j] - min[j]);
            }
            let (mut sum_l, mut sum_l2, mut sum_xl) = ([0.0f32; 8], [0.0f32; 8], [0.0f32; 8]);
            for i in 0..32 {
                for j in 0..8 {
                    let x = xt[i][j];
                    let l = round_clamped(iscale[j] * (x - min[j]), 0.0, nmax);
                    laux[i][j] = l;
                    let w = wt[i][j];
                    sum_l[j] += w * l;
                    sum_l2[j] += w * l * l;
                    sum_xl[j] += w * l * x;
                }
            }
            let mut ok = [false; 8];
            let (mut this_scale, mut this_min) = ([0.0f32; 8], [0.0f32; 8]);
            for j in 0..8 {
                let det = sum_w[j] * sum_l2[j] - sum_l[j] * sum_l[j];
                ok[j] = det > 0.0;
                this_scale[j] = (sum_w[j] * sum_xl[j] - sum_x[j] * sum_l[j]) / det;
                this_min[j] = (sum_l2[j] * sum_x[j] - sum_l[j] * sum_xl[j]) / det;
                if this_min[j] > 0.0 {
                    this_min[j] = 0.0;
                    this_scale[j] = sum_xl[j] / sum_l2[j];
                }
            }
            let mut cur = [0.0f32; 8];
            for i in 0..32 {
                for j in 0..8 {
                    let diff = this_scale[j] * laux[i][j] + this_min[j] - xt[i][j];
                    cur[j] += wt[i][j] * (diff * diff);
                }
            }
            let take: [bool; 8] = std::array::from_fn(|j| ok[j] && cur[j] < best[j]);
            if take.contains(&true) {
                for j in 0..8 {
                    if take[j] {
                        best[j] = cur[j];
                        scale[j] = this_scale[j];
                        min[j] = this_min[j];
                    }
                }
                for i in 0..32 {
                    for j in 0..8 {
                        if take[j] {
                            lt[i][j] = laux[i][j];
                        }
                    }
                }
            }
        }
        for j in 0..8 {
            if flat[j] {
                scale[j] = 0.0;
                for row in lt.iter_mut() {
                    row[j] = 0.0;
                }
            }
        }
        (scale, min.map(|m| -m))
    }
}

/// The part Q4_K and Q5_K share: per-sub-block scale/min search, the 12
/// packed 6-bit scale/min bytes, the f16 super-scales, and the final levels
/// `l_out` (0..=nmax) recomputed against the quantized scales.
/// Returns (d, dmin) as f16 bits.
fn quant_scale_min_k(
    x: &[f32; QK_K],
    search: &Qkx2,
    l_out: &mut [u8; QK_K],
    packed: &mut [u8; 12],
) -> (u16, u16) {
    let mut xt = [[0.0f32; 8]; 32];
    for j in 0..8 {
        for i in 0..32 {
            xt[i][j] = x[32 * j + i];
        }
    }
    // ggml's weights: rms of the sub-block plus |x|.
    let mut sum_x2 = [0.0f32; 8];
    for row in &xt {
        for j in 0..8 {
            sum_x2[j] += row[j] * row[j];
        }
    }
    let av_x = sum_x2.map(|s| (s / 32.0).sqrt());
    let mut wt = [[0.0f32; 8]; 32];
    for i in 0..32 {
        for j in 0..8 {
            wt[i][j] = av_x[j] + xt[i][j].abs();
        }
    }
    let mut lt = [[0.0f32; 8]; 32];
    let (scales, mins) = search.run(&xt, &wt, &mut lt);
    for j in 0..8 {
        for i in 0..32 {
            l_out[32 * j + i] = lt[i][j] as u8;
        }
    }
    let mut max_scale = 0.0f32;
    let mut max_min = 0.0f32;
    for j in 0..8 {
        if scales[j] > max_scale {
            max_scale = scales[j];
        }
        if mins[j] > max_min {
            max_min = mins[j];
        }
    }
    let inv_scale = if max_scale > 0.0 {
        63.0 / max_scale
    } else {
        0.0
    };
    let inv_min = if max_min > 0.0 { 63.0 / max_min } else { 0.0 };
    packed.fill(0);
    for j in 0..8 {
        // ggml stores nearest_int into a uint8_t before the MIN, so a
        // (pathological) negative wraps to a large value and clamps to 63.
        let ls = (nearest_int(inv_scale * scales[j]) as u8).min(63);
        let lm = (nearest_int(inv_min * mins[j]) as u8).min(63);
        if j < 4 {
            packed[j] = ls;
            packed[j + 4] = lm;
        } else {
            packed[j + 4] = (ls & 0x0F) | ((lm & 0x0F) << 4);
            packed[j - 4] |= (ls >> 4) << 6;
            packed[j] |= (lm >> 4) << 6;
        }
    }
    let d16 = f32_to_f16(max_scale / 63.0);
    let dmin16 = f32_to_f16(max_min / 63.0);
    let (dq, dminq) = (super::f16_to_f32(d16), super::f16_to_f32(dmin16));
    for j in 0..8 {
        let (sc, m) = scale_min_k4(j, packed);
        let d = dq * sc as f32;
        if d == 0.0 {
            continue; // ggml keeps the search's levels here; so do we
        }
        let dm = dminq * m as f32;
        for ii in 0..32 {
            let l = round_clamped((x[32 * j + ii] + dm) / d, 0.0, search.nmax);
            l_out[32 * j + ii] = l as u8;
        }
    }
    (d16, dmin16)
}

pub(super) fn quant_q4_k(x: &[f32; QK_K], b: &mut [u8; Q4_K_BYTES]) {
    const SEARCH: Qkx2 = Qkx2 {
        nmax: 15.0,
        rmin: -1.0,
        rdelta: 0.1,
        nstep: 20,
    };
    let mut l = [0u8; QK_K];
    let mut packed = [0u8; 12];
    let (d, dmin) = quant_scale_min_k(x, &SEARCH, &mut l, &mut packed);
    b[0..2].copy_from_slice(&d.to_le_bytes());
    b[2..4].copy_from_slice(&dmin.to_le_bytes());
    b[4..16].copy_from_slice(&packed);
    for p in 0..4 {
        for i in 0..32 {
            b[16 + 32 * p + i] = l[64 * p + i] | (l[64 * p + 32 + i] << 4);
        }
    }
}

pub(super) fn quant_q5_k(x: &[f32; QK_K], b: &mut [u8; Q5_K_BYTES]) {
    const SEARCH: Qkx2 = Qkx2 {
        nmax: 31.0,
        rmin: -0.5,
        rdelta: 0.1,
        nstep: 15,
    };
    let mut l = [0u8; QK_K];
    let mut packed = [0u8; 12];
    let (d, dmin) = quant_scale_min_k(x, &SEARCH, &mut l, &mut packed);
    b[0..2].copy_from_slice(&d.to_le_bytes());
    b[2..4].copy_from_slice(&dmin.to_le_bytes());
    b[4..16].copy_from_slice(&packed);
    b[16..48].fill(0);
    for p in 0..4 {
        let (u1, u2) = (1u8 << (2 * p), 2u8 << (2 * p));
        for i in 0..32 {
            let (l1, l2) = (l[64 * p + i], l[64 * p + 32 + i]);
            if l1 > 15 {
                b[16 + i] |= u1;
            }
            if l2 > 15 {
                b[16 + i] |= u2;
            }
            b[48 + 32 * p + i] = (l1 & 0x0F) | ((l2 & 0x0F) << 4);
        }
    }
}

/// ggml's `make_qx_quants(16, 32, x, L, rmse_type = 1, NULL)` (weights x²)
/// on the sixteen 16-element sub-blocks of a Q6_K super-block at once.
/// Levels come back offset by 32 (0..=63) in `lt`; the returned scales are
/// signed so that `x ≈ scale * (L - 32)`.
fn make_qx_quants_x16(xt: &[[f32; 16]; 16], lt: &mut [[f32; 16]; 16]) -> [f32; 16] {
    const NMAX: f32 = 32.0;
    let mut max = [0.0f32; 16];
    let mut amax = [0.0f32; 16];
    for row in xt {
        for j in 0..16 {
            let ax = row[j].abs();
            if ax > amax[j] {
                amax[j] = ax;
                max[j] = row[j];
            }
        }
    }
    // One pass at inverse scale `iscale`: levels (unoffset) and the sums.
    let pass = |iscale: &[f32; 16], laux: &mut [[f32; 16]; 16]| {
        let (mut sumlx, mut suml2) = ([0.0f32; 16], [0.0f32; 16]);
        for i in 0..16 {
            for j in 0..16 {
                let x = xt[i][j];
                let l = round_clamped(iscale[j] * x, -NMAX, NMAX - 1.0);
                laux[i][j] = l;
                let w = x * x;
                sumlx[j] += w * x * l;
                suml2[j] += w * l * l;
            }
        }
        (sumlx, suml2)
    };
    let iscale: [f32; 16] = std::array::from_fn(|j| -NMAX / max[j]);
    let (sumlx, suml2) = pass(&iscale, lt);
    let mut scale: [f32; 16] = std::array::from_fn(|j| {
        if suml2[j] != 0.0 {
            sumlx[j] / suml2[j]
        } else {
            0.0
        }
    });
    let mut best: [f32; 16] = std::array::from_fn(|j| scale[j] * sumlx[j]);
    let mut laux = [[0.0f32; 16]; 16];
    for is in -9..=9 {
        if is == 0 {
            continue;
        }
        let step = NMAX + 0.1 * is as f32;
        let iscale: [f32; 16] = std::array::from_fn(|j| -step / max[j]);
        let (sumlx, suml2) = pass(&iscale, &mut laux);
        let take: [bool; 16] =
            std::array::from_fn(|j| suml2[j] > 0.0 && sumlx[j] * sumlx[j] > best[j] * suml2[j]);
        if take.contains(&true) {
            for j in 0..16 {
                if take[j] {
                    scale[j] = sumlx[j] / suml2[j];
                    best[j] = scale[j] * sumlx[j];
                }
            }
            for i in 0..16 {
                for j in 0..16 {
                    if take[j] {
                        lt[i][j] = laux[i][j];
                    }
                }
            }
        }
    }
    for j in 0..16 {
        if amax[j] < GROUP_MAX_EPS {
            scale[j] = 0.0; // ggml's all-zero early return: L = 0
            for row in lt.iter_mut() {
                row[j] = -NMAX;
            }
        }
    }
    for row in lt.iter_mut() {
        for v in row.iter_mut() {
            *v += NMAX;
        }
    }
    scale
}

pub(super) fn quant_q6_k(x: &[f32; QK_K], b: &mut [u8; Q6_K_BYTES]) {
    let mut xt = [[0.0f32; 16]; 16];
    for j in 0..16 {
        for i in 0..16 {
            xt[i][j] = x[16 * j + i];
        }
    }
    let mut lt = [[0.0f32; 16]; 16];
    let scales = make_qx_quants_x16(&xt, &mut lt);
    let mut l = [0u8; QK_K];
    for j in 0..16 {
        for i in 0..16 {
            l[16 * j + i] = lt[i][j] as u8;
        }
    }
    let mut max_scale = 0.0f32;
    let mut max_abs_scale = 0.0f32;
    for &s in &scales {
        if s.abs() > max_abs_scale {
            max_abs_scale = s.abs();
            max_scale = s;
        }
    }
    if max_abs_scale < GROUP_MAX_EPS {
        b.fill(0); // all levels 0 with d = +0.0 decodes to zeros
        return;
    }
    // The sub-block with the largest |scale| gets int8 scale -128, so d
    // carries the sign and the full int8 range is used.
    let iscale = -128.0 / max_scale;
    let d16 = f32_to_f16(1.0 / iscale);
    for ib in 0..16 {
        b[192 + ib] = nearest_int(iscale * scales[ib]).clamp(-128, 127) as i8 as u8;
    }
    let dq = super::f16_to_f32(d16);
    for j in 0..16 {
        let d = dq * b[192 + j] as i8 as f32;
        if d == 0.0 {
            continue;
        }
        for ii in 0..16 {
            let q = round_clamped(x[16 * j + ii] / d, -32.0, 31.0);
            l[16 * j + ii] = (q + 32.0) as u8;
        }
    }
    b[208..210].copy_from_slice(&d16.to_le_bytes());
    for h in 0..2 {
        let lh = &l[128 * h..128 * h + 128];
        for i in 0..32 {
            let (q1, q2, q3, q4) = (lh[i], lh[i + 32], lh[i + 64], lh[i + 96]);
            b[64 * h + i] = (q1 & 0x0F) | ((q3 & 0x0F) << 4);
            b[64 * h + 32 + i] = (q2 & 0x0F) | ((q4 & 0x0F) << 4);
            b[128 + 32 * h + i] =
                (q1 >> 4) | ((q2 >> 4) << 2) | ((q3 >> 4) << 4) | ((q4 >> 4) << 6);
        }
    }
}
