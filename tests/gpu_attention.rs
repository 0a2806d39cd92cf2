//! kv_append, attention + the split merge of attn_v_b's matvec, the routers
//! (prefill's and decode's) and top-k against CPU oracles,
//! in both kernel variants (subgroup and shared-memory), on fresh random
//! non-zero inputs. Outputs are poisoned (NaN, or an impossible index)
//! before each run so unwritten elements fail. Matvecs: tests/gpu_kernels.rs.

mod common;

use glmw::gpu::ops::{self, Dispatch, Step};
use glmw::gpu::{Format, Gpu, Kernel};
use glmw::model::{Config, Gating, Model};
use glmw::reference::ops as cpu;
use half::f16;

/// kv_append per element vs f32 math: the cache is f16, so one f16 ulp
/// (2^-10 relative, or 2^-24 absolute for subnormals) covers the rounding
/// of either round-to-nearest or truncating f32→f16 conversion.
const KV_F16_ULP: f32 = 1.0 / 1024.0;

/// Combined attention output per head vs f64 softmax attention over the
/// same f16 cache values: f32 scores, exp and accumulation only.
const ATTN_TOL: f64 = 1e-5;

/// Router expert weights, max abs difference: f32 logits (256..2048 terms)
/// through sigmoid/softmax and the renormalisation.
const ROUTER_W_TOL: f32 = 1e-5;

/// route.wgsl's logits vs f64 dots of the same (dequantized) rows with
/// the normed x: f32 sums of up to 4,096 products, as matvec.wgsl's
/// MATVEC_TOL.
const ROUTE_LOGIT_TOL: f64 = 1e-5;

/// GLM-4.7-Flash's RMSNorm epsilon and rope base.
const EPS: f32 = 1e-5;
const ROPE_BASE: f32 = 1_000_000.0;

/// f16 NaN in both halves of a cache word.
const NAN_PAIR: u32 = 0x7E00_7E00;

fn halves(words: &[u32]) -> Vec<f32> {
    words
        .iter()
        .flat_map(|&w| {
            [
                f16::from_bits(w as u16).to_f32(),
                f16::from_bits((w >> 16) as u16).to_f32(),
            ]
        })
        .collect()
}

#[test]
fn kv_append_matches_reference() {
    let gpu = common::gpu();
    let mut worst = 0f32;
    // (n_kv, n_rot, parts, off): ckv as one row, or as the sum of a
    // split-K matmul's planes (`plane` floats apart) that kv_append adds
    // up, starting `off` floats into the binding (the prefill's kv_a planes
    // follow q_a's; the floats before them are NaN here).
    for (n_kv, n_rot, parts, off) in [(512usize, 64usize, 1usize, 0usize), (64, 16, 3, 5)] {
        let row = n_kv + n_rot;
        let plane = row + 3;
        let n_ctx = 7;
        let g: Vec<f32> = common::randn(n_kv, 0.1, 5)
            .iter()
            .map(|v| 1.0 + v)
            .collect();
        let gb = gpu.storage("g", bytemuck::cast_slice(&g)).unwrap();
        let pb = gpu.uniform(
            "p",
            &ops::KvAppendParams {
                n_kv: n_kv as u32,
                n_rot: n_rot as u32,
                eps: EPS,
                parts: parts as u32,
                plane: plane as u32,
                off: off as u32,
                _pad: [0; 2],
            },
        );
        for pipes in common::pipelines() {
            let cache = gpu
                .storage(
                    "cache",
                    bytemuck::cast_slice(&vec![NAN_PAIR; n_ctx * row / 2]),
                )
                .unwrap();
            let ckv_b = gpu
                .scratch("ckv", 4 * (off + parts * plane) as u64)
                .unwrap();
            gpu.queue
                .write_buffer(&ckv_b, 0, bytemuck::cast_slice(&vec![f32::NAN; off]));
            let step_b = gpu
                .storage("step", bytemuck::bytes_of(&Step::new(0, &[])))
                .unwrap();
            let bufs = ops::KvAppendBindings {
                p: &pb,
                steps: &step_b,
                ckv: &ckv_b,
                g: &gb,
                cache: &cache,
            };
            let d = Dispatch::new(gpu, pipes, Kernel::KvAppend, &bufs, [1, 1, 1]).unwrap();
            let mut want = vec![None; n_ctx];
            // Out of order, with a gap: only row `pos` may be written.
            for pos in [3usize, 0, 5, 1] {
                // Odd positions small enough that eps matters (mean x² ≈ eps).
                let std = if pos % 2 == 1 { 0.003 } else { 2.0 };
                let planes = common::randn(parts * plane, std, 10 * pos as u64 + n_kv as u64);
                // The row as the kernel adds its planes, in order.
                let ckv: Vec<f32> = (0..row)
                    .map(|i| (1..parts).fold(planes[i], |v, s| v + planes[s * plane + i]))
                    .collect();
                let cs = cpu::rope_cos_sin(pos, n_rot, ROPE_BASE, None);
                gpu.queue
                    .write_buffer(&ckv_b, 4 * off as u64, bytemuck::cast_slice(&planes));
                gpu.queue
                    .write_buffer(&step_b, 0, bytemuck::bytes_of(&Step::new(pos, &cs)));
                ops::run(gpu, std::slice::from_ref(&d)).unwrap();
                let mut r = cpu::rms_norm(&ckv[..n_kv], &g, EPS);
                let mut pe = ckv[n_kv..].to_vec();
                cpu::rope_apply(&mut pe, &cs);
                r.extend(pe);
                want[pos] = Some(r);
            }
            let words = common::read_u32(&cache, n_ctx * row / 2);
            for (pos, w) in want.iter().enumerate() {
                let got = &words[pos * row / 2..(pos + 1) * row / 2];
                let Some(w) = w else {
                    assert!(
                        got.iter().all(|&x| x == NAN_PAIR),
                        "{:?}: row {pos} was written",
                        pipes.variant
                    );
                    continue;
                };
                for (i, (a, b)) in halves(got).into_iter().zip(w).enumerate() {
                    let err = (a - b).abs();
                    let bound = b.abs() * KV_F16_ULP + 2f32.powi(-24);
                    assert!(
                        err <= bound,
                        "{:?} n_kv {n_kv}: row {pos} element {i}: {a} vs {b}",
                        pipes.variant
                    );
                    worst = worst.max(err / bound);
                }
            }
        }
    }
    eprintln!("kv_append: worst error {worst:.2} f16 ulp (tolerance 1)");
}

/// One layer's MLA attention shape.
struct Mla {
    n_kv: usize,
    n_rot: usize,
    n_nope: usize,
    n_head: usize,
}

