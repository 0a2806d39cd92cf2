//! The prefill kernels against f64 CPU oracles, in both kernel variants
//! (subgroup and shared-memory): matmul.wgsl in every weight format over
//! dense tiles (partial row workgroups, a partial last tile), with GATE_UP
//! and ACCUM, over batched heads, and routed through moe_group.wgsl's
//! tiles (then moe_sum.wgsl), as src/gpu/plan/prefill.rs uses them.
//! Matmuls are judged against the dequantized weights, so quantization
//! error is not the kernel's. Outputs are poisoned with NaN (ACCUM ones hold
//! random values) and every element a dispatch must not write, rows past
//! the chunk's tokens included, is checked to be left bit for bit.
//! Dense cases run in the plan's tiles (64) and in tiles of 8 (partly
//! empty tiles, as routed experts' often are), and the routed pipelines'
//! shapes on the same cases: matmul.wgsl's tile32 (SHORT, every tile
//! flagged short) in tiles of 32 and of 8. matmul_coop.wgsl (cooperative
//! matrices) runs the same cases where the adapter offers them, its short
//! tiles (tile32) included; elsewhere each test says it skipped it.

mod common;

use glmw::gpu::ops::{
    self, Dispatch, MatmulBindings, MatmulCoopBindings, MatmulCoopOverrides, MatmulOverrides,
    MatmulParams, MATMUL_COOP_TILE, MATMUL_SHORT_TILE, MATMUL_TILE,
};
use glmw::gpu::{Format, Kernel, Pipelines};

/// Matmul vs f64 dot products over the dequantized weights: f32
/// accumulation over up to 512 terms (~1e-7 in practice); a wrong weight,
/// scale, x row or output row anywhere gives ~1e-2 or more. Same bound as
/// the matvecs (tests/gpu_kernels.rs MATVEC_TOL).
const MATMUL_TOL: f64 = 1e-5;

/// matmul_coop vs f64: weights and x are rounded to f16 (relative error
/// <= 2^-11 each, so <= ~2^-10 per product), then summed in f32. The
/// roundings are independent and of either sign, so the error of a sum
/// grows like its value (sqrt of the terms): rel L2 ~ 2^-11·sqrt(2/3) ~
/// 4e-4, about twice that through silu(gate)·up. 3e-3 leaves room for
/// that; a wrong row, scale, tile column or transposed fragment gives 1e-2
/// to 1.
const COOP_TOL: f64 = 3e-3;

/// moe_sum vs f64: n_used products added to a residual, one f32 rounding
/// each.
const MOE_SUM_TOL: f64 = 1e-6;

/// Output rows (tokens or assignments) past the chunk's that must stay as
/// they were.
const EXTRA_ROWS: usize = 5;

/// Extra poisoned floats after every output, to catch overruns.
const TAIL: usize = 7;

/// Tiles shorter than the kernels' `MATMUL_TILE` and `MATMUL_COOP_TILE`
/// (each token slot past a tile's count is computed and must not be
/// written).
const SHORT_TILE: u32 = 8;

/// One matmul dispatch to check: shapes and layout (floats, not vec4s).
#[derive(Clone, Copy, Debug)]
struct Case {
    fmt: Format,
    gate_up: bool,
    accum: bool,
    cols: usize,
    /// Output rows per matrix (GATE_UP: rows of each half).
    rows: usize,
    /// Matrices stacked in the weight buffer (experts or heads).
    n_mat: usize,
    /// Rows of y written: tokens (dense) or assignments (routed).
    n_rows: usize,
    /// Batched heads (grid z).
    heads: usize,
    /// Split-K: each row of the matrix holds `split` × cols weights and
    /// head z multiplies its z-th run of cols (x_stride = cols) into a
    /// plane of its own (y_stride apart); 1: heads are whole matrices.
    split: usize,
    x_div: usize,
    x_tok: usize,
    y_tok: usize,
    x_stride: usize,
    y_stride: usize,
    y_off: usize,
}

/// A dense matmul of `n_tok` rows of x, packed.
fn dense(fmt: Format, cols: usize, rows: usize, n_tok: usize) -> Case {
    Case {
        fmt,
        gate_up: false,
        accum: false,
        cols,
        rows,
        n_mat: 1,
        n_rows: n_tok,
        heads: 1,
        split: 1,
        x_div: 1,
        x_tok: cols,
        y_tok: rows,
        x_stride: 0,
        y_stride: 0,
        y_off: 0,
    }
}

impl Case {
    fn mat_rows(&self) -> usize {
        if self.gate_up {
            2 * self.rows
        } else {
            self.rows
        }
    }

    /// Floats of x the case reads.
    fn x_len(&self) -> usize {
        let last = (self.n_rows - 1) / self.x_div;
        (last * self.x_tok + (self.heads - 1) * self.x_stride + self.cols).next_multiple_of(4)
    }

