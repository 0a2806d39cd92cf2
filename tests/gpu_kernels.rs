//! RMSNorm and every matvec format and mode against the CPU reference, in
//! both kernel variants (subgroup and shared-memory), on fresh random
//! non-zero inputs, at GLM-4.7-Flash shapes and odd sizes. Outputs are
//! poisoned with NaN before each run so unwritten elements fail, and every
//! element a dispatch must not touch is checked to be left bit for bit.
//! Matvecs are judged against the dequantized weights, so quantization error
//! is not the kernel's. Attention, router and top-k: tests/gpu_attention.rs.

mod common;

use glmw::gpu::kernels::Bind;
use glmw::gpu::ops::{
    self, Dispatch, MatvecBuffers, MatvecMode, MatvecParams, MatvecSide, MatvecSpec,
    RmsNormBindings,
};
use glmw::gpu::{Format, Kernel};
use glmw::reference::ops as cpu;

/// RMSNorm: f32 in, f32 out; only summation order differs from the f64 oracle.
const RMS_NORM_TOL: f64 = 1e-6;

/// Matvec (every mode) vs f64 dot products over the dequantized weights:
/// f32 accumulation over up to 5120 terms (~1e-7..1e-6 in practice); a wrong
/// weight, scale or x offset anywhere gives ~1e-2 or more.
const MATVEC_TOL: f64 = 1e-5;

/// RMSNorm epsilon for the fused-norm matvecs (GLM-4.7-Flash's).
const EPS: f32 = 1e-5;

/// Extra NaN-poisoned floats after every output, to catch overruns.
const TAIL: usize = 7;

#[test]
fn rms_norm_matches_reference() {
    let gpu = common::gpu();
    let mut worst = 0f64;
    // (n, rows, x std, parts): the model's norms, rows of any multiple of
    // four (the kernel reads vec4s; a normed row is some matrix's input,
    // whose columns the upload holds to multiples of 32), rows folded past
    // 65535, inputs small enough that eps changes the result, and x as the
    // sum of a split-K matmul's planes (q_a_norm after q_a).
    let shapes = [
        (2048usize, 3usize, 1.5f32, 1usize),
        (512, 1, 1.5, 1),
        (768, 2, 1.5, 1),
        (1000, 1, 1.5, 1),
        (12, 5, 1.5, 1),
        (4, 65_600, 1.5, 1),
        (1028, 2, 1.5, 1),
        (256, 2, 0.003, 1),
        (768, 5, 1.5, 4),
        (12, 3, 1.5, 2),
    ];
    for (seed, &(n, rows, std, parts)) in shapes.iter().enumerate() {
        let seed = seed as u64;
        let x = common::randn(n * rows * parts, std, seed + 1);
        let g: Vec<f32> = common::randn(n, 0.1, seed + 100)
            .iter()
            .map(|v| 1.0 + v)
            .collect();
        let sum: Vec<f32> = (0..n * rows)
            .map(|i| (0..parts).map(|s| x[s * n * rows + i]).sum())
            .collect();
        let want: Vec<f32> = sum
            .chunks(n)
            .flat_map(|r| cpu::rms_norm(r, &g, EPS))
            .collect();
        let xb = gpu.storage("x", bytemuck::cast_slice(&x)).unwrap();
        let gb = gpu.storage("g", bytemuck::cast_slice(&g)).unwrap();
        let pb = gpu.uniform(
            "p",
            &ops::RmsNormParams {
                n: n as u32,
                eps: EPS,
                n_rows: rows as u32,
                parts: parts as u32,
            },
        );
        for pipes in common::pipelines() {
            let yb = gpu
                .storage("y", bytemuck::cast_slice(&vec![f32::NAN; n * rows + TAIL]))
                .unwrap();
            let bufs = RmsNormBindings {
                p: &pb,
                x: &xb,
                g: &gb,
                y: &yb,
            };
            let d = Dispatch::new(gpu, pipes, Kernel::RmsNorm, &bufs, ops::grid(rows as u32));
            ops::run(gpu, &[d.unwrap()]).unwrap();
            let y = gpu.read_f32(&yb, n * rows + TAIL).unwrap();
            assert!(
                y[n * rows..].iter().all(|v| v.is_nan()),
                "rms_norm wrote past its rows"
            );
            let e = cpu::rel_l2(&y[..n * rows], &want);
            worst = worst.max(e);
            assert!(
                e < RMS_NORM_TOL,
                "rms_norm {:?} n={n} rows={rows} parts={parts}: rel L2 {e:.3e}; first values {:?} vs {:?}",
                pipes.variant,
                &y[..4.min(n)],
                &want[..4.min(n)]
            );
        }
    }
    eprintln!("rms_norm: worst rel L2 {worst:.2e} (tolerance {RMS_NORM_TOL:.0e})");
}

