//! Every GPU kernel against the CPU reference, in both variants (subgroup
//! and shared-memory), on fresh random non-zero inputs, at GLM-4.7-Flash
//! shapes and odd sizes. Outputs are poisoned with NaN before each run so
//! unwritten elements fail the comparison.

mod common;

use glmw::gpu::ops::{self, RmsNormParams};
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