/// GLM-4.7-Flash (one block of 20 heads), the tiny model, and 24 heads (a
/// full block and a part block).
const GLM: Mla = Mla {
    n_kv: 512,
    n_rot: 64,
    n_nope: 192,
    n_head: 20,
};
const TINY: Mla = Mla {
    n_kv: 64,
    n_rot: 16,
    n_nope: 32,
    n_head: 4,
};
const WIDE: Mla = Mla {
    n_kv: 128,
    n_rot: 32,
    n_nope: 64,
    n_head: 24,
};

impl Mla {
    fn row(&self) -> usize {
        self.n_kv + self.n_rot
    }

    fn n_qk(&self) -> usize {
        self.n_nope + self.n_rot
    }
}

/// Per head, softmax(q · rowsᵀ · scale) · rows[:, :n_kv] over the first
/// `n_pos` rows of `c` in f64, with q = [q_abs ‖ rope(q_pe)].
fn attention_f64(
    s: &Mla,
    c: &[f32],
    n_pos: usize,
    q_abs: &[f32],
    q: &[f32],
    cs: &[(f32, f32)],
    scale: f64,
) -> Vec<f32> {
    let row = s.row();
    let mut want = Vec::with_capacity(s.n_head * s.n_kv);
    for h in 0..s.n_head {
        let mut qf: Vec<f64> = q_abs[h * s.n_kv..][..s.n_kv]
            .iter()
            .map(|&v| v as f64)
            .collect();
        let qp = &q[h * s.n_qk() + s.n_nope..][..s.n_rot];
        for (i, &(co, si)) in cs.iter().enumerate() {
            let (a, b, co, si) = (qp[2 * i] as f64, qp[2 * i + 1] as f64, co as f64, si as f64);
            qf.extend([a * co - b * si, a * si + b * co]);
        }
        let sc: Vec<f64> = c[..n_pos * row]
            .chunks(row)
            .map(|r| qf.iter().zip(r).map(|(&x, &y)| x * y as f64).sum::<f64>() * scale)
            .collect();
        let mx = sc.iter().cloned().fold(f64::MIN, f64::max);
        let p: Vec<f64> = sc.iter().map(|v| (v - mx).exp()).collect();
        let sum: f64 = p.iter().sum();
        let mut o = vec![0f64; s.n_kv];
        for (r, &pt) in c.chunks(row).zip(&p) {
            for (oj, &cj) in o.iter_mut().zip(r) {
                *oj += pt * cj as f64;
            }
        }
        want.extend(o.iter().map(|v| (v / sum) as f32));
    }
    want
}

/// attn_v_b's matvec merging the splits (COMBINE) with an F32 identity per
/// head as its matrix, so its output is the merged attention vector.
fn combine_spec(s: &Mla, n_slot: u32) -> ops::MatvecSpec {
    ops::MatvecSpec {
        format: Format::F32,
        mode: ops::MatvecMode::Plain,
        accum: false,
        params: ops::MatvecParams {
            rows: s.n_kv as u32,
            units: (s.n_kv / 32) as u32,
            mat_units: (s.n_kv * s.n_kv / 32) as u32,
            n_slot,
            x_stride: 0,
            y_stride: s.n_kv as u32,
            y_off: 0,
            eps: 0.0,
            _pad: [0; 4],
        },
        slots: s.n_head as u32,
    }
}