// ---- matvec --------------------------------------------------------------

/// One matvec dispatch to check: shapes, mode and layout parameters.
#[derive(Clone, Copy, Debug)]
struct Case {
    fmt: Format,
    mode: MatvecMode,
    norm: bool,
    accum: bool,
    cols: usize,
    /// Output rows per matrix (GateUp: rows of each half).
    rows: usize,
    /// Matrices stacked in the weight buffer (experts or heads).
    n_mat: usize,
    /// Plain/GateUp: batch slots (z); WeightedSum: experts summed.
    slots: usize,
    /// Floats between slots' inputs (a multiple of 4).
    x_stride: usize,
    y_stride: usize,
    y_off: usize,
}

fn plain(fmt: Format, cols: usize, rows: usize) -> Case {
    Case {
        fmt,
        mode: MatvecMode::Plain,
        norm: false,
        accum: false,
        cols,
        rows,
        n_mat: 1,
        slots: 1,
        x_stride: 0,
        y_stride: 0,
        y_off: 0,
    }
}

/// y as the kernel must leave it, and which elements it writes.
fn oracle(
    c: &Case,
    deq: &[f32],
    x: &[f32],
    g: &[f32],
    y0: &[f32],
    sel: &[u32],
    sel_w: &[f32],
) -> (Vec<f32>, Vec<bool>) {
    let mat_rows = if c.mode == MatvecMode::GateUp {
        2 * c.rows
    } else {
        c.rows
    };
    let row = |m: usize, r: usize| &deq[(m * mat_rows + r) * c.cols..][..c.cols];
    let xn = c
        .norm
        .then(|| cpu::rms_norm(&x[..c.cols], &g[..c.cols], EPS));
    let xin = |off: usize| -> &[f32] {
        match &xn {
            Some(v) => v,
            None => &x[off..off + c.cols],
        }
    };
    let mut out: Vec<(usize, f64)> = Vec::new();
    match c.mode {
        MatvecMode::Plain => {
            for z in 0..c.slots {
                for r in 0..c.rows {
                    out.push((
                        c.y_off + z * c.y_stride + r,
                        common::dot64(row(z, r), xin(z * c.x_stride)),
                    ));
                }
            }
        }
        MatvecMode::GateUp => {
            for (z, &e) in sel.iter().enumerate().take(c.slots) {
                for r in 0..c.rows {
                    let gate = common::dot64(row(e as usize, r), xin(0));
                    let up = common::dot64(row(e as usize, c.rows + r), xin(0));
                    out.push((
                        z * c.y_stride + c.y_off + r,
                        gate / (1.0 + (-gate).exp()) * up,
                    ));
                }
            }
        }
        MatvecMode::WeightedSum => {
            for r in 0..c.rows {
                let s = (0..c.slots)
                    .map(|k| {
                        sel_w[k] as f64
                            * common::dot64(row(sel[k] as usize, r), xin(k * c.x_stride))
                    })
                    .sum::<f64>()
                    + g[c.y_off + r] as f64;
                out.push((c.y_off + r, s));
            }
        }
    }
    common::expect(&format!("{c:?}"), y0, out, c.accum)
}

