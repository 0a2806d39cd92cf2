//! Block decoders against hand-built blocks with hand-computed outputs, the
//! quantizers' round-trip error on seeded Gaussian data, and argument errors.
//! The bit-exact comparison with an independent implementation lives in
//! gguf_py_crosscheck.rs; these tests pin the index mappings and sign/offset
//! conventions so a failure points at one field.

use glmw::quant::{
    can_quantize, dequantize, dequantize_vec, f16_to_f32, f32_to_f16, quantize_into, GgmlType,
};
use glmw::Error;

const F16_ONE: u16 = 0x3C00;
const F16_HALF: u16 = 0x3800;
const F16_QUARTER: u16 = 0x3400;

fn put16(b: &mut [u8], at: usize, v: u16) {
    b[at..at + 2].copy_from_slice(&v.to_le_bytes());
}

fn deq(ty: GgmlType, b: &[u8]) -> Vec<f32> {
    dequantize_vec(ty, b, ty.block_size() as usize).unwrap()
}

#[test]
fn floats() {
    let mut b = Vec::new();
    for v in [1.5f32, -0.0, f32::INFINITY, f32::MIN_POSITIVE / 8.0] {
        b.extend_from_slice(&v.to_le_bytes());
    }
    let y = dequantize_vec(GgmlType::F32, &b, 4).unwrap();
    assert_eq!(y[0], 1.5);
    assert_eq!(y[1].to_bits(), 0x8000_0000);
    assert_eq!(y[2], f32::INFINITY);
    assert_eq!(y[3], f32::MIN_POSITIVE / 8.0);

    let h: [u16; 6] = [F16_ONE, 0xC000, 0x0001, 0x7C00, 0x7E00, 0x8000];
    let b: Vec<u8> = h.iter().flat_map(|v| v.to_le_bytes()).collect();
    let y = dequantize_vec(GgmlType::F16, &b, 6).unwrap();
    assert_eq!(y[0], 1.0);
    assert_eq!(y[1], -2.0);
    assert_eq!(y[2], 2f32.powi(-24)); // smallest f16 subnormal
    assert_eq!(y[3], f32::INFINITY);
    assert!(y[4].is_nan());
    assert_eq!(y[5].to_bits(), 0x8000_0000);
    assert_eq!(f16_to_f32(f32_to_f16(65504.0)), 65504.0);
    assert_eq!(f32_to_f16(65520.0), 0x7C00); // rounds to inf, as IEEE says

    let h: [u16; 3] = [0x3F80, 0xC040, 0x0001];
    let b: Vec<u8> = h.iter().flat_map(|v| v.to_le_bytes()).collect();
    let y = dequantize_vec(GgmlType::BF16, &b, 3).unwrap();
    assert_eq!(y[0], 1.0);
    assert_eq!(y[1], -3.0);
    assert_eq!(y[2].to_bits(), 0x0001_0000);
}

#[test]
fn q4_0_and_q4_1() {
    let mut b = [0u8; 18];
    put16(&mut b, 0, F16_HALF);
    b[2] = 0x0F; // element 0 = 15, element 16 = 0
    b[2 + 15] = 0x80; // element 15 = 0, element 31 = 8
    b[2 + 7] = 0x9A; // element 7 = 10, element 23 = 9
    let y = deq(GgmlType::Q4_0, &b);
    assert_eq!((y[0], y[16]), (3.5, -4.0));
    assert_eq!((y[15], y[31]), (-4.0, 0.0));
    assert_eq!((y[7], y[23]), (1.0, 0.5));
    assert_eq!(y[1], -4.0);

    let mut b = [0u8; 20];
    put16(&mut b, 0, F16_QUARTER);
    put16(&mut b, 2, 0xBC00); // m = -1
    b[4] = 0xF3;
    let y = deq(GgmlType::Q4_1, &b);
    assert_eq!((y[0], y[16]), (-0.25, 2.75));
    assert_eq!(y[1], -1.0);
}

#[test]
fn q5_0_high_bits() {
    let mut b = [0u8; 22];
    put16(&mut b, 0, F16_ONE);
    // qh bit j is element j's 5th bit, bit j+16 element j+16's.
    let qh: u32 = (1 << 0) | (1 << 17) | (1 << 31);
    b[2..6].copy_from_slice(&qh.to_le_bytes());
    b[6] = 0x21;
    b[6 + 15] = 0xFF;
    let y = deq(GgmlType::Q5_0, &b);
    assert_eq!(y[0], 1.0); // (1 | 16) - 16
    assert_eq!(y[16], -14.0); // 2 - 16, bit 16 clear
    assert_eq!(y[1], -16.0);
    assert_eq!(y[17], 0.0); // 0 | 16
    assert_eq!(y[15], -1.0); // bit 15 clear
    assert_eq!(y[31], 15.0); // bit 31 set
}

