//! Batched prefill on the tiny synthetic model, in both kernel variants:
//! the logits after prefilling a prompt against the CPU reference and
//! against the token-by-token path, at lengths 1, 7, 64 and one that spans
//! several chunks with a partial last one; decoding after a prefill; and
//! prefill after decoding (a chat turn's new text); a short chunk deep in
//! the context, its attention split over positions; the logits of every
//! position at once (perplexity's path).

mod common;

use glmw::engine::{Engine, EngineOptions};
use glmw::gpu::Variant;
use glmw::reference::{ops::rel_l2, MlaForm, Reference};

/// Same bound as the decode path (tests/gpu_engine.rs): the f16 KV cache
/// dominates the difference to the f32 reference.
const F32_LOGITS_TOL: f64 = 1e-3;
/// Prefill vs token-by-token on the GPU: the same cache rows, different
/// summation orders.
const F32_PATHS_TOL: f64 = 1e-4;
/// With cooperative matrices (matmul_coop.wgsl) every prefill matmul
/// rounds its weights and inputs to f16: ~4e-4 relative error per matmul
/// (tests/gpu_matmul.rs COOP_TOL), independent between the ~10 matmuls on
/// each block's residual path, so ~sqrt(10·L)·4e-4 ~ 2e-3 for the tiny
/// model's blocks, plus the f16 cache's 1e-3. 1e-2 leaves room for that;
/// a broken kernel gives O(1). Token by token (decode, f32 matvecs) differs
/// from it by as much.
const COOP_LOGITS_TOL: f64 = 1e-2;

/// (vs the reference, vs token by token) tolerances of the prefill path
/// this adapter runs, and its name.
fn tolerances() -> (f64, f64, &'static str) {
    match common::gpu().caps.coop {
        true => (
            COOP_LOGITS_TOL,
            COOP_LOGITS_TOL,
            "cooperative matrices (f16 tiles)",
        ),
        false => (
            F32_LOGITS_TOL,
            F32_PATHS_TOL,
            "f32 (no 16x16 f16 cooperative matrix)",
        ),
    }
}

fn engine(variant: Variant, ubatch: usize) -> Engine<'static> {
    let opts = EngineOptions {
        n_ctx: 256,
        variant: Some(variant),
        ubatch,
        ..Default::default()
    };
    common::tiny_engine(opts)
}

/// A prompt of `n` tokens spread over the vocabulary.
fn prompt(n: usize, seed: u32) -> Vec<u32> {
    let v = common::tiny().config.n_vocab as u32;
    (0..n as u32)
        .map(|i| (i.wrapping_mul(2_654_435_761).wrapping_add(seed * 97)) % v)
        .collect()
}

fn reference_logits(tokens: &[u32]) -> Vec<f32> {
    let mut r = Reference::new(common::tiny(), 256, MlaForm::Absorbed);
    let mut out = Vec::new();
    for &t in tokens {
        out = r.forward(t).unwrap();
    }
    out
}

#[test]
fn prefill_matches_reference_and_token_by_token() {
    // (prompt length, ubatch): one token, a partial tile, exactly four
    // chunks, and three chunks with a partial last one.
    let cases = [(1usize, 16usize), (7, 16), (64, 16), (40, 16), (64, 512)];
    let (tol, paths_tol, _) = tolerances();
    for v in [Variant::Subgroup, Variant::Shared] {
        for (i, &(n, ub)) in cases.iter().enumerate() {
            let p = prompt(n, i as u32);
            let want = reference_logits(&p);
            let mut e = engine(v, ub);
            let got = e.prefill_logits(&p).unwrap();
            assert_eq!(e.pos(), n);
            let err = rel_l2(&got, &want);
            assert!(
                err < tol,
                "{v:?}: {n} tokens, ubatch {ub}: prefill logits rel L2 {err:.3e} vs the reference (tolerance {tol:.0e})"
            );
            let mut s = engine(v, ub);
            let mut step = Vec::new();
            for &t in &p {
                step = s.logits(t).unwrap();
            }
            let err2 = rel_l2(&got, &step);
            assert!(
                err2 < paths_tol,
                "{v:?}: {n} tokens, ubatch {ub}: prefill vs token by token rel L2 {err2:.3e} (tolerance {paths_tol:.0e})"
            );
            eprintln!(
                "{v:?} n={n} ubatch={ub}: vs reference {err:.2e}, vs token by token {err2:.2e}"
            );
        }
    }
}

/// The f32 path over 100 and 1000 tokens: 3.0e-3 measured at 100 on
/// lavapipe (the f16 KV cache's error grows with the prefix attended
/// over; the 1e-3 of shorter prompts is not met there yet).
const F32_LONG_TOL: f64 = 5e-3;

/// Prompts of 1, 100 and 1000 tokens (two chunks of 512, the last partial)
/// against the CPU reference, on whichever prefill path the adapter runs.
#[test]
fn long_prompts_match_reference() {
    let (tol, _, path) = tolerances();
    let tol = tol.max(F32_LONG_TOL);
    eprintln!("prefill path: {path}");
    for (i, n) in [1usize, 100, 1000].into_iter().enumerate() {
        let p = prompt(n, 11 + i as u32);
        let mut r = Reference::new(common::tiny(), 1024, MlaForm::Absorbed);
        let mut want = Vec::new();
        for &t in &p {
            want = r.forward(t).unwrap();
        }
        let opts = EngineOptions {
            n_ctx: 1024,
            ubatch: 512,
            ..Default::default()
        };
        let got = common::tiny_engine(opts).prefill_logits(&p).unwrap();
        let err = rel_l2(&got, &want);
        eprintln!("{n} tokens: prefill logits rel L2 {err:.2e} (tolerance {tol:.0e})");
        assert!(
            err < tol,
            "{n} tokens: rel L2 {err:.3e} ({path}, tolerance {tol:.0e})"
        );
    }
}