#[test]
fn attention_and_combine_match_f64_softmax() {
    let gpu = common::gpu();
    // (shape, [(n_pos, n_split, q std)]): one position, splits that do not divide n_pos (some left
    // empty), partial and many 32-position tiles per split, a peaked
    // softmax, long contexts with the decode's split counts
    // (ops::attention_splits: 22 at 700, 157 at 5000, 256 at 16384) and
    // others, 160 leaving the last three empty.
    assert_eq!(
        (
            ops::attention_splits(700),
            ops::attention_splits(5000),
            ops::attention_splits(16384)
        ),
        (22, 157, 256)
    );
    let cases = [
        (
            &GLM,
            vec![
                (1usize, 1u32, 1.0f32),
                (1, 4, 1.0),
                (33, 1, 1.0),
                (37, 2, 1.0),
                (77, 4, 1.0),
                (150, 2, 3.0),
                (100, 16, 1.0),
                (700, 22, 1.0),
                (700, 3, 1.0),
                (5000, 157, 1.0),
                (5000, 160, 1.0),
                (5000, 17, 2.0),
                (8200, 256, 1.0),
            ],
        ),
        (
            &TINY,
            vec![
                (1, 1, 1.0),
                (5, 4, 1.0),
                (40, 3, 1.0),
                (33, 2, 4.0),
                (97, 16, 1.0),
                (5000, 128, 1.0),
            ],
        ),
        (&WIDE, vec![(1, 1, 1.0), (33, 2, 1.0), (700, 22, 1.0)]),
    ];
    let mut worst = 0f64;
    for (ci, (s, runs)) in cases.into_iter().enumerate() {
        let row = s.row();
        let n_ctx = runs.iter().map(|r| r.0).max().unwrap() + 3;
        // The cache written directly: random f16 rows, then NaN past n_pos.
        let (words, c) = random_cache(s, n_ctx, n_ctx, 50 + ci as u64);
        let mut eye = vec![0f32; s.n_head * s.n_kv * s.n_kv];
        for h in 0..s.n_head {
            for j in 0..s.n_kv {
                eye[(h * s.n_kv + j) * s.n_kv + j] = 1.0;
            }
        }
        let eye = gpu.storage("identity", bytemuck::cast_slice(&eye)).unwrap();
        let ids0 = gpu
            .storage("sel", bytemuck::cast_slice(&[0u32; 4]))
            .unwrap();
        for (ri, &(n_pos, n_split, q_std)) in runs.iter().enumerate() {
            let seed = 100 * ci as u64 + 10 * ri as u64;
            let q_abs = common::randn(s.n_head * s.n_kv, q_std, seed + 1);
            let q = common::randn(s.n_head * s.n_qk(), q_std, seed + 2);
            let scale = 1.0 / (s.n_qk() as f32).sqrt();
            let cs = cpu::rope_cos_sin(n_pos - 1, s.n_rot, ROPE_BASE, None);
            let want = attention_f64(s, &c, n_pos, &q_abs, &q, &cs, scale as f64);
            // Slots past n_split, as the decode plan has (MAX_SPLITS).
            let stride = (n_split + 2).min(ops::MAX_SPLITS);
            let mut cw = words.clone();
            cw[n_pos * row / 2..].fill(NAN_PAIR);
            let cache = gpu.storage("cache", bytemuck::cast_slice(&cw)).unwrap();
            let mut st = Step::new(n_pos - 1, &cs);
            st.n_split = n_split;
            let step = gpu.storage("step", bytemuck::bytes_of(&st)).unwrap();
            let qab = gpu.storage("q_abs", bytemuck::cast_slice(&q_abs)).unwrap();
            let qb = gpu.storage("q", bytemuck::cast_slice(&q)).unwrap();
            let ap = gpu.uniform(
                "p",
                &ops::AttentionParams {
                    n_rot: s.n_rot as u32,
                    n_nope: s.n_nope as u32,
                    scale,
                    split_stride: stride,
                    n_head: s.n_head as u32,
                    _pad: [0; 3],
                },
            );
            let mv = combine_spec(s, stride);
            let mvp = gpu.uniform("p", &mv.params);
            let hp = gpu.uniform(
                "p",
                &ops::AttentionHeadParams {
                    n_kv: s.n_kv as u32,
                    n_rot: s.n_rot as u32,
                    n_nope: s.n_nope as u32,
                    scale,
                    split_stride: stride,
                    n_head: s.n_head as u32,
                    _pad: [0; 2],
                },
            );
            // Both decode kernels: all heads per workgroup (long contexts)
            // and one head per workgroup (short ones).
            let kernels = [Kernel::Attention, Kernel::AttentionHead];
            for (pipes, kernel) in common::pipelines()
                .iter()
                .flat_map(|p| kernels.map(|k| (p, k)))
            {
                let parts = s.n_head * stride as usize;
                let (o, ml, out) = (
                    nan_buffer(gpu, parts * s.n_kv),
                    nan_buffer(gpu, parts * 2),
                    nan_buffer(gpu, s.n_head * s.n_kv + 2),
                );
                let d1 = if kernel == Kernel::Attention {
                    let grid = [stride, ops::attention_head_blocks(s.n_head), 1];
                    let bufs = ops::AttentionBindings {
                        p: &ap,
                        steps: &step,
                        q_abs: &qab,
                        q: &qb,
                        cache: &cache,
                        o: &o,
                        ml: &ml,
                    };
                    ops::attention(gpu, pipes, s.n_kv, &bufs, grid)
                } else {
                    let bufs = ops::AttentionHeadBindings {
                        p: &hp,
                        steps: &step,
                        q_abs: &qab,
                        q: &qb,
                        cache: &cache,
                        o: &o,
                        ml: &ml,
                    };
                    // As the decode: a grid narrower than the slots (the
                    // splits past it marked empty by the others), one
                    // workgroup past the token's splits.
                    let grid = [(n_split + 1).min(stride), s.n_head as u32, 1];
                    Dispatch::new(gpu, pipes, kernel, &bufs, grid)
                };
                let bufs = ops::MatvecBuffers {
                    params: &mvp,
                    x: &o,
                    g: ops::MatvecSide::Splits(&ml),
                    y: &out,
                    sel: &ids0,
                    sel_w: &ids0,
                    weights: std::slice::from_ref(&eye),
                };
                let d2 = ops::matvec(gpu, pipes, &mv, &bufs);
                ops::run(gpu, &[d1.unwrap(), d2.unwrap()]).unwrap();
                let got = gpu.read_f32(&out, s.n_head * s.n_kv + 2).unwrap();
                assert!(
                    got[s.n_head * s.n_kv..].iter().all(|v| v.is_nan()),
                    "the merge wrote past its heads"
                );
                for h in 0..s.n_head {
                    let (a, b) = (&got[h * s.n_kv..][..s.n_kv], &want[h * s.n_kv..][..s.n_kv]);
                    let e = cpu::rel_l2(a, b);
                    worst = worst.max(e);
                    assert!(
                        e < ATTN_TOL,
                        "{kernel:?} {:?} n_kv {} n_head {} n_pos {n_pos} n_split {n_split} head {h}: rel L2 {e:.3e}; {:?} vs {:?}",
                        pipes.variant,
                        s.n_kv,
                        s.n_head,
                        &a[..3],
                        &b[..3]
                    );
                }
            }
        }
    }
    eprintln!("attention + combine: worst rel L2 per head {worst:.2e} (tolerance {ATTN_TOL:.0e})");
}

/// Random f16 cache rows for `s`, as GPU words and as the f32 values the
/// oracle reads; NaN rows from `n_valid` on, so reads past a token's
/// positions fail.
fn random_cache(s: &Mla, n_valid: usize, n_ctx: usize, seed: u64) -> (Vec<u32>, Vec<f32>) {
    let vals: Vec<f16> = common::randn(n_ctx * s.row(), 1.0, seed)
        .into_iter()
        .map(f16::from_f32)
        .collect();
    let (mut words, c) = cache_words(&vals);
    words[n_valid * s.row() / 2..].fill(NAN_PAIR);
    (words, c)
}

/// A buffer of `n` NaNs: what a kernel leaves unwritten stays NaN.
fn nan_buffer(gpu: &Gpu, n: usize) -> wgpu::Buffer {
    gpu.storage("out", bytemuck::cast_slice(&vec![f32::NAN; n]))
        .unwrap()
}

/// The attention kernels' inputs as storage buffers: cache words, step
/// records, q_abs and q.
fn attention_inputs(
    gpu: &Gpu,
    words: &[u32],
    steps: &[Step],
    q_abs: &[f32],
    q: &[f32],
) -> [wgpu::Buffer; 4] {
    let store = |v: &[u8]| gpu.storage("in", v).unwrap();
    [
        store(bytemuck::cast_slice(words)),
        store(bytemuck::cast_slice(steps)),
        store(bytemuck::cast_slice(q_abs)),
        store(bytemuck::cast_slice(q)),
    ]
}

/// f16 cache values as GPU words (two a word, low first) and as f32.
fn cache_words(vals: &[f16]) -> (Vec<u32>, Vec<f32>) {
    let words = vals
        .chunks(2)
        .map(|p| p[0].to_bits() as u32 | (p[1].to_bits() as u32) << 16)
        .collect();
    (words, vals.iter().map(|v| v.to_f32()).collect())
}