#[test]
fn q5_1_high_bits() {
    let mut b = [0u8; 24];
    put16(&mut b, 0, F16_HALF);
    put16(&mut b, 2, 0x4000); // m = 2
    let qh: u32 = (1 << 5) | (1 << 20);
    b[4..8].copy_from_slice(&qh.to_le_bytes());
    b[8 + 5] = 0x0A;
    b[8 + 4] = 0x30;
    let y = deq(GgmlType::Q5_1, &b);
    assert_eq!(y[5], 15.0); // (10 | 16) * 0.5 + 2
    assert_eq!(y[21], 2.0);
    assert_eq!(y[20], 11.5); // (3 | 16) * 0.5 + 2
    assert_eq!(y[4], 2.0);
}

#[test]
fn q8_0_and_iq4_nl() {
    let mut b = [0u8; 34];
    put16(&mut b, 0, F16_HALF);
    b[2] = 0x80; // -128
    b[2 + 31] = 127;
    b[2 + 7] = 0xFF; // -1
    let y = deq(GgmlType::Q8_0, &b);
    assert_eq!((y[0], y[31], y[7], y[8]), (-64.0, 63.5, -0.5, 0.0));

    let mut b = [0u8; 18];
    put16(&mut b, 0, 0x4000); // d = 2
    b[2] = 0xF0;
    b[2 + 3] = 0x78;
    let y = deq(GgmlType::IQ4_NL, &b);
    assert_eq!((y[0], y[16]), (-254.0, 226.0));
    assert_eq!((y[3], y[19]), (2.0, -20.0));
}

#[test]
fn q2_k_index_mapping() {
    let mut b = [0u8; 84];
    b[0] = 0x21; // sub-block 0: scale 1, min 2
    b[1] = 0x13; // sub-block 1: scale 3, min 1
    b[2] = 0x01;
    b[4] = 0x01;
    b[6] = 0x01;
    b[9] = 0x35; // sub-block 9 (second half, shift 0, q[16..32]): scale 5, min 3
    b[15] = 0xF4; // sub-block 15 (second half, shift 6, q[16..32]): scale 4, min 15
    put16(&mut b, 80, F16_ONE);
    put16(&mut b, 82, F16_HALF);
    let qs = 16;
    b[qs] = 0b11_10_01_00; // element 0 / 32 / 64 / 96 (shifts 0,2,4,6)
    b[qs + 16] = 0x03; // element 16
    b[qs + 48] = 0b10_00_00_01; // element 144 (shift 0) and 240 (shift 6)
    let y = deq(GgmlType::Q2_K, &b);
    assert_eq!(y[0], -1.0); // 1*0 - 0.5*2
    assert_eq!((y[32], y[64], y[96]), (1.0, 2.0, 3.0));
    assert_eq!(y[16], 8.5); // 3*3 - 0.5*1
    assert_eq!(y[144], 3.5); // 5*1 - 0.5*3
    assert_eq!(y[240], 0.5); // 4*2 - 0.5*15
    assert_eq!(y[128], 0.0); // sub-block 8: scale and min 0
}

#[test]
fn q3_k_scales_and_hmask() {
    let mut b = [0u8; 110];
    let (hm, qs, sc) = (0, 32, 96);
    // scale 0: low4 from b[0], high2 from b[8] bits 0-1 -> 1 | 2<<4 = 33 -> +1
    b[sc] = 0x01;
    b[sc + 8] = 0x02;
    // scale 6: low4 from b[6] low nibble, high2 from b[10] bits 2-3 -> 63 -> +31
    b[sc + 6] = 0x0F;
    b[sc + 10] = 0x0C;
    // scale 13: low4 from b[5] high nibble, high2 from b[9] bits 6-7 -> 0 -> -32
    put16(&mut b, 108, F16_HALF);
    b[qs] = 0b10; // element 0 = 2, hmask bit set -> 2
    b[hm] = 0x01;
    // element 1: q 0, hmask bit clear -> -4
    b[qs + 3] = 0b11 << 6; // element 99 (shift 6 -> hmask bit 3, clear): 3 - 4
    b[qs + 32 + 16 + 2] = 0b01 << 4; // element 210 (half 1, shift 4, B)
    b[hm + 18] = 1 << 6; // hmask bit 4*1 + 2
    let y = deq(GgmlType::Q3_K, &b);
    assert_eq!(y[0], 1.0);
    assert_eq!(y[1], -2.0);
    assert_eq!(y[99], -15.5); // 0.5 * 31 * -1
    assert_eq!(y[210], -16.0); // 0.5 * -32 * 1
    assert_eq!(y[211], 64.0); // 0.5 * -32 * -4
}