    /// Floats of y, with EXTRA_ROWS rows and TAIL floats that must stay.
    fn y_len(&self) -> usize {
        (self.n_rows + EXTRA_ROWS - 1) * self.y_tok
            + (self.heads - 1) * self.y_stride
            + self.y_off
            + self.rows
            + TAIL
    }
}

/// Where a matmul's rows of x come from: `mats[a]` is the matrix of
/// assignment a (dense: all 0), and `tiles`/`order` the buffers the kernel
/// reads, launched as `n_tiles` tiles.
struct Tiles {
    mats: Vec<u32>,
    tiles: wgpu::Buffer,
    order: wgpu::Buffer,
    n_tiles: u32,
    /// The routed pipelines: matmul_coop with SHORT (some tiles may be
    /// short), matmul.wgsl with SHORT (tile32 for the tiles flagged short).
    /// Without GATE_UP they write y's rows at tile slots.
    short: bool,
    /// Row a's slot (tile t's j-th row at t·SLOT + j): where a routed
    /// product that is not gate+up writes it (`ops::routed_slot_rows`).
    slots: Vec<u32>,
}

/// Rows of a routed tile's slot of y: the kernels' tile (both 64).
const SLOT: usize = MATMUL_TILE as usize;

/// The host-written dense tiles of prefill.rs (`write_chunk`) over an
/// identity order as long as a whole last tile (rows past `n_tok` exist
/// in `order`, as in a chunk shorter than ubatch); with `short`, every
/// tile flagged short (matmul_coop's tile32, full ones too).
fn dense_tiles(n_tok: usize, (tile, short): (u32, bool)) -> Tiles {
    let n = n_tok as u32;
    let mut tiles = ops::dense_tiles(n, tile);
    for t in tiles.iter_mut() {
        t[3] = short as u32;
    }
    let ids: Vec<u32> = (0..n.next_multiple_of(tile) + EXTRA_ROWS as u32).collect();
    let slots = (0..n).map(|a| a / tile * SLOT as u32 + a % tile).collect();
    let gpu = common::gpu();
    Tiles {
        mats: vec![0; n_tok],
        tiles: gpu.storage("tiles", bytemuck::cast_slice(&tiles)).unwrap(),
        order: gpu.storage("order", bytemuck::cast_slice(&ids)).unwrap(),
        n_tiles: tiles.len() as u32,
        short,
        slots,
    }
}

/// y as the matmul must leave it, and which elements it writes: row a of
/// the case at y's row `rows[a]`.
fn oracle(
    c: &Case,
    deq: &[f32],
    (mats, rows): (&[u32], &[usize]),
    x: &[f32],
    y0: &[f32],
) -> (Vec<f32>, Vec<bool>) {
    let mat_rows = c.mat_rows();
    let row_len = c.cols * c.split;
    // Row r of matrix m, the cols weights from column k0.
    let row = |m: usize, r: usize, k0: usize| &deq[(m * mat_rows + r) * row_len + k0..][..c.cols];
    let mut out = Vec::new();
    for (a, &m0) in mats.iter().enumerate() {
        for z in 0..c.heads {
            let (m, k0) = match c.split > 1 {
                true => (m0 as usize, z * c.cols),
                false => (m0 as usize + z, 0),
            };
            let xo = (a / c.x_div) * c.x_tok + z * c.x_stride;
            let xr = &x[xo..xo + c.cols];
            for r in 0..c.rows {
                let mut v = common::dot64(row(m, r, k0), xr);
                if c.gate_up {
                    v = v / (1.0 + (-v).exp()) * common::dot64(row(m, c.rows + r, k0), xr);
                }
                out.push((rows[a] * c.y_tok + z * c.y_stride + c.y_off + r, v));
            }
        }
    }
    common::expect(&format!("{c:?}"), y0, out, c.accum)
}