#[test]
fn prefill_attention_per_token_matches_f64_softmax() {
    let gpu = common::gpu();
    // Tokens on z as the prefill plan runs them: each attends over its own
    // prefix, its q and outputs offset by whole rows, in one split (a full
    // chunk) or five (a short chunk deep in the context,
    // `ops::prefill_splits`: splits of 7 positions and of 140, not whole
    // tiles, and the one-position token's empty ones). 24 heads make a
    // second block whose missing heads read the next token's q.
    let mut worst = 0f64;
    for ((ci, s), n_split) in [&GLM, &WIDE]
        .into_iter()
        .enumerate()
        .flat_map(|c| [(c, 1u32), (c, 5)])
    {
        let n_pos = [33usize, 700, 1];
        let n_tok = n_pos.len();
        let (words, c) = random_cache(s, 700, 703, 70 + ci as u64);
        let q_abs = common::randn(n_tok * s.n_head * s.n_kv, 1.0, 80 + ci as u64);
        let q = common::randn(n_tok * s.n_head * s.n_qk(), 1.0, 90 + ci as u64);
        let scale = 1.0 / (s.n_qk() as f32).sqrt();
        let cs: Vec<_> = n_pos
            .iter()
            .map(|&n| cpu::rope_cos_sin(n - 1, s.n_rot, ROPE_BASE, None))
            .collect();
        let steps: Vec<Step> = n_pos
            .iter()
            .zip(&cs)
            .map(|(&n, cs)| Step {
                n_split,
                ..Step::new(n - 1, cs)
            })
            .collect();
        let [cache, step, qab, qb] = attention_inputs(gpu, &words, &steps, &q_abs, &q);
        let ap = gpu.uniform(
            "p",
            &ops::AttentionParams {
                n_rot: s.n_rot as u32,
                n_nope: s.n_nope as u32,
                scale,
                split_stride: n_split,
                n_head: s.n_head as u32,
                _pad: [0; 3],
            },
        );
        let heads = n_tok * s.n_head * n_split as usize;
        for pipes in common::pipelines() {
            let (o, ml) = (
                nan_buffer(gpu, heads * s.n_kv + 1),
                nan_buffer(gpu, heads * 2 + 1),
            );
            let grid = [n_split, ops::attention_head_blocks(s.n_head), n_tok as u32];
            let bufs = ops::AttentionBindings {
                p: &ap,
                steps: &step,
                q_abs: &qab,
                q: &qb,
                cache: &cache,
                o: &o,
                ml: &ml,
            };
            ops::run(
                gpu,
                &[ops::attention(gpu, pipes, s.n_kv, &bufs, grid).unwrap()],
            )
            .unwrap();
            let got = gpu.read_f32(&o, heads * s.n_kv + 1).unwrap();
            let got_ml = gpu.read_f32(&ml, heads * 2 + 1).unwrap();
            assert!(
                got[heads * s.n_kv].is_nan() && got_ml[heads * 2].is_nan(),
                "{:?}: wrote past the last token",
                pipes.variant
            );
            let ns = n_split as usize;
            for (z, &n) in n_pos.iter().enumerate() {
                let zq = &q_abs[z * s.n_head * s.n_kv..][..s.n_head * s.n_kv];
                let zqp = &q[z * s.n_head * s.n_qk()..][..s.n_head * s.n_qk()];
                let want = attention_f64(s, &c, n, zq, zqp, &cs[z], scale as f64);
                for h in 0..s.n_head {
                    let slot = (z * s.n_head + h) * ns;
                    let sml = &got_ml[2 * slot..][..2 * ns];
                    let merged = merge_splits(&got[slot * s.n_kv..][..ns * s.n_kv], sml, s.n_kv);
                    let e = cpu::rel_l2(&merged, &want[h * s.n_kv..][..s.n_kv]);
                    worst = worst.max(e);
                    // l is 1 (normalised) or 0 (an empty split); the first
                    // split always holds position 0.
                    let ls = (0..ns).all(|i| sml[2 * i + 1] == 1.0 || sml[2 * i + 1] == 0.0);
                    assert!(
                        e < ATTN_TOL && ls && sml[1] == 1.0,
                        "{:?} n_head {} splits {n_split} token {z} (n_pos {n}) head {h}: rel L2 \
                         {e:.3e}, first l {}",
                        pipes.variant,
                        s.n_head,
                        sml[1]
                    );
                }
            }
        }
    }
    eprintln!("prefill attention: worst rel L2 per head {worst:.2e} (tolerance {ATTN_TOL:.0e})");
}

/// attention_coop.wgsl vs f64, rel L2 per (token, head): queries and
/// probabilities are rounded to f16 (2^-11 relative each), so a score's
/// error is ~2^-11 · Σ|q·c| · scale (a few 1e-3 in log units for these
/// magnitudes) and each output moves by about that relative amount. The
/// H100 measured 2.88e-3 at worst (session 11).
const ATTN_COOP_TOL: f64 = 1e-2;

/// One attention_coop case: `n_tok` tokens on top of `depth` cached rows,
/// their positions in `splits` splits (the decode's one token: several;
/// the prefill: one); `grow` scales cache row t by 1 + t / 64, so scores
/// climb along the positions and the kernel's running max must move (and
/// its accumulators be rescaled) many times.
struct CoopCase {
    depth: usize,
    n_tok: usize,
    splits: u32,
    grow: bool,
}

/// Merge one row's normalised split outputs `o` (n_kv each) by their
/// (m + ln l, 1) in `ml`, as attn_v_b's matvec does; empty splits have
/// weight 0.
fn merge_splits(o: &[f32], ml: &[f32], n_kv: usize) -> Vec<f32> {
    let n = ml.len() / 2;
    let top = (0..n).map(|s| ml[2 * s]).fold(f32::MIN, f32::max) as f64;
    let w: Vec<f64> = (0..n)
        .map(|s| ml[2 * s + 1] as f64 * (ml[2 * s] as f64 - top).exp())
        .collect();
    let sum: f64 = w.iter().sum();
    (0..n_kv)
        .map(|d| {
            let v: f64 = (0..n)
                .filter(|&s| w[s] > 0.0)
                .map(|s| w[s] * o[s * n_kv + d] as f64)
                .sum();
            (v / sum) as f32
        })
        .collect()
}