/// Scale bytes exercising both halves of get_scale_min_k4.
fn k4_scales(b: &mut [u8]) {
    b[4] = 0x02; // sub-block 0: scale 2
    b[4 + 1] = 0b10_000011; // sub-block 1 scale 3; top bits of scale 5 = 2
    b[4 + 5] = 0b01_000010; // sub-block 1 min 2; top bits of min 5 = 1
    b[4 + 9] = 0x7A; // sub-block 5: scale low 0xA, min low 7 -> 42, 23
    b[4 + 3] = 0xC0; // sub-block 3 scale 0; top bits of scale 7 = 3
    b[4 + 7] = 0xFF; // sub-block 3 min 63; top bits of min 7 = 3
    b[4 + 11] = 0xFF; // sub-block 7: 63, 63
    put16(b, 0, F16_HALF);
    put16(b, 2, F16_QUARTER);
}

#[test]
fn q4_k_scale_min_unpack() {
    let mut b = [0u8; 144];
    k4_scales(&mut b);
    let qs = 16;
    b[qs + 4] = 0x50; // element 36: sub-block 1, high nibble 5
    b[qs + 64] = 0xF0; // element 160: sub-block 5, high nibble 15
    b[qs + 96 + 31] = 0x10; // element 255: sub-block 7
    b[qs + 2] = 0x03; // element 2: sub-block 0
    let y = deq(GgmlType::Q4_K, &b);
    assert_eq!(y[36], 7.0); // 0.5*3*5 - 0.25*2
    assert_eq!(y[160], 309.25); // 0.5*42*15 - 0.25*23
    assert_eq!(y[255], 15.75); // 0.5*63*1 - 0.25*63
    assert_eq!(y[100], -15.75); // sub-block 3: scale 0, min 63
    assert_eq!(y[130], 0.0); // sub-block 4: all zero
    assert_eq!(y[2], 3.0); // 0.5*2*3
}

#[test]
fn q5_k_high_bits() {
    let mut b = [0u8; 176];
    k4_scales(&mut b);
    let (qh, qs) = (16, 48);
    b[qs + 64] = 0xF0;
    b[qh] = 1 << 5; // element 160: pair 2, high-nibble sub-block -> bit 5
    b[qs + 2] = 0x03;
    b[qh + 2] = 0b11; // element 2 (bit 0) and 34 (bit 1)
    b[qs + 96 + 31] = 0x10;
    b[qh + 31] = 1 << 7; // element 255
    let y = deq(GgmlType::Q5_K, &b);
    assert_eq!(y[160], 645.25); // 0.5*42*31 - 5.75
    assert_eq!(y[2], 19.0); // 1.0*(3+16)
    assert_eq!(y[34], 23.5); // 1.5*(0+16) - 0.5
    assert_eq!(y[255], 519.75); // 0.5*63*17 - 15.75
    assert_eq!(y[3], 0.0);
}

#[test]
fn q6_k_signed_scales() {
    let mut b = [0u8; 210];
    let (ql, qh, sc) = (0, 128, 192);
    for (i, s) in [(0, -3i8), (2, 5), (4, -128), (6, 127), (9, -1), (15, 2)] {
        b[sc + i] = s as u8;
    }
    put16(&mut b, 208, F16_HALF);
    b[ql] = 0xA5;
    b[ql + 32] = 0x3C;
    b[qh] = 0b11_10_01_00;
    b[ql + 127] = 0xF0;
    b[qh + 63] = 0xC0;
    let y = deq(GgmlType::Q6_K, &b);
    assert_eq!(y[0], 40.5); // 0.5 * -3 * (5 - 32)
    assert_eq!(y[32], -10.0); // 0.5 * 5 * ((12|16) - 32)
    assert_eq!(y[64], -640.0); // 0.5 * -128 * ((10|32) - 32)
    assert_eq!(y[96], 1206.5); // 0.5 * 127 * ((3|48) - 32)
    assert_eq!(y[145], 16.0); // second half, l=17 -> scale 9 (-1), q = -32
    assert_eq!(y[255], 31.0); // 0.5 * 2 * ((15|48) - 32)
}