/// Run case `c` in `pipes` (matmul_coop.wgsl where `coop`) on weights
/// (`deq`, `wbufs`), x and initial y `y0`, through `t`; check it against
/// the oracle. Where `t` is routed and `c` not gate+up, y's rows are tile
/// slots: y0's values repeat over as many rows as the slots need, and a
/// slot's rows past its tile's count are scratch (matmul_coop stores the
/// whole slot). Returns the error and the y it computed.
fn check(
    coop: bool,
    pipes: &Pipelines,
    c: &Case,
    (deq, wbufs): &(Vec<f32>, Vec<wgpu::Buffer>),
    t: &Tiles,
    x: &[f32],
    y0: &[f32],
) -> (f64, Vec<f32>) {
    assert!(c.x_tok % 4 == 0 && c.x_stride % 4 == 0 && c.cols % 32 == 0);
    assert_eq!(t.mats.len(), c.n_rows);
    let gpu = common::gpu();
    let slotted = t.short && !c.gate_up;
    let rows: Vec<usize> = match slotted {
        true => t.slots.iter().map(|&r| r as usize).collect(),
        false => (0..c.n_rows).collect(),
    };
    let y0: Vec<f32> = match slotted {
        true => {
            let n_slots = t.n_tiles as usize * SLOT;
            let len = c.y_len() + (n_slots - c.n_rows.min(n_slots)) * c.y_tok;
            (0..len).map(|i| y0[i % y0.len()]).collect()
        }
        false => y0.to_vec(),
    };
    let y0 = &y0[..];
    // Slot rows no row of the case lands in.
    let scratch: Vec<usize> = match slotted {
        true => {
            let used: std::collections::HashSet<usize> = rows.iter().copied().collect();
            (0..t.n_tiles as usize * SLOT)
                .filter(|r| !used.contains(r))
                .collect()
        }
        false => Vec::new(),
    };
    let (want, written) = oracle(c, deq, (&t.mats, &rows), x, y0);
    let units = (c.cols / 32) as u32;
    let row_units = (c.cols * c.split / 32) as u32;
    let params = MatmulParams {
        rows: c.rows as u32,
        units,
        // split-K: head z's part starts z parts into each row
        mat_units: match c.split > 1 {
            true => units,
            false => (c.mat_rows() as u32) * units,
        },
        x_div: c.x_div as u32,
        x_tok: (c.x_tok / 4) as u32,
        y_tok: c.y_tok as u32,
        x_stride: (c.x_stride / 4) as u32,
        y_stride: c.y_stride as u32,
        y_off: c.y_off as u32,
        row_units,
        _pad: [0; 2],
    };
    let pb = gpu.uniform("p", &params);
    let xb = gpu.storage("x", bytemuck::cast_slice(x)).unwrap();
    let (gate_up, accum) = (c.gate_up, c.accum);
    // matmul_coop runs with WIDE as the adapter needs it, and with WIDE on
    // (the path for subgroups wider than 32) where the adapter's is off.
    let wides: &[bool] = match (coop, ops::coop_wide(gpu)) {
        (false, _) => &[false],
        (true, true) => &[true],
        (true, false) => &[false, true],
    };
    let mut out = (0f64, Vec::new());
    for &wide in wides {
        let yb = gpu.storage("y", bytemuck::cast_slice(y0)).unwrap();
        let bufs = MatmulBindings {
            p: &pb,
            x: &xb,
            y: &yb,
            tiles: &t.tiles,
            order: &t.order,
            weights: wbufs,
        };
        let (mut d, rows, tol) = if coop {
            let b = MatmulCoopBindings {
                p: bufs.p,
                x: bufs.x,
                y: bufs.y,
                tiles: bufs.tiles,
                order: bufs.order,
                weights: bufs.weights,
            };
            let o = MatmulCoopOverrides {
                gate_up,
                accum,
                wide,
                short: t.short,
            };
            let d = ops::matmul_coop(gpu, pipes, c.fmt, o, &b).unwrap();
            (d, ops::matmul_coop_rows(gate_up), COOP_TOL)
        } else {
            let o = MatmulOverrides {
                gate_up,
                accum,
                short: t.short,
            };
            let d = ops::matmul(gpu, pipes, c.fmt, o, &bufs).unwrap();
            (d, ops::matmul_rows(gate_up), MATMUL_TOL)
        };
        d.workgroups = [(c.rows as u32).div_ceil(rows), t.n_tiles, c.heads as u32];
        ops::run(gpu, &[d]).unwrap();
        let mut y = gpu.read_f32(&yb, y0.len()).unwrap();
        for &s in &scratch {
            for z in 0..c.heads {
                let o = s * c.y_tok + z * c.y_stride + c.y_off;
                y[o..o + c.rows].copy_from_slice(&want[o..o + c.rows]);
            }
        }
        let tag = format!("{:?} coop={coop} wide={wide} {c:?}", pipes.variant);
        let e = common::compare(&tag, &y, &want, &written, tol);
        if out.1.is_empty() || e > out.0 {
            out = (e, y);
        }
    }
    out
}

/// Whether the adapter runs matmul_coop.wgsl; where not, say so (a test
/// that checks it never passes silently without it).
fn coop(test: &str) -> bool {
    let gpu = common::gpu();
    if !gpu.caps.coop {
        eprintln!(
            "{test}: matmul_coop skipped: adapter {} offers no 16x16 f16 cooperative matrix",
            gpu.info.name
        );
    }
    gpu.caps.coop
}

/// Random weights for `c`, quantized and uploaded.
fn weights(c: &Case, seed: u64) -> (Vec<f32>, Vec<wgpu::Buffer>) {
    let w = common::randn(c.n_mat * c.mat_rows() * c.cols * c.split, 0.02, seed);
    common::upload(c.fmt, &w)
}