#[test]
fn prefill_attention_coop_matches_f64_softmax() {
    let gpu = common::gpu();
    if !ops::attention_coop_fits(gpu, 16) {
        eprintln!(
            "prefill_attention_coop_matches_f64_softmax skipped: adapter {} offers no 16x16 f16 \
             cooperative matrix with subgroups of exactly 32 lanes (lavapipe offers none; the GPU \
             machine runs it)",
            gpu.info.name
        );
        return;
    }
    let cases = [
        // fewer than one tile of positions: the tile reads rows past them
        CoopCase {
            depth: 0,
            n_tok: 5,
            splits: 1,
            grow: false,
        },
        // several workgroups, a part-filled last one, shifted last tiles
        CoopCase {
            depth: 37,
            n_tok: 70,
            splits: 1,
            grow: false,
        },
        CoopCase {
            depth: 1000,
            n_tok: 3,
            splits: 1,
            grow: false,
        },
        CoopCase {
            depth: 300,
            n_tok: 9,
            splits: 1,
            grow: true,
        },
        // the prefill's two splits: rows with no positions in the second
        // (the first tokens), and several tiles in each
        CoopCase {
            depth: 0,
            n_tok: 5,
            splits: 2,
            grow: false,
        },
        CoopCase {
            depth: 300,
            n_tok: 9,
            splits: 2,
            grow: true,
        },
        // a short chunk deep in the context (`ops::prefill_splits`): many
        // splits not of whole tiles (67 and 62 positions), rows of two
        // tokens in one workgroup
        CoopCase {
            depth: 1000,
            n_tok: 3,
            splits: 15,
            grow: false,
        },
        CoopCase {
            depth: 300,
            n_tok: 9,
            splits: 5,
            grow: true,
        },
        // the decode: one token, splits of a few tiles, of less than a
        // tile (moved back into the split before), and empty ones
        CoopCase {
            depth: 700,
            n_tok: 1,
            splits: 7,
            grow: false,
        },
        CoopCase {
            depth: 5000,
            n_tok: 1,
            splits: 256,
            grow: false,
        },
        CoopCase {
            depth: 40,
            n_tok: 1,
            splits: 64,
            grow: true,
        },
    ];
    let mut worst = 0f64;
    for (ci, s) in [&GLM, &TINY, &WIDE].into_iter().enumerate() {
        for (k, cc) in cases.iter().enumerate() {
            let seed = 100 * ci as u64 + 10 * k as u64;
            let n_fill = cc.depth + cc.n_tok;
            let n_ctx = n_fill.max(ops::ATTENTION_COOP_TILE) + 5;
            let (mut words, mut c) = random_cache(s, n_ctx, n_ctx, 200 + seed);
            if cc.grow {
                let vals: Vec<f16> = c
                    .chunks(s.row())
                    .enumerate()
                    .flat_map(|(t, r)| {
                        let g = 1.0 + t as f32 / 64.0;
                        r.iter().map(move |&v| f16::from_f32(v * g))
                    })
                    .collect();
                (words, c) = cache_words(&vals);
            }
            // Rows the kernel may not read: past the fill, and past the
            // first tile.
            words[n_fill.max(ops::ATTENTION_COOP_TILE) * s.row() / 2..].fill(NAN_PAIR);
            let q_abs = common::randn(cc.n_tok * s.n_head * s.n_kv, 1.0, 201 + seed);
            let q = common::randn(cc.n_tok * s.n_head * s.n_qk(), 1.0, 202 + seed);
            let scale = 1.0 / (s.n_qk() as f32).sqrt();
            let cs: Vec<_> = (0..cc.n_tok)
                .map(|z| cpu::rope_cos_sin(cc.depth + z, s.n_rot, ROPE_BASE, None))
                .collect();
            let steps: Vec<Step> = (0..cc.n_tok)
                .map(|z| Step {
                    n_split: cc.splits,
                    ..Step::new(cc.depth + z, &cs[z])
                })
                .collect();
            let [cache, step, qab, qb] = attention_inputs(gpu, &words, &steps, &q_abs, &q);
            let ap = gpu.uniform(
                "p",
                &ops::AttentionCoopParams {
                    n_rot: s.n_rot as u32,
                    n_nope: s.n_nope as u32,
                    scale,
                    n_head: s.n_head as u32,
                    n_tok: cc.n_tok as u32,
                    split_stride: cc.splits,
                    _pad: [0; 2],
                },
            );
            let rows = cc.n_tok * s.n_head;
            let slots = rows * cc.splits as usize;
            for pipes in common::pipelines() {
                let (o, ml) = (
                    nan_buffer(gpu, slots * s.n_kv + 1),
                    nan_buffer(gpu, slots * 2 + 1),
                );
                let grid = [
                    cc.splits,
                    ops::attention_coop_groups(cc.n_tok as u32, s.n_head as u32),
                    1,
                ];
                let bufs = ops::AttentionCoopBindings {
                    p: &ap,
                    steps: &step,
                    q_abs: &qab,
                    q: &qb,
                    cache: &cache,
                    o: &o,
                    ml: &ml,
                };
                ops::run(
                    gpu,
                    &[ops::attention_coop(gpu, pipes, s.n_kv, &bufs, grid).unwrap()],
                )
                .unwrap();
                let got = gpu.read_f32(&o, slots * s.n_kv + 1).unwrap();
                let got_ml = gpu.read_f32(&ml, slots * 2 + 1).unwrap();
                let tag = format!(
                    "{:?} n_head {} depth {} n_tok {} splits {} grow {}",
                    pipes.variant, s.n_head, cc.depth, cc.n_tok, cc.splits, cc.grow
                );
                assert!(
                    got[slots * s.n_kv].is_nan() && got_ml[slots * 2].is_nan(),
                    "{tag}: wrote past the last row"
                );
                for z in 0..cc.n_tok {
                    let n = cc.depth + z + 1;
                    let zq = &q_abs[z * s.n_head * s.n_kv..][..s.n_head * s.n_kv];
                    let zqp = &q[z * s.n_head * s.n_qk()..][..s.n_head * s.n_qk()];
                    let want = attention_f64(s, &c, n, zq, zqp, &cs[z], scale as f64);
                    let n_split = cc.splits as usize;
                    for h in 0..s.n_head {
                        let slot = (z * s.n_head + h) * n_split;
                        let sml = &got_ml[2 * slot..][..2 * n_split];
                        let so = &got[slot * s.n_kv..][..n_split * s.n_kv];
                        let merged = merge_splits(so, sml, s.n_kv);
                        let e = cpu::rel_l2(&merged, &want[h * s.n_kv..][..s.n_kv]);
                        worst = worst.max(e);
                        // l is 1 (normalised) or 0 (an empty split)
                        let ls =
                            (0..n_split).all(|i| sml[2 * i + 1] == 1.0 || sml[2 * i + 1] == 0.0);
                        assert!(
                            e < ATTN_COOP_TOL && ls && sml[1] == 1.0,
                            "{tag}: token {z} head {h}: rel L2 {e:.3e}, first l {}",
                            sml[1]
                        );
                    }
                }
            }
        }
    }
    eprintln!(
        "prefill attention (cooperative matrices): worst rel L2 per head {worst:.2e} (tolerance \
         {ATTN_COOP_TOL:.0e})"
    );
}