#[test]
fn iq4_xs_scales() {
    let mut b = [0u8; 136];
    put16(&mut b, 0, F16_ONE);
    put16(&mut b, 2, 0x0002); // scales_h: sub-block 0 high bits = 2
    b[4] = 0x01; // sub-block 0 low 1 -> ls 33 -> dl 1
    b[4 + 2] = 0xF0; // sub-block 5 low 15, high 0 -> dl -17
    b[8] = 0x0F;
    b[8 + 80] = 0x98;
    let y = deq(GgmlType::IQ4_XS, &b);
    assert_eq!((y[0], y[16]), (113.0, -127.0));
    assert_eq!((y[160], y[176]), (-17.0, -221.0));
    assert_eq!(y[32], 4064.0); // sub-block 1: ls 0 -> dl -32; q 0 -> K[0] = -127
}

// ------------------------------------------------------------ round trips

/// xorshift64* + Box-Muller: deterministic Gaussian samples without a crate.
struct Rng(u64);
impl Rng {
    fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn uniform(&mut self) -> f64 {
        ((self.next_u64() >> 11) as f64 + 0.5) / (1u64 << 53) as f64
    }
    fn gauss(&mut self) -> f32 {
        let (u, v) = (self.uniform(), self.uniform());
        ((-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos()) as f32
    }
}

fn rel_rms(ty: GgmlType, x: &[f32]) -> f64 {
    let mut q = Vec::new();
    quantize_into(ty, x, &mut q).unwrap();
    assert_eq!(q.len() as u64, ty.row_bytes(x.len() as u64).unwrap());
    let y = dequantize_vec(ty, &q, x.len()).unwrap();
    let (mut e2, mut x2) = (0.0f64, 0.0f64);
    for (a, b) in x.iter().zip(&y) {
        e2 += ((a - b) as f64).powi(2);
        x2 += (*a as f64).powi(2);
    }
    (e2 / x2).sqrt()
}

/// Upper bounds for relative RMS error on N(0, σ²) data, ~10% above what
/// the quantizers measure (seeded data, so the numbers are stable). For
/// scale: no quantizer at R bits/weight can beat 2^-R on Gaussian data
/// (rate-distortion bound): 4.4% at Q4_K's 4.5 bpw, 2.2% at Q5_K's 5.5,
/// 1.06% at Q6_K's 6.56. ggml-style block quantizers sit at ~1.6x that.
const BOUNDS: &[(GgmlType, f64)] = &[
    (GgmlType::F32, 0.0),
    (GgmlType::F16, 2.4e-4),
    (GgmlType::BF16, 1.9e-3),
    (GgmlType::Q4_0, 0.095),
    (GgmlType::Q4_1, 0.087),
    (GgmlType::Q5_0, 0.048),
    (GgmlType::Q5_1, 0.042),
    (GgmlType::Q8_0, 0.0060),
    (GgmlType::Q4_K, 0.079),
    (GgmlType::Q5_K, 0.040),
    (GgmlType::Q6_K, 0.0196),
    // round-to-nearest (quant/rtn.rs), no scale search
    (GgmlType::Q2_K, 0.365),
    (GgmlType::Q3_K, 0.20),
    (GgmlType::IQ4_NL, 0.088),
    (GgmlType::IQ4_XS, 0.089),
];

#[test]
fn round_trip_gaussian() {
    for (scale, seed) in [(1.0f32, 1u64), (0.02, 2), (300.0, 3)] {
        let mut rng = Rng(0x9E37_79B9_7F4A_7C15 ^ seed);
        let x: Vec<f32> = (0..256 * 64).map(|_| rng.gauss() * scale).collect();
        let mut err = std::collections::HashMap::new();
        for &(ty, bound) in BOUNDS {
            let e = rel_rms(ty, &x);
            eprintln!("{ty:5} σ={scale:<6} rel rms {e:.5}");
            assert!(e <= bound, "{ty} σ={scale}: relative RMS {e} > {bound}");
            err.insert(ty, e);
        }
        // The super-block formats must beat the legacy ones of equal width.
        assert!(err[&GgmlType::Q4_K] < err[&GgmlType::Q4_1]);
        assert!(err[&GgmlType::Q5_K] < err[&GgmlType::Q5_1]);
        assert!(err[&GgmlType::Q6_K] < 0.6 * err[&GgmlType::Q5_K]);
    }
}

/// Every quantizable type leaves an all-zero input all-zero and keeps a
/// constant block constant within its precision.
#[test]
fn round_trip_degenerate_blocks() {
    for &(ty, _) in BOUNDS {
        let zeros = vec![0.0f32; 512];
        let mut q = Vec::new();
        quantize_into(ty, &zeros, &mut q).unwrap();
        assert!(
            dequantize_vec(ty, &q, 512)
                .unwrap()
                .iter()
                .all(|&v| v == 0.0),
            "{ty}"
        );

        let c = vec![-0.75f32; 512];
        q.clear();
        quantize_into(ty, &c, &mut q).unwrap();
        for v in dequantize_vec(ty, &q, 512).unwrap() {
            assert!((v + 0.75).abs() <= 0.75 * 0.02, "{ty}: {v}");
        }
    }
}

/// Inputs already on a legacy type's grid come back exactly.
#[test]
fn round_trip_exact_grid() {
    let grid = |lo: i32, n: i32, step: f32| -> Vec<f32> {
        (0..32).map(|j| (lo + j % n) as f32 * step).collect()
    };
    for (ty, x) in [
        (GgmlType::Q4_0, grid(-8, 16, 0.5)),
        (GgmlType::Q4_1, grid(0, 16, 0.25)),
        (GgmlType::Q5_0, grid(-16, 32, 0.125)),
        (GgmlType::Q5_1, grid(-3, 32, 1.0)),
        (
            GgmlType::Q8_0,
            (0..32).map(|j| (j * 8 - 127) as f32 / 4.0).collect(),
        ),
    ] {
        let mut q = Vec::new();
        quantize_into(ty, &x, &mut q).unwrap();
        assert_eq!(dequantize_vec(ty, &q, 32).unwrap(), x, "{ty}");
    }
}

/// quantize_into appends after existing bytes and leaves them alone.
#[test]
fn quantize_appends() {
    let x: Vec<f32> = (0..64).map(|i| i as f32 - 30.0).collect();
    let mut q = vec![0xAB; 3];
    quantize_into(GgmlType::Q8_0, &x, &mut q).unwrap();
    assert_eq!(q.len(), 3 + 68);
    assert_eq!(&q[..3], &[0xAB; 3]);
    let mut alone = Vec::new();
    quantize_into(GgmlType::Q8_0, &x, &mut alone).unwrap();
    assert_eq!(&q[3..], &alone[..]);
}

// ------------------------------------------------------------ errors

#[test]
fn bad_arguments_are_errors() {
    let inv = |r: glmw::Result<()>| matches!(r, Err(Error::InvalidArgument(_)));
    let uns = |r: glmw::Result<()>| matches!(r, Err(Error::Unsupported(_)));
    let mut out = vec![0.0f32; 32];
    assert!(inv(dequantize(GgmlType::Q4_0, &[0; 17], &mut out)));
    assert!(inv(dequantize(GgmlType::Q4_0, &[0; 19], &mut out)));
    assert!(inv(dequantize(GgmlType::Q4_0, &[0; 18], &mut out[..31])));
    assert!(inv(dequantize(GgmlType::Q6_K, &[0; 210], &mut out)));
    assert!(inv(dequantize(GgmlType::F16, &[0; 63], &mut out)));
    assert!(uns(dequantize(
        GgmlType::Other(16),
        &[0; 66],
        &mut [0.0; 256]
    )));
    assert!(uns(dequantize(GgmlType::Q8_1, &[0; 36], &mut out)));
    assert!(uns(dequantize(GgmlType::I32, &[0; 128], &mut out)));
    assert!(dequantize(GgmlType::Q4_K, &[], &mut []).is_ok());

    assert!(dequantize_vec(GgmlType::Q4_0, &[0; 18], usize::MAX).is_err());
    assert!(dequantize_vec(GgmlType::Q4_0, &[0; 18], 64).is_err());
    assert!(dequantize_vec(GgmlType::F32, &[0; 4], usize::MAX / 2).is_err());

    let mut q = vec![1u8];
    assert!(inv(quantize_into(GgmlType::Q4_0, &[0.0; 31], &mut q)));
    assert!(inv(quantize_into(GgmlType::Q4_K, &[0.0; 255], &mut q)));
    assert!(uns(quantize_into(GgmlType::Q8_1, &[0.0; 32], &mut q)));
    assert!(uns(quantize_into(GgmlType::I32, &[0.0; 32], &mut q)));
    assert_eq!(
        q,
        vec![1u8],
        "a failed quantize_into leaves the output untouched"
    );
}

#[test]
fn capability_lists_agree() {
    for id in 0..64 {
        let Some(t) = GgmlType::from_id(id) else {
            continue;
        };
        if can_quantize(t) {
            assert!(t.can_dequantize(), "{t} encodes but cannot decode");
        }
        if !t.can_dequantize() {
            let bs = t.block_size() as usize;
            let mut out = vec![0.0; bs];
            assert!(
                dequantize(t, &vec![0; t.type_size() as usize], &mut out).is_err(),
                "{t}"
            );
        }
    }
}

// ------------------------------------------------ K-quant encoders vs ggml

/// A literal scalar transcription of ggml-quants.c's `quantize_row_q4_K_ref`,
/// `quantize_row_q5_K_ref` and `quantize_row_q6_K_ref` (with the helpers
/// `nearest_int`, `make_qkx2_quants`, `make_qx_quants`). glmw runs the same
/// searches with sub-blocks in SIMD lanes; this pins that the interleaving
/// changed nothing.
mod ggml_ref {
    fn nearest_int(f: f32) -> i32 {
        ((f + 12_582_912.0).to_bits() & 0x007F_FFFF) as i32 - 0x0040_0000
    }