/// Run case `c` in both variants against the oracle; returns the worst error.
fn check(c: &Case, seed: u64) -> f64 {
    assert!(
        c.x_stride % 4 == 0 && (c.n_mat == 1 || c.mode != MatvecMode::Plain || c.n_mat == c.slots)
    );
    let gpu = common::gpu();
    let mat_rows = if c.mode == MatvecMode::GateUp {
        2 * c.rows
    } else {
        c.rows
    };
    let w = common::randn(c.n_mat * mat_rows * c.cols, 0.02, seed);
    let (deq, wbufs) = common::upload(c.fmt, &w);
    let x_len = match c.mode {
        MatvecMode::GateUp => c.cols,
        _ => (c.slots - 1) * c.x_stride + c.cols,
    };
    // Small inputs under NORM, so that eps matters (mean x² ≈ eps).
    let x_std = if c.norm { 0.003 } else { 1.0 };
    let x = common::randn(x_len.next_multiple_of(4), x_std, seed + 1);
    // The norm weight, or (WeightedSum) the vector added to every output
    // row: long enough for both.
    let g_len = c.cols.max(c.y_off + c.rows).next_multiple_of(4);
    let g: Vec<f32> = common::randn(g_len, 0.1, seed + 2)
        .iter()
        .map(|v| 1.0 + v)
        .collect();
    // Selected matrices: distinct where n_mat allows, first and last included.
    let sel: Vec<u32> = (0..c.slots.max(4))
        .map(|k| ((c.n_mat - 1 + 3 * k) % c.n_mat) as u32)
        .collect();
    let sel_w: Vec<f32> = common::randn(c.slots.max(4), 0.3, seed + 3)
        .iter()
        .map(|v| 0.5 + v)
        .collect();
    let y_len = match c.mode {
        MatvecMode::WeightedSum => c.y_off + c.rows,
        _ => c.y_off + (c.slots - 1) * c.y_stride + c.rows,
    } + TAIL;
    // ACCUM adds to random values (a residual); otherwise y is poisoned.
    let y0 = if c.accum {
        common::randn(y_len, 1.0, seed + 4)
    } else {
        vec![f32::NAN; y_len]
    };
    let (want, written) = oracle(c, &deq, &x, &g, &y0, &sel, &sel_w);
    let units = (c.cols / 32) as u32;
    let params = MatvecParams {
        rows: c.rows as u32,
        units,
        mat_units: (mat_rows as u32) * units,
        n_slot: c.slots as u32,
        x_stride: (c.x_stride / 4) as u32,
        y_stride: c.y_stride as u32,
        y_off: c.y_off as u32,
        eps: EPS,
        _pad: [0; 4],
    };
    let spec = MatvecSpec {
        format: c.fmt,
        mode: c.mode,
        accum: c.accum,
        params,
        slots: c.slots as u32,
    };
    let pb = gpu.uniform("p", &params);
    let xb = gpu.storage("x", bytemuck::cast_slice(&x)).unwrap();
    let gb = gpu.storage("g", bytemuck::cast_slice(&g)).unwrap();
    let sb = gpu.storage("sel", bytemuck::cast_slice(&sel)).unwrap();
    let swb = gpu.storage("sel_w", bytemuck::cast_slice(&sel_w)).unwrap();
    let mut worst = 0f64;
    for pipes in common::pipelines() {
        let yb = gpu.storage("y", bytemuck::cast_slice(&y0)).unwrap();
        let bufs = MatvecBuffers {
            params: &pb,
            x: &xb,
            g: match (c.norm, c.mode) {
                (true, _) => MatvecSide::Norm(&gb),
                (false, MatvecMode::WeightedSum) => MatvecSide::Add(&gb),
                (false, _) => MatvecSide::Unread(&gb),
            },
            y: &yb,
            sel: &sb,
            sel_w: &swb,
            weights: &wbufs,
        };
        ops::run(gpu, &[ops::matvec(gpu, pipes, &spec, &bufs).unwrap()]).unwrap();
        let y = gpu.read_f32(&yb, y_len).unwrap();
        let tag = format!("{:?} {c:?} (TPR {})", pipes.variant, tpr(c));
        worst = worst.max(common::compare(&tag, &y, &want, &written, MATVEC_TOL));
    }
    worst
}