#[test]
fn attention_merge_matches_cpu_merge() {
    // attention_merge.wgsl joins the prefill's position splits of each
    // (token, head) row; some splits empty (l = 0, o = 0), one row's
    // splits all but the first (which always holds position 0).
    let gpu = common::gpu();
    let (n_kv, n_head, n_tok, splits) = (512usize, 20usize, 3usize, 3usize);
    let rows = n_head * n_tok;
    let part = common::randn(rows * splits * n_kv, 1.0, 301);
    let xs = common::randn(rows * splits, 3.0, 302);
    let mut ml: Vec<f32> = xs.iter().flat_map(|&x| [x, 1.0]).collect();
    let mut part = part;
    for slot in (0..rows * splits).filter(|s| s % splits != 0 && (s % 4 == 1 || s / splits == 7)) {
        ml[2 * slot] = -3.0e38;
        ml[2 * slot + 1] = 0.0;
        part[slot * n_kv..][..n_kv].fill(0.0);
    }
    let params = gpu.uniform(
        "p",
        &ops::AttentionMergeParams {
            n_kv: n_kv as u32,
            n_head: n_head as u32,
            split_stride: splits as u32,
            _pad: 0,
        },
    );
    let pb = gpu.storage("part", bytemuck::cast_slice(&part)).unwrap();
    let mb = gpu.storage("ml", bytemuck::cast_slice(&ml)).unwrap();
    let mut worst = 0f64;
    for pipes in common::pipelines() {
        let o = gpu
            .storage("o", bytemuck::cast_slice(&vec![f32::NAN; rows * n_kv + 1]))
            .unwrap();
        let b = ops::AttentionMergeBindings {
            p: &params,
            part: &pb,
            ml: &mb,
            o: &o,
        };
        let d = Dispatch::new(
            gpu,
            pipes,
            Kernel::AttentionMerge,
            &b,
            [n_head as u32, n_tok as u32, 1],
        )
        .unwrap();
        ops::run(gpu, &[d]).unwrap();
        let got = gpu.read_f32(&o, rows * n_kv + 1).unwrap();
        assert!(
            got[rows * n_kv].is_nan(),
            "{:?}: wrote past the last row",
            pipes.variant
        );
        for r in 0..rows {
            let want = merge_splits(
                &part[r * splits * n_kv..][..splits * n_kv],
                &ml[2 * r * splits..][..2 * splits],
                n_kv,
            );
            let e = cpu::rel_l2(&got[r * n_kv..][..n_kv], &want);
            worst = worst.max(e);
            assert!(e < ATTN_TOL, "{:?} row {r}: rel L2 {e:.3e}", pipes.variant);
        }
    }
    eprintln!("attention merge: worst rel L2 per row {worst:.2e} (tolerance {ATTN_TOL:.0e})");
}

/// `base` with another width and router: (experts, of them used), the
/// gating function, renormalisation and scale of the chosen weights.
fn router_config(
    base: &Config,
    n_embd: usize,
    (n_expert, n_used): (usize, usize),
    gating: Gating,
    norm: bool,
    scale: f32,
) -> Config {
    Config {
        n_embd,
        n_expert,
        n_expert_used: n_used,
        gating,
        expert_weights_norm: norm,
        expert_weights_scale: scale,
        ..base.clone()
    }
}

/// Check a router's choice in `sb` (its `sel`, poisoned with 0xDEAD_BEEF
/// one past n_used) and `swb` (`sel_w`, NaN one past): the experts exactly,
/// the weights within ROUTER_W_TOL. Returns the weights' worst error.
fn check_choice(
    tag: &str,
    sb: &wgpu::Buffer,
    swb: &wgpu::Buffer,
    sel_want: &[usize],
    w_want: &[f32],
) -> f32 {
    let k = sel_want.len();
    let sel = common::read_u32(sb, k + 1);
    let sel: Vec<usize> = sel.iter().map(|&e| e as usize).collect();
    assert_eq!(sel[..k], sel_want[..], "{tag}: selected experts");
    assert_eq!(sel[k], 0xDEAD_BEEF, "{tag}: wrote past n_used");
    let sw = common::gpu().read_f32(swb, k + 1).unwrap();
    assert!(sw[k].is_nan(), "{tag}: wrote past n_used");
    let dw = sw[..k]
        .iter()
        .zip(w_want)
        .map(|(a, b)| (a - b).abs())
        .fold(0f32, f32::max);
    assert!(
        dw < ROUTER_W_TOL,
        "{tag}: weights {:?} vs {w_want:?}",
        &sw[..k]
    );
    dw
}

/// A router test case's inputs: x, the norm weight g, the router rows w
/// (n_expert × n_embd; rows repeating every `dup` rows where dup > 0:
/// exact ties) and the selection bias (zeros without one).
struct RouterInputs {
    x: Vec<f32>,
    g: Vec<f32>,
    w: Vec<f32>,
    bias: Vec<f32>,
}

/// Logits as the model makes them: the router rows times a normed x
/// (every odd case `ci` small enough that eps matters).
fn router_inputs(c: &Config, ci: usize, has_bias: bool, dup: usize, seed: u64) -> RouterInputs {
    let (n, ne) = (c.n_embd, c.n_expert);
    let x_std = if ci % 2 == 1 { 0.003 } else { 1.0 };
    let g = common::randn(n, 0.1, seed + 2)
        .iter()
        .map(|v| 1.0 + v)
        .collect();
    let mut w = common::randn(ne * n, 0.05, seed + 3);
    if dup > 0 {
        for e in dup..ne {
            w.copy_within((e % dup) * n..(e % dup + 1) * n, e * n);
        }
    }
    let bias = match has_bias {
        true => common::randn(ne, 0.05, seed + 4),
        false => vec![0.0; ne],
    };
    RouterInputs {
        x: common::randn(n, x_std, seed + 1),
        g,
        w,
        bias,
    }
}