    #[allow(clippy::too_many_arguments)]
    fn make_qkx2(
        x: &[f32],
        w: &[f32],
        nmax: i32,
        l: &mut [u8],
        rmin: f32,
        rdelta: f32,
        nstep: i32,
    ) -> (f32, f32) {
        let n = x.len();
        let (mut min, mut max, mut sum_w) = (x[0], x[0], w[0]);
        let mut sum_x = sum_w * x[0];
        for i in 1..n {
            min = if x[i] < min { x[i] } else { min };
            max = if x[i] > max { x[i] } else { max };
            sum_w += w[i];
            sum_x += w[i] * x[i];
        }
        if min > 0.0 {
            min = 0.0;
        }
        if max == min {
            l.fill(0);
            return (0.0, -min);
        }
        let mut iscale = nmax as f32 / (max - min);
        let mut scale = 1.0 / iscale;
        let mut best = 0.0f32;
        for i in 0..n {
            l[i] = nearest_int(iscale * (x[i] - min)).clamp(0, nmax) as u8;
            let diff = scale * l[i] as f32 + min - x[i];
            best += w[i] * (diff * diff);
        }
        let mut laux = [0u8; 32];
        for is in 0..=nstep {
            iscale = (rmin + rdelta * is as f32 + nmax as f32) / (max - min);
            let (mut sum_l, mut sum_l2, mut sum_xl) = (0.0f32, 0.0f32, 0.0f32);
            for i in 0..n {
                laux[i] = nearest_int(iscale * (x[i] - min)).clamp(0, nmax) as u8;
                let lf = laux[i] as f32;
                sum_l += w[i] * lf;
                sum_l2 += w[i] * lf * lf;
                sum_xl += w[i] * lf * x[i];
            }
            let det = sum_w * sum_l2 - sum_l * sum_l;
            if det > 0.0 {
                let mut this_scale = (sum_w * sum_xl - sum_x * sum_l) / det;
                let mut this_min = (sum_l2 * sum_x - sum_l * sum_xl) / det;
                if this_min > 0.0 {
                    this_min = 0.0;
                    this_scale = sum_xl / sum_l2;
                }
                let mut cur = 0.0f32;
                for i in 0..n {
                    let diff = this_scale * laux[i] as f32 + this_min - x[i];
                    cur += w[i] * (diff * diff);
                }
                if cur < best {
                    l.copy_from_slice(&laux[..n]);
                    (best, scale, min) = (cur, this_scale, this_min);
                }
            }
        }
        (scale, -min)
    }