/// The invocations per row ops::matvec gives case `c`.
fn tpr(c: &Case) -> u32 {
    ops::matvec_tpr(c.mode, c.cols as u32 / 32, c.rows as u32, c.slots as u32)
}

fn check_all(name: &str, cases: &[Case]) {
    let mut worst = 0f64;
    for (i, c) in cases.iter().enumerate() {
        worst = worst.max(check(c, 1000 * i as u64 + 17));
    }
    eprintln!(
        "{name}: {} cases, worst rel L2 {worst:.2e} (tolerance {MATVEC_TOL:.0e})",
        cases.len()
    );
}

#[test]
fn matvec_every_format_plain() {
    use Format::*;
    // (cols, rows): GLM-4.7-Flash matrices, then short rows (TPR 4, 8, 16:
    // lavapipe's subgroups have 8 lanes, so TPR <= 8 takes the butterfly
    // path of the subgroup prelude and larger TPRs its shared-memory path)
    // and row counts that leave a workgroup partly idle.
    let shapes = [
        (F32, 2048, 64), // the MoE router
        (F32, 96, 5),
        (Q4_0, 2048, 768),  // q_a
        (Q4_0, 5120, 2048), // attn_output
        (Q4_0, 96, 13),     // 3 units: TPR 4
        (Q4_0, 32, 1),      // 1 unit: TPR 4
        (Q4_0, 192, 9),     // 6 units: TPR 4
        (Q4_0, 512, 40),    // TPR 16
        (Q8_0, 2048, 576),  // kv_a_mqa
        (Q8_0, 192, 512),   // one head of k_b: TPR 4
        (Q8_0, 512, 256),   // one head of v_b
        (Q8_0, 32, 9),
        (Q8_0, 96, 1),
        (Q5K, 2048, 1024),
        (Q5K, 256, 13), // one super-block: TPR 8
        (Q5K, 768, 9),  // 24 units: TPR 16
        (Q5K, 512, 3),
        (Q6K, 1024, 2048),
        (Q6K, 2048, 3000), // a slice of the output head
        (Q6K, 1536, 64),   // experts' down width
        (Q6K, 256, 9),
        (Q6K, 512, 13),
        (Q4K, 2048, 768),  // q_a in a Q4_K_M file
        (Q4K, 2048, 1536), // an expert's gate
        (Q4K, 256, 13),    // one super-block: TPR 8
        (Q4K, 768, 9),     // 24 units: TPR 16
        (Q4K, 512, 3),
        (Q5_0, 192, 512), // one head of k_b in a Q4_K_M file: TPR 4
        (Q5_0, 32, 9),
        (Q5_0, 96, 1),
        (Q5_0, 512, 40),
        (F16, 2048, 100), // a slice of an F16 file's output head
        (F16, 96, 5),
        (F16, 32, 2),
        (BF16, 2048, 64),
        (BF16, 160, 7),
        (Q4_1, 2048, 64),
        (Q4_1, 96, 5),
        (Q5_1, 192, 512), // one head of k_b in a Q5_K_M file
        (Q5_1, 32, 3),
        (Q2K, 2048, 64), // Q2_K / Q3_K / IQ4_XS mixes' expert gate/up
        (Q2K, 256, 9),
        (Q3K, 2048, 64),
        (Q3K, 768, 5),
        (IQ4XS, 2048, 64),
        (IQ4XS, 512, 3),
        (IQ4NL, 192, 64), // k_b rows in an IQ4_XS file
        (IQ4NL, 96, 5),
        // at least ops::MATVEC_NARROW_GROUPS rows: TPR 16 (q_b)
        (Q4_0, 768, 5120),
        (Q6K, 2048, 4101),
        // at least ops::MATVEC_HEAD_GROUPS rows: TPR 4 (the output head)
        (Q6K, 512, 32_800),
    ];
    let cases: Vec<Case> = shapes.iter().map(|&(f, c, r)| plain(f, c, r)).collect();
    let tprs: std::collections::BTreeSet<u32> = cases.iter().map(tpr).collect();
    assert_eq!(
        tprs.into_iter().collect::<Vec<_>>(),
        [4, 8, 16, 32],
        "every TPR is exercised"
    );
    for narrow in [16, 4] {
        assert!(
            cases
                .iter()
                .any(|c| c.rows >= ops::MATVEC_NARROW_GROUPS as usize
                    && c.cols / 32 > narrow as usize
                    && tpr(c) == narrow),
            "a narrow matvec (TPR {narrow}) of rows longer than its lanes is exercised"
        );
    }
    check_all("matvec plain", &cases);
}