/// The dense cases' tiles for a kernel whose dense pipelines take tiles of
/// `full` and whose routed ones (`Tiles::short`: matmul.wgsl's tile32,
/// matmul_coop's tile32) tiles of `narrow`: each pipeline in its own tiles
/// and in tiles of 8.
fn shapes(n_tok: usize, full: u32, narrow: u32) -> [Tiles; 4] {
    let shapes = [
        (full, false),
        (SHORT_TILE, false),
        (narrow, true),
        (SHORT_TILE, true),
    ];
    shapes.map(|n| dense_tiles(n_tok, n))
}

/// Dense cases in both variants: random x, y poisoned (ACCUM: random).
fn check_dense(name: &str, cases: &[Case]) {
    let (mut worst, mut worst_coop) = (0f64, 0f64);
    let with_coop = coop(name);
    for (i, c) in cases.iter().enumerate() {
        let seed = 1000 * i as u64 + 31;
        let w = weights(c, seed);
        let x = common::randn(c.x_len(), 1.0, seed + 1);
        let y0 = if c.accum {
            common::randn(c.y_len(), 1.0, seed + 2)
        } else {
            vec![f32::NAN; c.y_len()]
        };
        for t in shapes(c.n_rows, MATMUL_TILE, MATMUL_SHORT_TILE) {
            for pipes in common::pipelines() {
                worst = worst.max(check(false, pipes, c, &w, &t, &x, &y0).0);
            }
        }
        if with_coop {
            for t in shapes(c.n_rows, MATMUL_COOP_TILE, ops::matmul_small_tile(true)) {
                let e = check(true, &common::pipelines()[0], c, &w, &t, &x, &y0).0;
                worst_coop = worst_coop.max(e);
            }
        }
    }
    eprintln!(
        "{name}: {} cases, worst rel L2 {worst:.2e} (tolerance {MATMUL_TOL:.0e}); \
         matmul_coop {worst_coop:.2e} (tolerance {COOP_TOL:.0e}, run: {with_coop})",
        cases.len()
    );
}

#[test]
fn matmul_every_format_dense() {
    use Format::*;
    // 70 rows: a second row workgroup with 6 live rows (a third with
    // GATE_UP); 19 tokens: one partial tile (or tiles of 8, 8 and 3).
    let mut cases: Vec<Case> = [
        (F32, 96),
        (F16, 160),
        (BF16, 64),
        (Q4_0, 160),
        (Q4_1, 128),
        (Q5_0, 288),
        (Q5_1, 192),
        (Q8_0, 288),
        (Q4K, 256),
        (Q5K, 256),
        (Q6K, 512),
        (Q2K, 256),
        (Q3K, 512),
        (IQ4NL, 160),
        (IQ4XS, 256),
    ]
    .iter()
    .map(|&(f, cols)| dense(f, cols, 70, 19))
    .collect();
    cases.extend([
        // one token; exactly one tile; wide x rows, gaps and an offset in y
        // (a row part of a split matrix) that must stay NaN
        dense(Q4_0, 64, 9, 1),
        dense(Q6K, 256, 64, 32),
        // tiles of 32, 32 and 6 (tile32's)
        dense(Q4_0, 160, 70, 70),
        // tiles of 64, 64 and 22 (matmul_coop's)
        dense(Q4_0, 96, 70, 150),
        Case {
            x_tok: 96 + 8,
            y_tok: 70 + 11,
            y_off: 4,
            ..dense(Q8_0, 96, 70, 19)
        },
        Case {
            x_tok: 256 + 4,
            y_tok: 130,
            y_off: 1,
            ..dense(Q5K, 256, 129, 17)
        },
        // a Q4_K_M file's q_a at prefill width
        dense(Q4K, 2048, 70, 19),
        // whole row workgroups by whole 64-token tiles, which matmul_coop
        // stores straight from its accumulators into y (the first two
        // tiles; the third, of 22 tokens, through its epilogue), with
        // aligned gaps and offset; unaligned rows of y take the epilogue
        dense(Q4_0, 96, 256, 150),
        Case {
            y_tok: 384 + 16,
            y_off: 8,
            ..dense(Q8_0, 64, 384, 128)
        },
        Case {
            y_tok: 258,
            ..dense(Q4_0, 64, 256, 64)
        },
        Case {
            x_tok: 192 + 4,
            y_tok: 75,
            y_off: 3,
            ..dense(Q5_0, 192, 70, 9)
        },
    ]);
    check_dense("matmul dense", &cases);
}