#[test]
fn all_logits_match_reference_at_every_position() {
    // 21 tokens in chunks of 8: two full chunks and a partial one.
    let p = prompt(21, 5);
    let n_vocab = common::tiny().config.n_vocab;
    let mut r = Reference::new(common::tiny(), 256, MlaForm::Absorbed);
    let want: Vec<Vec<f32>> = p.iter().map(|&t| r.forward(t).unwrap()).collect();
    let tol = tolerances().0;
    for v in [Variant::Subgroup, Variant::Shared] {
        let mut e = engine(v, 8);
        e.prefill(&p[..3]).unwrap(); // from a position other than 0
        let got = e.prefill_all_logits(&p[3..]).unwrap();
        assert_eq!(got.len(), (p.len() - 3) * n_vocab);
        assert_eq!(e.pos(), p.len());
        for (j, row) in got.chunks_exact(n_vocab).enumerate() {
            let err = rel_l2(row, &want[3 + j]);
            assert!(
                err < tol,
                "{v:?}: position {}: all-rows logits rel L2 {err:.3e} (tolerance {tol:.0e})",
                3 + j
            );
        }
        // decoding goes on after it
        let next = e.logits(p[0]).unwrap();
        let mut all = p.clone();
        all.push(p[0]);
        let err = rel_l2(&next, &reference_logits(&all));
        assert!(
            err < tol,
            "{v:?}: decode after all-rows prefill rel L2 {err:.3e}"
        );
    }
}

/// A chat turn's few tokens deep in the context: each token's positions
/// go in several splits (`ops::prefill_splits`: 3 tokens over 303
/// positions take 4) merged by attention_merge.wgsl, so the chunk does not
/// read the whole cache in one workgroup a token. Its logits against the
/// reference, in both variants.
#[test]
fn short_chunk_at_depth_splits_and_matches_reference() {
    let tiny = common::tiny();
    let n_head = tiny.config.n_head as u32;
    for coop in [false, true] {
        let rows = glmw::gpu::ops::prefill_split_rows(coop, 512);
        assert_eq!(
            glmw::gpu::ops::prefill_splits(coop, 3, n_head, 303, rows),
            4
        );
    }
    let p = prompt(303, 21);
    let mut r = Reference::new(tiny, 512, MlaForm::Absorbed);
    let mut want = Vec::new();
    for &t in &p {
        want = r.forward(t).unwrap();
    }
    let tol = tolerances().0.max(F32_LONG_TOL);
    for v in [Variant::Subgroup, Variant::Shared] {
        let opts = EngineOptions {
            n_ctx: 512,
            variant: Some(v),
            ubatch: 512,
            ..Default::default()
        };
        let mut e = common::tiny_engine(opts);
        e.prefill(&p[..300]).unwrap();
        let got = e.prefill_logits(&p[300..]).unwrap();
        let err = rel_l2(&got, &want);
        eprintln!("{v:?}: 3 tokens after 300: rel L2 {err:.2e} (tolerance {tol:.0e})");
        assert!(
            err < tol,
            "{v:?}: 3 tokens after 300: rel L2 {err:.3e} (tolerance {tol:.0e})"
        );
    }
}

#[test]
fn decode_after_prefill_and_prefill_after_decode() {
    let p = prompt(30, 9);
    let tol = tolerances().0;
    for v in [Variant::Subgroup, Variant::Shared] {
        let mut e = engine(v, 8);
        // prefill 20, decode 3, prefill 7 more: a chat's second turn
        e.prefill(&p[..20]).unwrap();
        for &t in &p[20..23] {
            e.step(t).unwrap();
        }
        let got = e.prefill_logits(&p[23..]).unwrap();
        let want = reference_logits(&p);
        let err = rel_l2(&got, &want);
        assert!(
            err < tol,
            "{v:?}: mixed prefill/decode logits rel L2 {err:.3e} (tolerance {tol:.0e})"
        );
        // and decoding goes on from the prefilled cache
        let next = e.logits(5).unwrap();
        let mut all = p.clone();
        all.push(5);
        let err = rel_l2(&next, &reference_logits(&all));
        assert!(err < tol, "{v:?}: decode after prefill rel L2 {err:.3e}");
    }
}

#[test]
fn prefill_errors() {
    let mut e = engine(Variant::Shared, 16);
    let msg = |r: glmw::Result<Vec<(u32, f32)>>| r.unwrap_err().to_string();
    assert!(msg(e.prefill(&[])).contains("at least one token"));
    let v = common::tiny().config.n_vocab as u32;
    assert!(msg(e.prefill(&[1, v])).contains("outside the vocabulary"));
    assert_eq!(e.pos(), 0, "a rejected prefill must not move the position");
    let long = prompt(257, 1);
    assert!(matches!(
        e.prefill(&long),
        Err(glmw::Error::ContextFull { n_ctx: 256 })
    ));
    assert_eq!(e.pos(), 0);
    let opts = EngineOptions {
        ubatch: 0,
        ..Default::default()
    };
    let err = Engine::load(common::tiny(), common::gpu(), opts, &mut |_, _| {})
        .err()
        .unwrap();
    assert!(err.to_string().contains("ubatch"), "{err}");
}