#[test]
fn matvec_norm_and_accum() {
    use Format::*;
    let cases = [
        // attn_norm fused into q_a and kv_a_mqa, q_a_norm into q_b
        Case {
            norm: true,
            ..plain(Q4_0, 2048, 768)
        },
        Case {
            norm: true,
            ..plain(Q8_0, 2048, 576)
        },
        Case {
            norm: true,
            ..plain(Q5K, 768, 9)
        },
        Case {
            norm: true,
            ..plain(Q4_0, 96, 13)
        },
        Case {
            norm: true,
            ..plain(Q4K, 2048, 576)
        },
        Case {
            norm: true,
            ..plain(F16, 512, 9)
        },
        Case {
            norm: true,
            accum: true,
            ..plain(Q4_1, 256, 9)
        },
        Case {
            accum: true,
            ..plain(Q4K, 5120, 64)
        },
        Case {
            accum: true,
            y_off: 2,
            ..plain(Q5_0, 96, 11)
        },
        // attn_output and dense down + residual; one into the middle of y
        Case {
            accum: true,
            ..plain(Q4_0, 5120, 2048)
        },
        Case {
            accum: true,
            ..plain(Q6K, 1536, 64)
        },
        Case {
            accum: true,
            y_off: 5,
            ..plain(Q8_0, 64, 9)
        },
        Case {
            norm: true,
            accum: true,
            y_off: 3,
            ..plain(Q4_0, 256, 33)
        },
        Case {
            norm: true,
            ..plain(Q3K, 512, 9)
        },
        Case {
            accum: true,
            y_off: 1,
            ..plain(IQ4NL, 64, 7)
        },
        Case {
            norm: true,
            accum: true,
            ..plain(Q2K, 256, 5)
        },
        Case {
            accum: true,
            ..plain(IQ4XS, 256, 5)
        },
        // x staged in three chunks (matvec.wgsl XCHUNK = 64 units), the
        // last one partial: Σx² and the norm weight across chunks
        Case {
            norm: true,
            ..plain(Q4_0, 5152, 37)
        },
    ];
    check_all("matvec norm/accum", &cases);
}