#[test]
fn matmul_gate_up_and_accum() {
    use Format::*;
    let gate_up = |f, cols, rows, n_tok| Case {
        gate_up: true,
        ..dense(f, cols, rows, n_tok)
    };
    let accum = |f, cols, rows, n_tok| Case {
        accum: true,
        ..dense(f, cols, rows, n_tok)
    };
    let cases = [
        // dense / shared FFN gate+up: 70 rows of gate then 70 of up
        gate_up(Q4_0, 256, 70, 19),
        gate_up(Q8_0, 128, 70, 70),
        accum(Q4_0, 96, 64, 33),
        gate_up(Q8_0, 96, 13, 5),
        gate_up(Q6K, 256, 64, 11),
        Case {
            y_tok: 80,
            y_off: 3,
            ..gate_up(F32, 64, 70, 9)
        },
        // attn_output / down + residual
        accum(Q4_0, 160, 70, 19),
        accum(Q5K, 512, 33, 8),
        gate_up(Q4K, 512, 70, 19),
        accum(Q4K, 768, 33, 9),
        gate_up(F16, 96, 13, 5),
        accum(BF16, 64, 70, 10),
        gate_up(Q4_1, 96, 13, 5),
        gate_up(Q2K, 256, 13, 5),
        accum(Q3K, 256, 33, 9),
        gate_up(IQ4XS, 512, 13, 9),
        accum(IQ4NL, 96, 70, 10),
        Case {
            y_tok: 75,
            y_off: 2,
            ..accum(Q8_0, 64, 70, 10)
        },
        // whole tiles and row workgroups: matmul_coop adds y's fragments
        // to its finished accumulators and stores them straight back
        // (the last tile through its epilogue)
        accum(Q4_0, 128, 256, 130),
        Case {
            y_tok: 260,
            y_off: 4,
            ..accum(Q6K, 256, 128, 64)
        },
    ];
    check_dense("matmul gate+up/accum", &cases);
}

#[test]
fn matmul_split_k() {
    use Format::*;
    // Each row's cols × parts weights in `parts` heads of cols, each
    // writing its partial sums into a plane of y (plane floats apart), as
    // the prefill's router logits, q_a and kv_a (ops::matmul_k_parts).
    let split = |f, cols, rows, parts: usize, n_tok: usize| {
        // (room for the routed pipelines' tile slots too: the cases also
        // run through them, in tiles of down to SHORT_TILE)
        let n_slots = n_tok.div_ceil(SHORT_TILE as usize) * SLOT;
        let plane = (n_slots + EXTRA_ROWS) * rows + 3;
        Case {
            heads: parts,
            split: parts,
            x_tok: cols * parts,
            x_stride: cols,
            y_stride: plane,
            ..dense(f, cols, rows, n_tok)
        }
    };
    let cases = [
        // the router logits: 64 rows of F32 in 16 parts of 4 units
        split(F32, 128, 64, 16, 70),
        // q_a and kv_a
        split(Q4_0, 512, 70, 4, 19),
        split(Q8_0, 256, 70, 8, 9),
        split(Q4K, 256, 13, 3, 5),
        split(Q6K, 256, 9, 2, 33),
    ];
    check_dense("matmul split-K", &cases);
}

#[test]
fn matmul_batched_heads() {
    use Format::*;
    // n heads; each token's x row holds the heads' inputs x_stride apart
    // (reading the first cols of each), y rows their outputs y_stride apart.
    let heads = |f, cols, rows, n: usize, x_stride: usize, y_stride: usize, n_tok| Case {
        n_mat: n,
        heads: n,
        x_stride,
        y_stride,
        x_tok: n * x_stride,
        y_tok: n * y_stride,
        ..dense(f, cols, rows, n_tok)
    };
    let cases = [
        // k_b: each head's q_nope (64 of its 96 q floats) → 70 latent
        heads(Q8_0, 64, 70, 4, 96, 70, 19),
        heads(Q8_0, 64, 70, 2, 96, 70, 40),
        // v_b: each head's latent → 40
        heads(Q4_0, 128, 40, 3, 128, 40, 19),
        // gaps between heads' outputs and an offset, that must stay NaN
        Case {
            y_off: 2,
            ..heads(Q5K, 256, 9, 3, 260, 13, 10)
        },
        heads(Q6K, 256, 65, 2, 256, 65, 1),
        // a Q4_K_M file's k_b: Q5_0 (192 is not a multiple of 256)
        heads(Q5_0, 192, 70, 3, 256, 70, 19),
        heads(Q4K, 256, 9, 2, 256, 9, 10),
        heads(Q5_1, 192, 70, 3, 256, 70, 19),
        heads(IQ4NL, 192, 70, 3, 256, 70, 19),
        heads(Q3K, 256, 9, 2, 256, 9, 10),
        // whole row workgroups and tiles: matmul_coop's direct stores, one
        // head's output 132 floats after the last's
        heads(Q8_0, 64, 128, 3, 96, 132, 64),
    ];
    check_dense("matmul batched heads", &cases);
}

// ---- routed experts ------------------------------------------------------