#[test]
fn router_matches_reference() {
    let gpu = common::gpu();
    let tiny = Model::open(common::tiny_model()).unwrap().config;
    assert_eq!(
        (tiny.n_expert, tiny.n_expert_used, tiny.gating),
        (8, 4, Gating::Sigmoid)
    );
    let cfg = |n_embd, n_expert, n_used, gating, norm, scale| {
        router_config(&tiny, n_embd, (n_expert, n_used), gating, norm, scale)
    };
    // (config, with bias, expert rows repeating every `dup` rows: exact ties)
    let cases = [
        (tiny.clone(), true, 0),
        (cfg(2048, 64, 4, Gating::Sigmoid, true, 1.8), true, 0), // GLM-4.7-Flash
        (cfg(2048, 64, 6, Gating::Softmax, false, 1.0), false, 0), // DeepSeek-V2-Lite
        (
            cfg(256, ops::ROUTER_MAX_EXPERT, 8, Gating::Sigmoid, true, 2.5),
            true,
            0,
        ),
        (cfg(256, 16, 6, Gating::Softmax, true, 1.0), false, 4),
        (cfg(300, 12, 5, Gating::Sigmoid, true, 1.0), false, 3),
    ];
    let mut worst = 0f32;
    for (ci, (c, has_bias, dup)) in cases.iter().enumerate() {
        let (n, ne) = (c.n_embd, c.n_expert);
        let seed = 1000 * ci as u64;
        let RouterInputs { x, g, w, bias } = router_inputs(c, ci, *has_bias, *dup, seed);
        let h = cpu::rms_norm(&x, &g, c.rms_eps);
        let mut planes: Vec<f32> = w.chunks(n).map(|r| cpu::dot(r, &h)).collect();
        // Without ties, every other case's logits come as the sum of a
        // split-K matmul's three planes (`plane` floats apart), which the
        // router adds up in order.
        let (parts, plane) = match *dup == 0 && ci % 2 == 0 {
            true => (3, ne + 5),
            false => (1, 0),
        };
        if parts > 1 {
            planes.resize(plane, 0.0);
            planes.extend(common::randn(2 * plane, 0.5, seed + 5));
        }
        let logits: Vec<f32> = (0..ne)
            .map(|e| (1..parts).fold(planes[e], |v, s| v + planes[s * plane + e]))
            .collect();
        let (sel_want, w_want) =
            glmw::reference::route(&logits, (*has_bias).then_some(&bias[..]), c);
        let p = ops::RouterParams {
            n_expert: ne as u32,
            n_used: c.n_expert_used as u32,
            gating: (c.gating == Gating::Softmax) as u32,
            norm_w: c.expert_weights_norm as u32,
            scale: c.expert_weights_scale,
            parts: parts as u32,
            plane: plane as u32,
            _pad: 0,
        };
        let store = |v: &[f32]| gpu.storage("in", bytemuck::cast_slice(v)).unwrap();
        let (pb, wb, bb) = (gpu.uniform("p", &p), store(&planes), store(&bias));
        for pipes in common::pipelines() {
            let k = c.n_expert_used;
            let swb = store(&vec![f32::NAN; k + 1]);
            let sb = gpu
                .storage("sel", bytemuck::cast_slice(&vec![0xDEAD_BEEFu32; k + 1]))
                .unwrap();
            let bufs = ops::RouterBindings {
                p: &pb,
                logits: &wb,
                bias: &bb,
                sel: &sb,
                sel_w: &swb,
            };
            let d = Dispatch::new(gpu, pipes, Kernel::Router, &bufs, [1, 1, 1]).unwrap();
            ops::run(gpu, &[d]).unwrap();
            let tag = format!(
                "{:?} router case {ci} ({ne} experts, top {k}, {:?})",
                pipes.variant, c.gating
            );
            worst = worst.max(check_choice(&tag, &sb, &swb, &sel_want, &w_want));
        }
    }
    eprintln!("router: worst weight error {worst:.2e} (tolerance {ROUTER_W_TOL:.0e})");
}

/// route.wgsl (the decode's router: the logits matvec with ffn_norm fused,
/// and the choice in the workgroup that finishes last) against the CPU:
/// the logits within ROUTE_LOGIT_TOL of f64 dots with the normed x, the
/// choice exactly reference::route's on the kernel's own logits (so that a
/// near-tie cannot flip it), its weights within ROUTER_W_TOL. Each case runs
/// twice: with the matrix in one buffer, then split into two row ranges (two
/// dispatches, as the engine splits a matrix too large for one binding,
/// counting their workgroups together). The last workgroup puts the count
/// back to 0, so the second run chooses again.
#[test]
fn route_matches_reference() {
    let gpu = common::gpu();
    let tiny = Model::open(common::tiny_model()).unwrap().config;
    let cfg = |n_embd, n_expert, n_used, gating, norm, scale| {
        router_config(&tiny, n_embd, (n_expert, n_used), gating, norm, scale)
    };
    // (config, router format, with bias, rows repeating every `dup` rows)
    let cases = [
        (tiny.clone(), Format::F32, true, 0),
        (
            cfg(2048, 64, 4, Gating::Sigmoid, true, 1.8),
            Format::F32,
            true,
            0,
        ), // GLM-4.7-Flash
        (
            cfg(2048, 64, 6, Gating::Softmax, false, 1.0),
            Format::Q8_0,
            false,
            0,
        ), // DeepSeek-V2-Lite
        (
            cfg(256, ops::ROUTER_MAX_EXPERT, 8, Gating::Sigmoid, true, 2.5),
            Format::F32,
            true,
            0,
        ),
        // two chunks of staged x; exact ties
        (
            cfg(4096, 16, 6, Gating::Softmax, true, 1.0),
            Format::F32,
            false,
            4,
        ),
        (
            cfg(96, 12, 5, Gating::Sigmoid, true, 1.0),
            Format::Q4_0,
            false,
            3,
        ),
    ];
    let mut worst = (0f64, 0f32);
    for (ci, (c, fmt, has_bias, dup)) in cases.iter().enumerate() {
        let (n, ne, k) = (c.n_embd, c.n_expert, c.n_expert_used);
        let seed = 2000 * ci as u64;
        let RouterInputs { x, g, w, bias } = router_inputs(c, ci, *has_bias, *dup, seed);
        // (row0, rows, buffers) of each part: the whole matrix, then two
        let (deq, whole) = common::upload(*fmt, &w);
        let part = |r0: usize, rows: usize| {
            let (_, bufs) = common::upload(*fmt, &w[r0 * n..(r0 + rows) * n]);
            (r0, rows, bufs)
        };
        let split = (ne / 3).max(1);
        let runs = [
            vec![(0, ne, whole)],
            vec![part(0, split), part(split, ne - split)],
        ];
        let h = cpu::rms_norm(&x, &g, c.rms_eps);
        let want_logits: Vec<f32> = deq.chunks(n).map(|r| common::dot64(r, &h) as f32).collect();
        let store = |v: &[f32]| gpu.storage("in", bytemuck::cast_slice(v)).unwrap();
        let (xb, gb, bb) = (store(&x), store(&g), store(&bias));
        for pipes in common::pipelines() {
            let tag = format!(
                "{:?} route case {ci} ({fmt:?}, {ne} experts, top {k}, {:?})",
                pipes.variant, c.gating
            );
            // NaN logits, the count at 0 as the engine's zeroed buffer has it
            let mut init = vec![0x7FC0_0000u32; ne + 1];
            init[ne] = 0;
            let lb = gpu.storage("logits", bytemuck::cast_slice(&init)).unwrap();
            for (run, parts) in runs.iter().enumerate() {
                let swb = store(&vec![f32::NAN; k + 1]);
                let sb = gpu
                    .storage("sel", bytemuck::cast_slice(&vec![0xDEAD_BEEFu32; k + 1]))
                    .unwrap();
                let groups = parts.iter().map(|q| ops::route_groups(q.1 as u32)).sum();
                let mut ds = Vec::new();
                for (r0, rows, bufs) in parts {
                    let p = ops::RouteParams {
                        row0: *r0 as u32,
                        rows: *rows as u32,
                        groups,
                        ..ops::RouteParams::new(c)
                    };
                    let pb = gpu.uniform("p", &p);
                    let b = ops::RouteBindings {
                        p: &pb,
                        x: &xb,
                        g: &gb,
                        logits: &lb,
                        sel: &sb,
                        sel_w: &swb,
                        bias: &bb,
                        weights: bufs,
                    };
                    let wg = [ops::route_groups(*rows as u32), 1, 1];
                    ds.push(Dispatch::new(gpu, pipes, Kernel::Route(*fmt), &b, wg).unwrap());
                }
                ops::run(gpu, &ds).unwrap();
                let words = common::read_u32(&lb, ne + 1);
                assert_eq!(words[ne], 0, "{tag} run {run}: the count is not back at 0");
                let logits: Vec<f32> = words[..ne].iter().map(|&v| f32::from_bits(v)).collect();
                let e = cpu::rel_l2(&logits, &want_logits);
                assert!(e < ROUTE_LOGIT_TOL, "{tag}: logits rel L2 {e:.3e}");
                let (sel_want, w_want) =
                    glmw::reference::route(&logits, (*has_bias).then_some(&bias[..]), c);
                let tag = format!("{tag} run {run}");
                let dw = check_choice(&tag, &sb, &swb, &sel_want, &w_want);
                worst = (worst.0.max(e), worst.1.max(dw));
            }
        }
    }
    eprintln!(
        "route: worst logits rel L2 {:.2e} (tolerance {ROUTE_LOGIT_TOL:.0e}), weight error {:.2e} \
         (tolerance {ROUTER_W_TOL:.0e})",
        worst.0, worst.1
    );
}