    fn scale_min_k4(j: usize, q: &[u8]) -> (u8, u8) {
        if j < 4 {
            (q[j] & 63, q[j + 4] & 63)
        } else {
            (
                (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4),
                (q[j + 4] >> 4) | ((q[j] >> 6) << 4),
            )
        }
    }

    /// Q4_K (nmax 15) or Q5_K (nmax 31): (d, dmin, scales, levels).
    pub fn q45_k(x: &[f32], nmax: i32) -> (u16, u16, [u8; 12], [u8; 256]) {
        let (rmin, nstep) = if nmax == 15 { (-1.0, 20) } else { (-0.5, 15) };
        let (mut l, mut w) = ([0u8; 256], [0.0f32; 32]);
        let (mut scales, mut mins) = ([0.0f32; 8], [0.0f32; 8]);
        let (mut max_scale, mut max_min) = (0.0f32, 0.0f32);
        for j in 0..8 {
            let xs = &x[32 * j..32 * j + 32];
            let mut sum_x2 = 0.0f32;
            for v in xs {
                sum_x2 += v * v;
            }
            let av_x = (sum_x2 / 32.0).sqrt();
            for i in 0..32 {
                w[i] = av_x + xs[i].abs();
            }
            (scales[j], mins[j]) =
                make_qkx2(xs, &w, nmax, &mut l[32 * j..32 * j + 32], rmin, 0.1, nstep);
            max_scale = if scales[j] > max_scale {
                scales[j]
            } else {
                max_scale
            };
            max_min = if mins[j] > max_min { mins[j] } else { max_min };
        }
        let inv_scale = if max_scale > 0.0 {
            63.0 / max_scale
        } else {
            0.0
        };
        let inv_min = if max_min > 0.0 { 63.0 / max_min } else { 0.0 };
        let mut sc = [0u8; 12];
        for j in 0..8 {
            let ls = (nearest_int(inv_scale * scales[j]) as u8).min(63);
            let lm = (nearest_int(inv_min * mins[j]) as u8).min(63);
            if j < 4 {
                (sc[j], sc[j + 4]) = (ls, lm);
            } else {
                sc[j + 4] = (ls & 0xF) | ((lm & 0xF) << 4);
                sc[j - 4] |= (ls >> 4) << 6;
                sc[j] |= (lm >> 4) << 6;
            }
        }
        let (d, dmin) = (f32_to_f16(max_scale / 63.0), f32_to_f16(max_min / 63.0));
        for j in 0..8 {
            let (s, m) = scale_min_k4(j, &sc);
            let dd = f16_to_f32(d) * s as f32;
            if dd == 0.0 {
                continue;
            }
            let dm = f16_to_f32(dmin) * m as f32;
            for ii in 0..32 {
                l[32 * j + ii] = nearest_int((x[32 * j + ii] + dm) / dd).clamp(0, nmax) as u8;
            }
        }
        (d, dmin, sc, l)
    }

