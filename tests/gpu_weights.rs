//! The GPU weight layouts: the load-time repacks keep every byte of the
//! GGUF blocks (src/gpu/repack.rs), and the embedding gather reads a row of
//! every format as the CPU decoder does, in both kernel variants.

mod common;

use glmw::gpu::{ops, repack, Format};

#[test]
fn q4_0_repack_keeps_every_byte() {
    let blocks: Vec<u8> = (0..18 * 3).map(|i| i as u8).collect();
    let (s, n) = repack::repack_q4_0(&blocks).unwrap();
    assert_eq!(
        s,
        vec![0, 1, 18, 19, 36, 37, 0, 0],
        "scales, padded to whole words"
    );
    assert_eq!(&n[..16], &blocks[2..18]);
    assert_eq!(&n[32..], &blocks[38..54]);
    assert!(repack::repack_q4_0(&blocks[..17]).is_err());
}

#[test]
fn repacks_and_pads_keep_every_byte() {
    let blocks: Vec<u8> = (0..34 * 2).map(|i| i as u8).collect();
    let (s, q) = repack::repack_q8_0(&blocks).unwrap();
    assert_eq!(s, vec![0, 1, 34, 35]);
    assert_eq!(&q[..32], &blocks[2..34]);
    assert_eq!(&q[32..], &blocks[36..68]);
    assert!(repack::repack_q8_0(&blocks[..33]).is_err());
    let blocks: Vec<u8> = (0..210 * 2).map(|i| (i % 251) as u8).collect();
    let p = repack::repack_q6_k(&blocks).unwrap();
    assert_eq!(p.len(), 448);
    for (b, o) in blocks.chunks(210).zip(p.chunks(224)) {
        // every six-bit quant where q6_k.wgsl reads it (its header)
        for w in 0..256 {
            let (h, l) = (w / 128, w % 128);
            let (k, i) = (l / 32, l % 32);
            let want = (b[64 * h + 32 * (k & 1) + i] >> (4 * (k >> 1)) & 0xF)
                | ((b[128 + 32 * h + i] >> (2 * k)) & 3) << 4;
            let j = w / 32;
            let nib = o[16 * j + i % 16] >> (4 * (i / 16)) & 0xF;
            let (word, c) = (i % 16 / 8, i % 4);
            let shift = 2 * (i / 16) + 4 * (i % 8 / 4);
            let pair = o[128 + 8 * j + 4 * word + c] >> shift & 3;
            assert_eq!(nib | pair << 4, want, "weight {w}");
        }
        assert_eq!(&o[192..210], &b[192..210], "scales and d");
        assert_eq!(&o[210..], &[0; 14]);
    }
    assert!(repack::repack_q6_k(&blocks[..209]).is_err());
    let blocks: Vec<u8> = (0..22 * 3).map(|i| i as u8).collect();
    let (s, q) = repack::repack_q5_0(&blocks).unwrap();
    assert_eq!(s, vec![0, 1, 22, 23, 44, 45, 0, 0]);
    assert_eq!(&q[..20], &blocks[2..22]);
    assert_eq!(&q[40..], &blocks[46..66]);
    assert!(repack::repack_q5_0(&blocks[..21]).is_err());
    let blocks: Vec<u8> = (0..24 * 2).map(|i| i as u8).collect();
    let (s, q) = repack::repack_q5_1(&blocks).unwrap();
    assert_eq!(s, vec![0, 1, 2, 3, 24, 25, 26, 27]);
    assert_eq!(&q[..20], &blocks[4..24]);
    assert_eq!(&q[20..], &blocks[28..48]);
    let (s, n) = repack::repack_q4_1(&blocks[..40]).unwrap();
    assert_eq!(s, vec![0, 1, 2, 3, 20, 21, 22, 23]);
    assert_eq!(&n[16..], &blocks[24..40]);
    assert!(repack::repack_q4_1(&blocks[..19]).is_err());
    let (s, n) = repack::repack_iq4_nl(&blocks[..36]).unwrap();
    assert_eq!(s, vec![0, 1, 18, 19]);
    assert_eq!(&n[16..], &blocks[20..36]);
    assert!(repack::repack_iq4_nl(&blocks[..17]).is_err());
    let blocks: Vec<u8> = (0..110 * 2).map(|i| (i % 251) as u8).collect();
    let p = repack::pad_q3_k(&blocks).unwrap();
    assert_eq!(p.len(), 224);
    assert_eq!(&p[..110], &blocks[..110]);
    assert_eq!(&p[110..112], &[0, 0]);
    assert_eq!(&p[112..222], &blocks[110..]);
    assert!(repack::pad_q3_k(&blocks[..109]).is_err());
    let blocks: Vec<u8> = (0..136 * 2).map(|i| (i % 251) as u8).collect();
    let p = repack::rotate_iq4_xs(&blocks).unwrap();
    assert_eq!(p.len(), 288);
    assert_eq!(&p[..128], &blocks[8..136]);
    assert_eq!(&p[128..136], &blocks[..8]);
    assert_eq!(&p[136..144], &[0; 8]);
    assert_eq!(&p[144..272], &blocks[144..272]);
    assert_eq!(&p[272..280], &blocks[136..144]);
    assert!(repack::rotate_iq4_xs(&blocks[..135]).is_err());
}