/// Top `k` of (values, indices) by value descending, index ascending,
/// padded as the kernel pads a short slice.
fn top_k(v: &[f32], idx: &[u32], k: usize) -> Vec<(f32, u32)> {
    let mut all: Vec<(f32, u32)> = v.iter().cloned().zip(idx.iter().cloned()).collect();
    all.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    all.resize(k.max(all.len()), (-3.0e38, u32::MAX));
    all.truncate(k);
    all
}

#[test]
fn topk_two_passes_match_sort() {
    let gpu = common::gpu();
    // (n, workgroups of pass 1, k, tied values): the GLM vocabulary as the
    // plan runs it (greedy and 40 candidates), then small vectors with many
    // exact ties, uneven slices, and slices shorter than k.
    let cases = [
        (154_880usize, 128u32, 1usize, false),
        (154_880, 128, 40, false),
        (154_880, 128, 64, false),
        (1000, 7, 20, true),
        (100, 8, 20, true),
        (37, 1, 37, true),
    ];
    for (ci, &(n, n_wg, k, ties)) in cases.iter().enumerate() {
        let mut v = common::randn(n, 3.0, 7 + ci as u64);
        if ties {
            // + 0.0 turns -0.0 into 0.0, which the kernel's == treats as equal.
            v.iter_mut().for_each(|x| *x = (*x * 0.7).round() + 0.0);
        }
        let p1 = glmw::gpu::plan::topk_params(n as u32, n_wg, k as u32, true);
        let p2 = glmw::gpu::plan::topk_params(n as u32, n_wg, k as u32, false);
        let len = p1.len as usize;
        let ids: Vec<u32> = (0..n as u32).collect();
        let want1: Vec<(f32, u32)> = (0..n_wg as usize)
            .flat_map(|w| {
                let r = (w * len).min(n)..((w + 1) * len).min(n);
                top_k(&v[r.clone()], &ids[r], k)
            })
            .collect();
        let want = top_k(&v, &ids, k);
        let vb = gpu.storage("logits", bytemuck::cast_slice(&v)).unwrap();
        let (pb1, pb2) = (gpu.uniform("p1", &p1), gpu.uniform("p2", &p2));
        let unused = gpu.scratch("unused", 16).unwrap();
        for pipes in common::pipelines() {
            let nc = n_wg as usize * k;
            let c1v = gpu
                .storage("c1v", bytemuck::cast_slice(&vec![f32::NAN; nc + 1]))
                .unwrap();
            let c1i = gpu
                .storage("c1i", bytemuck::cast_slice(&vec![0xDEAD_BEEFu32; nc + 1]))
                .unwrap();
            let cv = gpu
                .storage("cv", bytemuck::cast_slice(&vec![f32::NAN; k + 1]))
                .unwrap();
            let cidx = gpu
                .storage("ci", bytemuck::cast_slice(&vec![0xDEAD_BEEFu32; k + 1]))
                .unwrap();
            let pass1 = ops::TopkBindings {
                p: &pb1,
                in_v: &vb,
                in_i: &unused,
                out_v: &c1v,
                out_i: &c1i,
            };
            let pass2 = ops::TopkBindings {
                p: &pb2,
                in_v: &c1v,
                in_i: &c1i,
                out_v: &cv,
                out_i: &cidx,
            };
            let first = |first| ops::TopkOverrides { first };
            let d1 = Dispatch::with(gpu, pipes, Kernel::TopK, &first(true), &pass1, [n_wg, 1, 1]);
            let d2 = Dispatch::with(gpu, pipes, Kernel::TopK, &first(false), &pass2, [1, 1, 1]);
            ops::run(gpu, &[d1.unwrap(), d2.unwrap()]).unwrap();
            let tag = format!("{:?} topk n={n} n_wg={n_wg} k={k}", pipes.variant);
            let got = |vb: &wgpu::Buffer, ib: &wgpu::Buffer, m: usize| -> Vec<(f32, u32)> {
                let v = gpu.read_f32(vb, m + 1).unwrap();
                let i = common::read_u32(ib, m + 1);
                assert!(
                    v[m].is_nan() && i[m] == 0xDEAD_BEEF,
                    "{tag}: wrote past its candidates"
                );
                v[..m].iter().cloned().zip(i[..m].iter().cloned()).collect()
            };
            let bits = |c: &[(f32, u32)]| -> Vec<(u32, u32)> {
                c.iter().map(|p| (p.0.to_bits(), p.1)).collect()
            };
            let g1 = got(&c1v, &c1i, nc);
            assert_eq!(
                bits(&g1),
                bits(&want1),
                "{tag}: pass 1 candidates {g1:?} vs {want1:?}"
            );
            let g2 = got(&cv, &cidx, k);
            assert_eq!(bits(&g2), bits(&want), "{tag}: top-k {g2:?} vs {want:?}");
        }
    }
}