    fn make_qx(x: &[f32], nmax: i32, l: &mut [u8]) -> f32 {
        let (mut max, mut amax) = (0.0f32, 0.0f32);
        for &v in x {
            if v.abs() > amax {
                (amax, max) = (v.abs(), v);
            }
        }
        if amax < 1e-15 {
            l.fill(0);
            return 0.0;
        }
        let sums = |iscale: f32, l: &mut [u8]| {
            let (mut sumlx, mut suml2) = (0.0f32, 0.0f32);
            for (i, &v) in x.iter().enumerate() {
                let q = nearest_int(iscale * v).clamp(-nmax, nmax - 1);
                l[i] = (q + nmax) as u8;
                let w = v * v;
                sumlx += w * v * q as f32;
                suml2 += w * q as f32 * q as f32;
            }
            (sumlx, suml2)
        };
        let (sumlx, suml2) = sums(-(nmax as f32) / max, l);
        let mut scale = if suml2 != 0.0 { sumlx / suml2 } else { 0.0 };
        let mut best = scale * sumlx;
        let mut laux = [0u8; 16];
        for is in (-9..=9).filter(|&i| i != 0) {
            let (sumlx, suml2) = sums(-(nmax as f32 + 0.1 * is as f32) / max, &mut laux);
            if suml2 > 0.0 && sumlx * sumlx > best * suml2 {
                l.copy_from_slice(&laux);
                scale = sumlx / suml2;
                best = scale * sumlx;
            }
        }
        scale
    }

