//! Every GPU kernel against the CPU reference, in both variants (subgroup
//! and shared-memory), on fresh random non-zero inputs, at GLM-4.7-Flash
//! shapes and odd sizes. Outputs are poisoned with NaN before each run so
//! unwritten elements fail the comparison.

mod common;

use glmw::gpu::ops::{self, Dispatch, RmsNormParams};
use glmw::reference::ops as cpu;

/// RMSNorm: f32 in, f32 out; only summation order differs from the f64 oracle.
const RMS_NORM_TOL: f64 = 1e-6;

#[test]
fn rms_norm_matches_reference() {
    let gpu = common::gpu();
    for pipes in common::pipelines() {
        for (seed, (n, rows)) in [(2048usize, 3usize), (512, 1), (768, 2), (1000, 1), (7, 5)]
            .into_iter()
            .enumerate()
        {
            let x = common::randn(n * rows, 1.5, seed as u64 + 1);
            let g: Vec<f32> = common::randn(n, 0.1, seed as u64 + 100)
                .iter()
                .map(|v| 1.0 + v)
                .collect();
            let eps = 1e-5;
            let xb = gpu.storage("x", bytemuck::cast_slice(&x));
            let gb = gpu.storage("g", bytemuck::cast_slice(&g));
            let yb = gpu.storage("y", bytemuck::cast_slice(&vec![f32::NAN; n * rows]));
            let pb = gpu.uniform(
                "p",
                &RmsNormParams {
                    n: n as u32,
                    eps,
                    n_rows: rows as u32,
                    _pad: 0,
                },
            );
            let d = ops::rms_norm(gpu, pipes, &pb, &xb, &gb, &yb, rows as u32);
            ops::run(gpu, pipes, &[d]).unwrap();
            let y = gpu.read_f32(&yb, n * rows).unwrap();
            let want: Vec<f32> = x
                .chunks(n)
                .flat_map(|r| cpu::rms_norm(r, &g, eps))
                .collect();
            let e = cpu::rel_l2(&y, &want);
            assert!(
                e < RMS_NORM_TOL,
                "rms_norm {:?} n={n} rows={rows}: rel L2 {e}; first values {:?} vs {:?}",
                pipes.variant,
                &y[..4.min(n)],
                &want[..4.min(n)]
            );
        }
    }
}

/// Q4_0 matvec, judged against the dequantized weights (quantization error
/// is not the kernel's): f32 accumulation over up to 5120 terms.
const MATVEC_TOL: f64 = 1e-5;

#[test]
fn matvec_q4_0_matches_reference() {
    use glmw::gpu::repack::repack_q4_0;
    use glmw::quant::{self, GgmlType};
    let gpu = common::gpu();
    // (cols, rows): q_a, attn_output, an expert's gate, a dense down; then odd sizes.
    let shapes = [
        (2048usize, 768usize),
        (5120, 2048),
        (2048, 1536),
        (10240, 64),
        (96, 13),
        (32, 1),
        (64, 9),
    ];
    for pipes in common::pipelines() {
        for (seed, &(cols, rows)) in shapes.iter().enumerate() {
            let w = common::randn(cols * rows, 0.02, 1000 + seed as u64);
            let mut blocks = Vec::new();
            quant::quantize_into(GgmlType::Q4_0, &w, &mut blocks).unwrap();
            let wd = quant::dequantize_vec(GgmlType::Q4_0, &blocks, cols * rows).unwrap();
            let x = common::randn(cols, 1.0, 2000 + seed as u64);
            let want: Vec<f32> = wd.chunks(cols).map(|r| cpu::dot(r, &x)).collect();

            let (scales, nibbles) = repack_q4_0(&blocks).unwrap();
            let sb = gpu.storage("scales", &scales);
            let nb = gpu.storage("nibbles", &nibbles);
            let xb = gpu.storage("x", bytemuck::cast_slice(&x));
            let yb = gpu.storage("y", bytemuck::cast_slice(&vec![f32::NAN; rows]));
            let params = ops::MatvecParams {
                rows: rows as u32,
                blocks: (cols / 32) as u32,
                _pad: [0; 2],
            };
            let pb = gpu.uniform("p", &params);
            let d = ops::matvec_q4_0(gpu, pipes, &pb, &sb, &nb, &xb, &yb, rows as u32);
            ops::run(gpu, pipes, &[d]).unwrap();
            let y = gpu.read_f32(&yb, rows).unwrap();
            let e = cpu::rel_l2(&y, &want);
            assert!(
                e < MATVEC_TOL,
                "matvec_q4_0 {:?} {cols}x{rows}: rel L2 {e}; {:?} vs {:?}",
                pipes.variant,
                &y[..3.min(rows)],
                &want[..3.min(rows)]
            );
        }
    }
}

#[test]
fn q4_0_repack_keeps_every_byte() {
    let blocks: Vec<u8> = (0..18 * 3).map(|i| i as u8).collect();
    let (s, n) = glmw::gpu::repack::repack_q4_0(&blocks).unwrap();
    assert_eq!(
        s,
        vec![0, 1, 18, 19, 36, 37, 0, 0],
        "scales, padded to whole words"
    );
    assert_eq!(&n[..16], &blocks[2..18]);
    assert_eq!(&n[32..], &blocks[38..54]);
    assert!(glmw::gpu::repack::repack_q4_0(&blocks[..17]).is_err());
}