/// Expert selections sel[t·n_used + k], distinct per token and skewed:
/// every token but each fifth selects expert 0 (over 8 assignments make
/// several tiles), the rest come from experts 1..n_expert - 1 (a seeded
/// start, then consecutive), so the last expert gets none; odd tokens swap
/// their first two slots.
fn select(n_tok: usize, n_used: usize, n_expert: usize, seed: u64) -> Vec<u32> {
    assert!(n_used + 1 < n_expert);
    let others = n_expert as u32 - 2;
    let start = common::randn(n_tok, 1.0, seed);
    let mut sel = Vec::new();
    for (t, s) in start.iter().enumerate() {
        let mut row: Vec<u32> = vec![if t % 5 == 4 { 1 } else { 0 }];
        let mut e = s.to_bits() / 7;
        while row.len() < n_used {
            e += 1;
            if !row.contains(&(1 + e % others)) {
                row.push(1 + e % others);
            }
        }
        if t % 2 == 1 {
            row.swap(0, 1);
        }
        sel.extend(row);
    }
    sel
}

/// Run moe_group over `sel` and check its outputs exactly: `order` a
/// permutation of the assignments sorted by expert, `tiles` each expert's
/// run in tiles of `tile`, except that a last tile of `small` or fewer
/// follows all full-size ones, flagged; then zero tiles up to max_tiles.
fn group(pipes: &Pipelines, sel: &[u32], n_expert: usize, (tile, small): (u32, u32)) -> Tiles {
    let gpu = common::gpu();
    let n_assign = sel.len();
    let max_tiles = ops::max_tiles(n_assign as u32, n_expert as u32, tile);
    let gp = gpu.uniform(
        "p",
        &ops::MoeGroupParams {
            n_assign: n_assign as u32,
            n_expert: n_expert as u32,
            tile,
            max_tiles,
            small,
            _pad: [0; 3],
        },
    );
    let sb = gpu.storage("sel", bytemuck::cast_slice(sel)).unwrap();
    let order_buf = gpu
        .storage("order", bytemuck::cast_slice(&vec![u32::MAX; n_assign]))
        .unwrap();
    let tiles = gpu
        .storage(
            "tiles",
            bytemuck::cast_slice(&vec![u32::MAX; 4 * max_tiles as usize]),
        )
        .unwrap();
    let rows = gpu
        .storage("rows", bytemuck::cast_slice(&vec![u32::MAX; n_assign]))
        .unwrap();
    let bufs = ops::MoeGroupBindings {
        p: &gp,
        sel: &sb,
        order: &order_buf,
        tiles: &tiles,
        rows: &rows,
    };
    let d = Dispatch::new(gpu, pipes, Kernel::MoeGroup, &bufs, [1, 1, 1]);
    ops::run(gpu, &[d.unwrap()]).unwrap();
    let tag = format!("{:?} moe_group {n_assign} over {n_expert}", pipes.variant);

    let got = common::read_u32(&order_buf, n_assign);
    let mut sorted = got.clone();
    sorted.sort();
    assert!(
        sorted.iter().copied().eq(0..n_assign as u32),
        "{tag}: order {got:?} is not a permutation"
    );
    let experts: Vec<u32> = got.iter().map(|&a| sel[a as usize]).collect();
    assert!(
        experts.is_sorted(),
        "{tag}: order not grouped by expert: {experts:?}"
    );

    let (mut want, mut short): (Vec<[u32; 4]>, Vec<[u32; 4]>) = (Vec::new(), Vec::new());
    let mut first = 0;
    for e in 0..n_expert as u32 {
        let c = sel.iter().filter(|&&s| s == e).count() as u32;
        for i in (0..c).step_by(tile as usize) {
            let n = tile.min(c - i);
            match n < tile && n <= small {
                true => short.push([e, first + i, n, 1]),
                false => want.push([e, first + i, n, 0]),
            }
        }
        first += c;
    }
    want.extend(short);
    assert!(
        want.len() <= max_tiles as usize,
        "{tag}: max_tiles too small"
    );
    want.resize(max_tiles as usize, [0; 4]);
    let got: Vec<[u32; 4]> =
        bytemuck::pod_collect_to_vec(&common::read_u32(&tiles, 4 * want.len()));
    assert_eq!(got, want, "{tag}: tiles");
    // Tile t's j-th assignment has row t·tile + j.
    let order = common::read_u32(&order_buf, n_assign);
    let mut want_rows = vec![u32::MAX; n_assign];
    for (t, &[_, first, count, _]) in want.iter().enumerate() {
        for j in 0..count {
            want_rows[order[(first + j) as usize] as usize] = t as u32 * tile + j;
        }
    }
    let slots = common::read_u32(&rows, n_assign);
    assert_eq!(slots, want_rows, "{tag}: rows");
    Tiles {
        mats: sel.to_vec(),
        tiles,
        order: order_buf,
        n_tiles: max_tiles,
        short: true,
        slots,
    }
}