/// The embedding gather (embed.wgsl) against the dequantized rows: every
/// format, the matrix split in two parts as past a binding limit, tokens
/// repeated and at both ends of each part, both variants. Only summation-free
/// dequantization: equal up to f32 rounding of the scale products.
#[test]
fn embed_gathers_rows_of_every_format() {
    use glmw::gpu::weights::{Matrix, Part};
    let gpu = common::gpu();
    let (cols, rows, split) = (512usize, 40usize, 23usize);
    for (i, fmt) in [
        Format::F32,
        Format::F16,
        Format::BF16,
        Format::Q4_0,
        Format::Q4_1,
        Format::Q5_0,
        Format::Q5_1,
        Format::Q8_0,
        Format::Q4K,
        Format::Q5K,
        Format::Q6K,
        Format::Q2K,
        Format::Q3K,
        Format::IQ4NL,
        Format::IQ4XS,
    ]
    .into_iter()
    .enumerate()
    {
        let w = common::randn(rows * cols, 0.5, 90 + i as u64);
        let (deq0, b0) = common::upload(fmt, &w[..split * cols]);
        let (deq1, b1) = common::upload(fmt, &w[split * cols..]);
        let deq = [deq0, deq1].concat();
        let part = |row0: usize, n: usize, buffers| Part {
            row0: row0 as u32,
            rows: n as u32,
            buffers,
        };
        let m = Matrix {
            name: "token_embd".into(),
            format: fmt,
            units: (cols / 32) as u32,
            rows: rows as u32,
            n_mat: 1,
            gate_up: false,
            parts: vec![part(0, split, b0), part(split, rows - split, b1)],
        };
        let toks: Vec<u32> = [3, 0, rows - 1, split, split - 1, 3]
            .map(|t| t as u32)
            .to_vec();
        let tb = gpu.storage("tokens", bytemuck::cast_slice(&toks)).unwrap();
        for pipes in common::pipelines() {
            let poison = vec![f32::NAN; toks.len() * cols];
            let xb = gpu.storage("x", bytemuck::cast_slice(&poison)).unwrap();
            let mut ds = ops::embed(gpu, pipes, &m, &tb, &xb).unwrap();
            for d in &mut ds {
                d.workgroups[1] = toks.len() as u32;
            }
            ops::run(gpu, &ds).unwrap();
            let x = gpu.read_f32(&xb, toks.len() * cols).unwrap();
            for (j, &t) in toks.iter().enumerate() {
                let want = &deq[t as usize * cols..][..cols];
                let got = &x[j * cols..][..cols];
                for (g, w) in got.iter().zip(want) {
                    assert!(
                        (g - w).abs() <= 1e-6 * (1.0 + w.abs()),
                        "{fmt:?} {:?}: token {t}: {g} vs {w}",
                        pipes.variant
                    );
                }
            }
        }
    }
}