#[test]
fn matvec_batched_heads() {
    use Format::*;
    let heads = |f, cols, rows, n: usize, x_stride, y_stride| Case {
        n_mat: n,
        slots: n,
        x_stride,
        y_stride,
        ..plain(f, cols, rows)
    };
    let cases = [
        // k_b: each head's q_nope (192 of its 256 q floats) → 512 latent
        heads(Q8_0, 192, 512, 20, 256, 512),
        // v_b: each head's 512 latent → 256
        heads(Q8_0, 512, 256, 20, 512, 256),
        // the tiny model's k_b, with gaps between outputs that must stay NaN
        Case {
            y_off: 3,
            ..heads(Q4_0, 32, 64, 4, 48, 70)
        },
        heads(Q5K, 256, 9, 3, 260, 9),
        // a Q4_K_M file's k_b and v_b
        heads(Q5_0, 192, 512, 20, 256, 512),
        heads(Q6K, 512, 256, 4, 512, 256),
        heads(BF16, 64, 9, 3, 72, 11),
        heads(Q5_1, 192, 512, 3, 256, 512),
        heads(IQ4NL, 192, 64, 3, 256, 64),
        heads(Q3K, 256, 9, 3, 260, 11),
        heads(Q2K, 256, 5, 2, 256, 5),
        heads(IQ4XS, 256, 5, 2, 256, 7),
    ];
    check_all("matvec batched", &cases);
}

#[test]
fn matvec_gate_up() {
    use Format::*;
    let experts = |f, cols, rows, n_mat, slots, y_stride| Case {
        mode: MatvecMode::GateUp,
        n_mat,
        slots,
        y_stride,
        ..plain(f, cols, rows)
    };
    let cases = [
        // routed experts: 4 of 5 selected, 1536 rows of gate and of up each
        experts(Q4_0, 2048, 1536, 5, 4, 1536),
        // dense / shared FFN: one matrix, ffn_norm fused
        Case {
            norm: true,
            ..experts(Q8_0, 256, 512, 1, 1, 0)
        },
        // odd sizes, outputs with gaps and an offset
        Case {
            y_off: 3,
            ..experts(Q4_0, 96, 13, 7, 4, 20)
        },
        experts(Q6K, 256, 256, 4, 4, 256),
        experts(Q4K, 2048, 1536, 5, 4, 1536),
        Case {
            norm: true,
            ..experts(Q4K, 512, 96, 1, 1, 0)
        },
        experts(Q5_0, 96, 13, 3, 2, 20),
        experts(F16, 64, 9, 3, 2, 9),
        experts(Q4_1, 128, 13, 3, 2, 13),
        experts(Q2K, 256, 13, 3, 2, 13),
        experts(Q3K, 512, 9, 3, 2, 9),
        experts(IQ4XS, 256, 9, 3, 2, 9),
        experts(IQ4NL, 64, 9, 3, 2, 9),
        // x longer than one staged chunk (96 units: 80 + 16), ffn_norm fused
        Case {
            norm: true,
            ..experts(Q4_0, 3072, 40, 3, 2, 40)
        },
    ];
    check_all("matvec gate+up", &cases);
}

#[test]
fn matvec_weighted_sum() {
    use Format::*;
    let down = |f, cols, rows, n_mat, slots| Case {
        mode: MatvecMode::WeightedSum,
        n_mat,
        slots,
        x_stride: cols,
        ..plain(f, cols, rows)
    };
    let cases = [
        // experts' down + weighted combine + residual
        Case {
            accum: true,
            ..down(Q4_0, 1536, 2048, 5, 4)
        },
        Case {
            accum: true,
            ..down(Q5K, 256, 256, 8, 4)
        },
        Case {
            y_off: 2,
            ..down(Q8_0, 32, 9, 7, 4)
        },
        Case {
            x_stride: 100,
            ..down(Q6K, 256, 13, 3, 2)
        },
        Case {
            accum: true,
            ..down(Q4K, 1536, 2048, 5, 4)
        },
        Case {
            y_off: 1,
            ..down(Q5_0, 64, 9, 4, 3)
        },
        down(F16, 96, 13, 3, 2),
        down(BF16, 32, 5, 3, 3),
        down(Q5_1, 96, 9, 4, 3),
        down(Q2K, 256, 9, 3, 2),
        down(Q3K, 256, 9, 4, 3),
        down(IQ4XS, 512, 5, 3, 2),
        down(IQ4NL, 64, 9, 4, 3),
        // each slot's x in two staged chunks (85 units: 80 + 5)
        down(Q8_0, 2720, 21, 4, 3),
    ];
    check_all("matvec weighted sum", &cases);
}