/// moe_sum of `part` (rows of n floats, assignment a's at `rows[a]`) into
/// the residual `y0`, checked against the oracle; returns the error.
fn moe_sum(
    pipes: &Pipelines,
    (n, n_used): (usize, usize),
    (part, rows): (&[f32], &[u32]),
    sel_w: &[f32],
    y0: &[f32],
) -> f64 {
    let gpu = common::gpu();
    let n_tok = sel_w.len() / n_used;
    let out = (0..n_tok * n).map(|i| {
        let (t, r) = (i / n, i % n);
        let s: f64 = (0..n_used)
            .map(|k| {
                let a = t * n_used + k;
                sel_w[a] as f64 * part[rows[a] as usize * n + r] as f64
            })
            .sum();
        (i, s)
    });
    let (want, written) = common::expect("moe_sum", y0, out, true);
    let pb = gpu.uniform(
        "p",
        &ops::MoeSumParams {
            n: n as u32,
            n_used: n_used as u32,
            _pad: [0; 2],
        },
    );
    let partb = gpu.storage("part", bytemuck::cast_slice(part)).unwrap();
    let wb = gpu.storage("sel_w", bytemuck::cast_slice(sel_w)).unwrap();
    let yb = gpu.storage("y", bytemuck::cast_slice(y0)).unwrap();
    let rb = gpu.storage("rows", bytemuck::cast_slice(rows)).unwrap();
    let wg = [ops::moe_sum_groups(n), n_tok as u32, 1];
    let bufs = ops::MoeSumBindings {
        p: &pb,
        part: &partb,
        sel_w: &wb,
        y: &yb,
        rows: &rb,
    };
    let d = Dispatch::new(gpu, pipes, Kernel::MoeSum, &bufs, wg);
    ops::run(gpu, &[d.unwrap()]).unwrap();
    let y = gpu.read_f32(&yb, y0.len()).unwrap();
    let tag = format!("{:?} moe_sum n={n} n_used={n_used}", pipes.variant);
    common::compare(&tag, &y, &want, &written, MOE_SUM_TOL)
}

/// One routed MoE block as prefill.rs runs it: group, experts' gate+up
/// (x_div = n_used: each assignment reads its token's row), experts' down,
/// weighted sum into the residual.
#[derive(Clone, Copy, Debug)]
struct Moe {
    gate_up: Format,
    down: Format,
    n_embd: usize,
    n_ff: usize,
    n_tok: usize,
    n_used: usize,
    n_expert: usize,
}

/// Returns the worst errors of the matmuls and of moe_sum (matmul_coop's
/// where `coop`, in one variant only: it has no reductions).
fn check_moe(m: &Moe, seed: u64, coop: bool) -> (f64, f64) {
    let n_assign = m.n_tok * m.n_used;
    let sel = select(m.n_tok, m.n_used, m.n_expert, seed);
    let sel_w: Vec<f32> = common::randn(n_assign, 0.2, seed + 1)
        .iter()
        .map(|v| 0.5 + v)
        .collect();
    let routed = |fmt, cols, rows| Case {
        n_mat: m.n_expert,
        ..dense(fmt, cols, rows, n_assign)
    };
    let gu = Case {
        gate_up: true,
        x_div: m.n_used,
        ..routed(m.gate_up, m.n_embd, m.n_ff)
    };
    let down = routed(m.down, m.n_ff, m.n_embd);
    let (w_gu, w_down) = (weights(&gu, seed + 2), weights(&down, seed + 3));
    let h = common::randn(gu.x_len(), 1.0, seed + 4);
    // A residual about as large as the routed outputs, so that each term
    // of the sum counts.
    let resid = common::randn((m.n_tok + EXTRA_ROWS) * m.n_embd + TAIL, 0.01, seed + 5);
    let (mut worst_mm, mut worst_sum) = (0f64, 0f64);
    let pipes = match coop {
        true => &common::pipelines()[..1],
        false => common::pipelines(),
    };
    for pipes in pipes {
        let shape = (ops::matmul_tile(coop), ops::matmul_small_tile(coop));
        let t = group(pipes, &sel, m.n_expert, shape);
        let (e, act) = check(coop, pipes, &gu, &w_gu, &t, &h, &vec![f32::NAN; gu.y_len()]);
        worst_mm = worst_mm.max(e);
        let act = &act[..down.x_len()];
        let (e, part) = check(
            coop,
            pipes,
            &down,
            &w_down,
            &t,
            act,
            &vec![f32::NAN; down.y_len()],
        );
        worst_mm = worst_mm.max(e);
        let e = moe_sum(
            pipes,
            (m.n_embd, m.n_used),
            (&part, &t.slots),
            &sel_w,
            &resid,
        );
        worst_sum = worst_sum.max(e);
    }
    (worst_mm, worst_sum)
}