    /// Q6_K: (d, scales, levels 0..=63), or None for ggml's all-zero block.
    pub fn q6_k(x: &[f32]) -> Option<(u16, [i8; 16], [u8; 256])> {
        let (mut l, mut scales) = ([0u8; 256], [0.0f32; 16]);
        let (mut max_scale, mut max_abs) = (0.0f32, 0.0f32);
        for ib in 0..16 {
            scales[ib] = make_qx(&x[16 * ib..16 * ib + 16], 32, &mut l[16 * ib..16 * ib + 16]);
            if scales[ib].abs() > max_abs {
                (max_abs, max_scale) = (scales[ib].abs(), scales[ib]);
            }
        }
        if max_abs < 1e-15 {
            return None;
        }
        let iscale = -128.0 / max_scale;
        let d = f32_to_f16(1.0 / iscale);
        let sc: [i8; 16] =
            std::array::from_fn(|ib| nearest_int(iscale * scales[ib]).min(127) as i8);
        for j in 0..16 {
            let dd = f16_to_f32(d) * sc[j] as f32;
            if dd == 0.0 {
                continue;
            }
            for ii in 0..16 {
                l[16 * j + ii] = (nearest_int(x[16 * j + ii] / dd).clamp(-32, 31) + 32) as u8;
            }
        }
        Some((d, sc, l))
    }
    use super::{f16_to_f32, f32_to_f16};
}

/// Test data that reaches the searches' corner cases: Gaussian and
/// heavy-tailed blocks, all-positive sub-blocks (the `min > 0` clamp),
/// constant and all-zero sub-blocks, tiny values.
fn k_test_data(rng: &mut Rng, n_blocks: usize) -> Vec<f32> {
    let mut x = Vec::with_capacity(256 * n_blocks);
    for b in 0..n_blocks {
        for i in 0..256 {
            let g = rng.gauss();
            x.push(match (b % 6, i / 32) {
                (1, _) => g * g * g,
                (2, s) if s % 2 == 0 => g.abs() + 0.5,
                (3, 1) | (3, 6) => 0.25,
                (3, 3) => 0.0,
                (4, _) => g * 1e-12,
                (5, s) => g * (1 << s) as f32,
                _ => g,
            });
        }
    }
    x
}

#[test]
fn k_quant_encoders_match_ggml_reference() {
    let mut rng = Rng(0x5EED);
    let x = k_test_data(&mut rng, 600);
    let (mut q4, mut q5, mut q6) = (Vec::new(), Vec::new(), Vec::new());
    quantize_into(GgmlType::Q4_K, &x, &mut q4).unwrap();
    quantize_into(GgmlType::Q5_K, &x, &mut q5).unwrap();
    quantize_into(GgmlType::Q6_K, &x, &mut q6).unwrap();
    for (bi, xb) in x.chunks_exact(256).enumerate() {
        for (nmax, q, ts) in [(15, &q4, 144), (31, &q5, 176)] {
            let b = &q[bi * ts..(bi + 1) * ts];
            let (d, dmin, sc, l) = ggml_ref::q45_k(xb, nmax);
            let ctx = format!("block {bi} nmax {nmax}");
            assert_eq!(b[0..2], d.to_le_bytes(), "{ctx}");
            assert_eq!(b[2..4], dmin.to_le_bytes(), "{ctx}");
            assert_eq!(b[4..16], sc, "{ctx}");
            for (i, &want) in l.iter().enumerate() {
                let (p, r) = (i / 64, i % 64);
                let qs = if nmax == 15 { &b[16..] } else { &b[48..] };
                let mut got = (qs[32 * p + r % 32] >> (4 * (r / 32))) & 0xF;
                if nmax == 31 {
                    got |= ((b[16 + r % 32] >> (2 * p + r / 32)) & 1) << 4;
                }
                assert_eq!(got, want, "{ctx} element {i}");
            }
        }
        let b = &q6[bi * 210..(bi + 1) * 210];
        let Some((d, sc, l)) = ggml_ref::q6_k(xb) else {
            assert!(b.iter().all(|&v| v == 0), "block {bi}");
            continue;
        };
        assert_eq!(b[208..210], d.to_le_bytes(), "block {bi}");
        assert_eq!(b[192..208], sc.map(|s| s as u8), "block {bi}");
        for (i, &want) in l.iter().enumerate() {
            let (h, r) = (i / 128, i % 128);
            let (ql, qh) = (&b[64 * h..], &b[128 + 32 * h..]);
            let lo = (ql[r % 64] >> (4 * (r / 64))) & 0xF;
            let hi = (qh[r % 32] >> (2 * (r / 32))) & 3;
            assert_eq!(lo | (hi << 4), want, "Q6_K block {bi} element {i}");
        }
    }
}