/// The kernel table build.rs generates from the WGSL: bindings in slot
/// order with the uniform params first, names unique, every host-set
/// override with at least one value.
#[test]
fn kernel_table_is_consistent() {
    let mut names = std::collections::HashSet::new();
    for k in Kernel::ALL {
        let info = k.info();
        assert!(names.insert(info.name), "{} twice", info.name);
        let slots: Vec<u32> = info.bindings.iter().map(|b| b.slot).collect();
        assert!(
            slots.windows(2).all(|w| w[0] < w[1]),
            "{}: {slots:?}",
            info.name
        );
        let first = &info.bindings[0];
        assert_eq!(
            (first.slot, first.name, first.bind),
            (0, "p", Bind::Uniform)
        );
        assert!(info.overrides.iter().all(|(_, v)| !v.is_empty()));
        let params = info.structs.iter().find(|s| s.wgsl == "Params");
        assert!(params.is_some_and(|s| s.size % 16 == 0), "{}", info.name);
    }
}

/// Buffers or override values that do not fit the kernel are an error when
/// the dispatch is built, never a wrong pipeline.
#[test]
fn dispatch_rejects_what_the_table_does_not_allow() {
    let gpu = common::gpu();
    let pipes = &common::pipelines()[0];
    let b = gpu.scratch_f32("any", &[64]).unwrap();
    let norm = RmsNormBindings {
        p: &b,
        x: &b,
        g: &b,
        y: &b,
    };
    let err = |r: glmw::Result<Dispatch>| r.err().map(|e| e.to_string()).unwrap_or_default();
    let mv = Kernel::Matvec(Format::F32);
    let wrong_kernel = Dispatch::new(gpu, pipes, mv, &norm, [1, 1, 1]);
    assert!(err(wrong_kernel).contains("rms_norm.wgsl"));
    let two = [b.clone(), b.clone()];
    let o = ops::MatvecOverrides {
        mode: 0,
        norm: false,
        accum: false,
        tpr: 32,
        combine: false,
    };
    let (pb, yb) = (
        gpu.uniform("p", &MatvecParams::default()),
        gpu.scratch_f32("y", &[64]).unwrap(),
    );
    let mut bufs = ops::MatvecBindings {
        p: &pb,
        x: &b,
        g: &b,
        y: &yb,
        sel: &b,
        sel_w: &b,
        weights: &two,
    };
    let wrong_count = Dispatch::with(gpu, pipes, mv, &o, &bufs, [1, 1, 1]);
    assert!(err(wrong_count).contains("weight arrays"));
    bufs.weights = &two[..1];
    assert!(err(Dispatch::new(gpu, pipes, mv, &bufs, [1, 1, 1])).contains("overrides"));
    let untranslated = ops::MatvecOverrides { tpr: 64, ..o };
    let r = Dispatch::with(gpu, pipes, mv, &untranslated, &bufs, [1, 1, 1]);
    assert!(err(r).contains("TPR=64"));
    assert!(Dispatch::with(gpu, pipes, mv, &o, &bufs, [1, 1, 1]).is_ok());
}

/// Uploads of 32 MiB and more are written from several threads: every
/// byte arrives, at every slice boundary.
#[test]
fn large_storage_uploads_arrive_whole() {
    let gpu = common::gpu();
    let n = (33 << 20) + 12;
    let data: Vec<u8> = (0..n).map(|i| (i * 131 + i / 7919) as u8).collect();
    let b = gpu.storage("large", &data).unwrap();
    assert_eq!(gpu.read(&b, n as u64).unwrap(), data);
}