#[test]
fn moe_routed_group_matmuls_and_sum() {
    use Format::*;
    let moe = |gate_up, down, n_embd, n_ff, n_tok| Moe {
        gate_up,
        down,
        n_embd,
        n_ff,
        n_tok,
        n_used: 2,
        n_expert: 6,
    };
    let cases = [
        // 42 assignments, 17 of them to expert 0 (one partial tile), none
        // to expert 5; 288 = 5 row workgroups, the last partly live, and
        // 2 moe_sum workgroups
        moe(Q4_0, Q8_0, 288, 96, 21),
        // 90 assignments, 36 to expert 0: one full-size tile of 36 (in
        // tile64 its last two subgroups skip their products); the other
        // experts' runs are short tiles (tile32: subgroups 2 and 3 skip)
        moe(Q4_0, Q8_0, 256, 96, 45),
        // 180 assignments, 72 to expert 0: matmul_coop's 64 and a short
        // tile of 8 (its other experts' runs are short tiles too)
        moe(Q4_0, Q8_0, 128, 96, 90),
        moe(Q5K, Q6K, 256, 256, 21),
        moe(Q4K, Q6K, 256, 512, 21),
        moe(Q4K, Q5_0, 96, 256, 9),
        moe(Q2K, Q3K, 256, 256, 9),
        moe(IQ4XS, IQ4NL, 256, 96, 9),
        // fewer assignments than max_tiles' n_expert term
        moe(Q8_0, Q4_0, 64, 160, 3),
        Moe {
            n_used: 4,
            n_expert: 7,
            ..moe(F32, Q6K, 96, 256, 13)
        },
    ];
    // (whatever the seed)
    let sel = select(21, 2, 6, 0);
    let count = |e| sel.iter().filter(|&&s| s == e).count();
    assert!(count(0) == 17 && count(5) == 0);
    let (mut worst_mm, mut worst_sum, mut worst_coop) = (0f64, 0f64, 0f64);
    let with_coop = coop("moe routed");
    for (i, m) in cases.iter().enumerate() {
        let (a, b) = check_moe(m, 1000 * i as u64 + 17, false);
        worst_mm = worst_mm.max(a);
        worst_sum = worst_sum.max(b);
        if with_coop {
            worst_coop = worst_coop.max(check_moe(m, 1000 * i as u64 + 17, true).0);
        }
    }
    eprintln!(
        "moe routed: {} cases, matmuls worst rel L2 {worst_mm:.2e} (tolerance {MATMUL_TOL:.0e}), \
         moe_sum {worst_sum:.2e} (tolerance {MOE_SUM_TOL:.0e}); matmul_coop {worst_coop:.2e} \
         (tolerance {COOP_TOL:.0e}, run: {with_coop})",
        cases.len()
    );
}

/// moe_group's short tiles (both kernels' tile32) in both variants, where
/// lavapipe runs them: each expert's last run of 32 or fewer assignments
/// after every full tile of 64, flagged; a run of exactly 64 or of 33 and
/// more stays full-size.
#[test]
fn moe_group_short_tiles() {
    let shape = (MATMUL_COOP_TILE, ops::matmul_small_tile(true));
    // Runs per expert: 240 = 3 × 64 + 48 (all full-size), exactly 64, 32
    // (short), 33 (full-size), 1, none, 97 = 64 + 33, 70 = 64 + 6 (short);
    // interleaved, so the grouping has to sort them.
    let counts = [240, 64, 32, 33, 1, 0, 97, 70];
    let mut sel: Vec<u32> = (0..8u32)
        .flat_map(|e| std::iter::repeat_n(e, counts[e as usize]))
        .collect();
    let n = sel.len();
    let stride = 7; // a prime, so coprime with n where it does not divide it
    assert!(n % stride != 0);
    sel = (0..n).map(|i| sel[i * stride % n]).collect();
    // (distinct experts per token do not matter to the grouping)
    for pipes in common::pipelines() {
        group(pipes, &sel, 8, shape);
    }
}

/// `--no-coopmat` opens the device without cooperative matrices, so the
/// prefill takes the f32 matmul even on an adapter that offers them.
#[test]
fn no_coopmat_opens_the_device_without_cooperative_matrices() {
    let opts = glmw::gpu::GpuOptions {
        no_coopmat: true,
        ..Default::default()
    };
    let gpu = glmw::gpu::Gpu::new(opts).unwrap();
    assert!(!gpu.caps.coop, "{}: cooperative matrices on", gpu.info.name);
    let with = common::gpu();
    eprintln!(
        "{}: cooperative matrices {} by default, off with no_coopmat",
        with.info.name,
        if with.caps.coop { "on" } else { "absent" }
    );
}
