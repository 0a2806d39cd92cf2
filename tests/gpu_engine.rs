//! The whole GPU decode path on the tiny synthetic model against the CPU
//! reference, in both kernel variants: logits after a prompt and 16 decode
//! steps, greedy generation, weight splitting, and no GPU objects created
//! per token.

mod common;

use glmw::engine::{Engine, EngineOptions, Pick};
use glmw::gpu::Variant;
use glmw::model::Model;
use glmw::reference::{ops::rel_l2, MlaForm, Reference};
use glmw::synth::{Mix, Preset};

/// Logits vs the f32 reference. The GPU keeps the KV cache in f16 (as
/// llama.cpp does), which dominates the difference; f32 accumulation
/// elsewhere.
const LOGITS_TOL: f64 = 1e-3;

/// The prefill's intermediates where it runs on cooperative matrices: the
/// matmuls' and the attention's inputs are rounded to f16 (2^-11 relative
/// each), which grows to ~1e-3 by the third block of the tiny model (H100:
/// q_nope_absorbed-2 at 1.02e-3); the prefill logits tests allow 1e-2 for
/// the same reason (tests/gpu_prefill.rs).
const PREFILL_F16_TOL: f64 = 1e-2;

fn engine(variant: Variant, n_ctx: usize, max_binding: Option<u64>) -> Engine<'static> {
    let opts = EngineOptions {
        n_ctx,
        candidates: 1,
        max_binding,
        variant: Some(variant),
        ..Default::default()
    };
    common::tiny_engine(opts)
}

const VARIANTS: [Variant; 2] = [Variant::Subgroup, Variant::Shared];

#[test]
fn logits_match_reference_after_prompt_and_16_steps() {
    let m = common::tiny();
    let prompt: Vec<u32> = vec![1, 17, 300, 42, 7, 99, 256, 3];
    for v in VARIANTS {
        let mut e = engine(v, 512, None);
        let mut r = Reference::new(m, 512, MlaForm::Absorbed);
        let mut tokens = prompt.clone();
        let mut worst = 0f64;
        for i in 0..prompt.len() + 16 {
            let t = tokens[i];
            let want = r.forward(t).unwrap();
            let got = e.logits(t).unwrap();
            let err = rel_l2(&got, &want);
            worst = worst.max(err);
            if err >= LOGITS_TOL {
                panic!(
                    "{v:?}: position {i} token {t}: logits rel L2 {err:.3e} (tolerance {LOGITS_TOL:.0e}); {}",
                    first_divergence(v, &tokens[..=i])
                );
            }
            if i + 1 >= tokens.len() {
                tokens.push(argmax(&want));
            }
        }
        eprintln!(
            "{v:?}: worst logits rel L2 over {} positions: {worst:.2e}",
            tokens.len()
        );
    }
}

fn argmax(v: &[f32]) -> u32 {
    let mut best = 0;
    for (i, &x) in v.iter().enumerate() {
        if x > v[best] {
            best = i;
        }
    }
    best as u32
}

#[test]
fn greedy_generation_matches_reference() {
    let m = common::tiny();
    let prompt = [5u32, 60, 61, 400];
    let mut r = Reference::new(m, 64, MlaForm::Absorbed);
    let mut want = Vec::new();
    let mut next = 0;
    for &t in &prompt {
        next = argmax(&r.forward(t).unwrap());
    }
    for _ in 0..32 {
        want.push(next);
        next = argmax(&r.forward(next).unwrap());
    }
    for v in VARIANTS {
        let mut e = engine(v, 64, None);
        let mut next = 0;
        for &t in &prompt {
            next = e.step(t).unwrap()[0].0;
        }
        let mut got = Vec::new();
        for _ in 0..32 {
            got.push(next);
            next = e.step(next).unwrap()[0].0;
        }
        assert_eq!(got, want, "{v:?}: greedy tokens differ from the reference");
    }
}

/// The tiny model in each published mix decodes and prefills on the GPU as
/// the reference does, in both variants. Q4_K_M: Q4_K, Q5_0 where a row is
/// not a multiple of 256, Q6_K output and down projections; Q5_K_M the
/// same with Q5_K and Q5_1; Q6_K falls back to Q8_0. Q2_K, Q3_K_M and
/// IQ4_XS fall back to IQ4_NL; Q2_K has Q3_K down / attn_output, Q3_K_M
/// Q4_K (Q5_0 where 256 does not divide the row).
#[test]
fn every_mix_matches_reference() {
    use glmw::synth::Mix;
    for (mix, want) in [
        (Mix::Q4KM, &["F32", "Q4_K", "Q5_0", "Q6_K"][..]),
        (Mix::Q5KM, &["F32", "Q5_1", "Q5_K", "Q6_K"]),
        (Mix::Q6K, &["F32", "Q6_K", "Q8_0"]),
        (Mix::Q8_0, &["F32", "Q8_0"]),
        (Mix::F16, &["F16", "F32"]),
        (Mix::BF16, &["BF16", "F32"]),
        (Mix::Q2K, &["F32", "IQ4_NL", "Q2_K", "Q3_K", "Q6_K"]),
        (
            Mix::Q3KM,
            &["F32", "IQ4_NL", "Q3_K", "Q4_K", "Q5_0", "Q6_K"],
        ),
        (Mix::IQ4XS, &["F32", "IQ4_NL", "IQ4_XS", "Q6_K"]),
    ] {
        let path = common::tiny_in(mix);
        let file = glmw::gguf::GgufFile::open(&path).unwrap();
        let types: std::collections::BTreeSet<&str> =
            file.tensors().iter().map(|t| t.ggml_type.name()).collect();
        assert_eq!(types.into_iter().collect::<Vec<_>>(), want, "{mix:?}");
        let m = glmw::model::Model::open(&path).unwrap();
        for v in VARIANTS {
            let (decode, prefill) = mix_errors(&m, v);
            eprintln!(
                "{mix:?} {v:?}: worst decode logits rel L2 {decode:.2e}, prefill {prefill:.2e}"
            );
        }
    }
}

/// Worst rel L2 of the GPU's logits over 12 decoded tokens, and of the
/// prefill's last logits, against the reference; each under LOGITS_TOL.
fn mix_errors(m: &glmw::model::Model, v: Variant) -> (f64, f64) {
    let tokens = [1u32, 17, 300, 42, 7, 99, 256, 3, 5, 400, 11, 64];
    let opts = EngineOptions {
        n_ctx: 64,
        candidates: 1,
        variant: Some(v),
        ..Default::default()
    };
    let mut e = Engine::load(m, common::gpu(), opts, &mut |_, _| {}).unwrap();
    let mut r = Reference::new(m, 64, MlaForm::Absorbed);
    let mut worst = 0f64;
    let mut want = Vec::new();
    for (i, &t) in tokens.iter().enumerate() {
        want = r.forward(t).unwrap();
        let err = rel_l2(&e.logits(t).unwrap(), &want);
        assert!(
            err < LOGITS_TOL,
            "{v:?}: position {i}: logits rel L2 {err:.3e} (tolerance {LOGITS_TOL:.0e})"
        );
        worst = worst.max(err);
    }
    let mut e = Engine::load(m, common::gpu(), opts, &mut |_, _| {}).unwrap();
    let err = rel_l2(&e.prefill_logits(&tokens).unwrap(), &want);
    assert!(err < LOGITS_TOL, "{v:?}: prefill logits rel L2 {err:.3e}");
    (worst, err)
}

#[test]
fn split_weights_give_the_same_logits() {
    // 4 KiB parts split every matrix of the tiny model into several buffers.
    let mut whole = engine(Variant::Shared, 16, None);
    let mut split = engine(Variant::Shared, 16, Some(4096));
    assert!(
        split.matrices_split() > 10,
        "only {} matrices were split",
        split.matrices_split()
    );
    for t in [3u32, 9, 27] {
        let a = whole.logits(t).unwrap();
        let b = split.logits(t).unwrap();
        assert!(rel_l2(&b, &a) < 1e-6, "split vs whole: {}", rel_l2(&b, &a));
    }
}

#[test]
fn decoding_creates_no_gpu_objects_and_stops_at_full_context() {
    // A device of its own: the other tests create objects on the shared one.
    let gpu = glmw::gpu::Gpu::new(Default::default()).unwrap();
    let opts = EngineOptions {
        n_ctx: 8,
        ..Default::default()
    };
    let mut e = Engine::load(common::tiny(), &gpu, opts, &mut |_, _| {}).unwrap();
    e.step(1).unwrap();
    let before = gpu.objects_created();
    for t in 0..7 {
        if t % 2 == 0 {
            e.step(t).unwrap();
        } else {
            e.step_ahead(t, Pick::First).unwrap();
        }
    }
    assert_eq!(gpu.objects_created(), before, "a token created GPU objects");
    let err = e.step_ahead(1, Pick::First).unwrap_err();
    assert!(
        matches!(err, glmw::Error::ContextFull { n_ctx: 8 }),
        "{err}"
    );
    assert!(
        e.dispatches_per_token() <= 14 * 3 + 4,
        "{}",
        e.dispatches_per_token()
    );
}

/// Greedy steps queued one ahead on the GPU's own pick (`step_ahead`) give
/// the candidates of plain steps bit for bit, also when the next token is
/// not the queued pick (the queued step is dropped), after a truncate, and
/// up to the end of the context.
#[test]
fn steps_queued_ahead_match_plain_steps() {
    let n_vocab = common::tiny().config.n_vocab as u32;
    for v in VARIANTS {
        let n_ctx = 24;
        let mut a = engine(v, n_ctx, None);
        let mut b = engine(v, n_ctx, None);
        for e in [&mut a, &mut b] {
            e.set_candidates(4).unwrap();
        }
        let prompt = [1, 17, 300, 42];
        let first = a.prefill(&prompt).unwrap();
        assert_eq!(first, b.prefill(&prompt).unwrap());
        let mut next = first[0].0;
        let mut i = 0;
        while a.pos() < n_ctx {
            if i == 9 {
                a.truncate(7);
                b.truncate(7);
            }
            // Every fifth token is not the pick the GPU queued.
            let t = if i % 5 == 4 {
                (next + 1) % n_vocab
            } else {
                next
            };
            let got = a.step_ahead(t, Pick::First).unwrap();
            assert_eq!(got, b.step(t).unwrap(), "{v:?}: step {i} (token {t})");
            next = got[0].0;
            i += 1;
        }
        let err = a.step_ahead(next, Pick::First).unwrap_err();
        assert!(matches!(err, glmw::Error::ContextFull { .. }), "{err}");
        // Only the tokens that were not the pick are redone.
        let (used, redone) = a.steps_queued_ahead();
        assert!(
            used >= 10 && (1..=i / 5).contains(&redone),
            "{v:?}: {used} used, {redone} redone"
        );
    }
}

/// An engine dropped with a step queued ahead (never read back) leaves no
/// work on the GPU: a process that exits right after must not tear the
/// driver down under running work (Mesa's lavapipe aborted a test binary
/// at exit with "double free or corruption"). Its own device, so no other
/// test's work is in its queue.
#[test]
fn an_engine_dropped_with_a_step_queued_ahead_leaves_the_gpu_idle() {
    let gpu = glmw::gpu::Gpu::new(Default::default()).unwrap();
    let opts = EngineOptions {
        n_ctx: 64,
        candidates: 1,
        ..Default::default()
    };
    let mut e = Engine::load(common::tiny(), &gpu, opts, &mut |_, _| {}).unwrap();
    let mut next = e.prefill(&[1, 17, 300, 42]).unwrap()[0].0;
    for _ in 0..8 {
        next = e.step_ahead(next, Pick::First).unwrap()[0].0;
    }
    drop(e);
    let status = gpu.device.poll(wgpu::PollType::Poll).unwrap();
    assert!(status.is_queue_empty(), "work left on the GPU: {status:?}");
}

/// Sampled decoding queued ahead (the GPU samples the next token with the
/// uniform the host's sampler will draw: pick.wgsl) gives the tokens of
/// plain steps with the same seed, and most steps come from the queue.
#[test]
fn sampled_steps_queued_ahead_match_plain_steps() {
    use glmw::sample::{Sampler, SamplerOptions};
    for v in VARIANTS {
        let opts = SamplerOptions {
            temperature: 1.5,
            top_k: 20,
            top_p: 0.9,
            min_p: 0.01,
            seed: 7,
            ..Default::default()
        };
        let (mut sa, mut sb) = (Sampler::new(opts).unwrap(), Sampler::new(opts).unwrap());
        let mut a = engine(v, 64, None);
        let mut b = engine(v, 64, None);
        for e in [&mut a, &mut b] {
            e.set_candidates(sa.candidates()).unwrap();
        }
        let prompt = [1, 17, 300, 42];
        let (mut ca, mut cb) = (a.prefill(&prompt).unwrap(), b.prefill(&prompt).unwrap());
        for i in 0..40 {
            let (ta, tb) = (sa.sample(&ca).unwrap(), sb.sample(&cb).unwrap());
            assert_eq!(ta, tb, "{v:?}: token {i}");
            let pick = sa.pick_ahead().unwrap();
            ca = a.step_ahead(ta, pick).unwrap();
            cb = b.step(tb).unwrap();
            assert_eq!(ca, cb, "{v:?}: candidates after token {i}");
        }
        let (used, redone) = a.steps_queued_ahead();
        assert!(
            used >= 30,
            "{v:?}: only {used} of 40 steps came from the queue ({redone} redone)"
        );
    }
}

#[test]
fn long_context_uses_attention_splits_and_matches_reference() {
    // Past 32 positions attention splits over several workgroups per head
    // (ops::attention_splits); 150 tokens reach 5 splits.
    assert_eq!(glmw::gpu::ops::attention_splits(150), 5);
    let m = common::tiny();
    let mut e = engine(Variant::Subgroup, 160, None);
    let mut r = Reference::new(m, 160, MlaForm::Absorbed);
    for i in 0..150u32 {
        let t = (i * 37 + 5) % 470;
        let want = r.forward(t).unwrap();
        let got = e.logits(t).unwrap();
        if i % 50 == 49 {
            let err = rel_l2(&got, &want);
            assert!(err < LOGITS_TOL, "position {i}: logits rel L2 {err:.3e}");
        }
    }
}

/// Decode on both sides of `ops::short_attention_max`, where the plan
/// switches from the per-head attention kernel to the all-heads one
/// (attention_coop.wgsl where the adapter has cooperative matrices): the
/// logits match the reference before and after (the subgroup variant; both
/// kernels in both variants against the f64 oracle: tests/gpu_attention.rs).
#[test]
fn decode_attention_switch_at_long_context_matches_reference() {
    let m = common::tiny();
    let coop = glmw::gpu::ops::attention_coop_fits(common::gpu(), m.config.n_embd_head_qk_rope);
    let max = glmw::gpu::ops::short_attention_max(coop);
    let n_ctx = max + 8;
    let prompt: Vec<u32> = (0..max as u32 - 3).map(|i| (i * 37 + 5) % 470).collect();
    let mut r = Reference::new(m, n_ctx, MlaForm::Absorbed);
    for &t in &prompt {
        r.forward(t).unwrap();
    }
    let steps: Vec<u32> = (0..5).map(|i| 11 + 29 * i).collect();
    let want: Vec<Vec<f32>> = steps.iter().map(|&t| r.forward(t).unwrap()).collect();
    for v in [Variant::Subgroup] {
        let mut e = engine(v, n_ctx, None);
        e.prefill(&prompt).unwrap();
        for (i, (&t, w)) in steps.iter().zip(&want).enumerate() {
            let got = e.logits(t).unwrap();
            let err = rel_l2(&got, w);
            assert!(
                err < LOGITS_TOL,
                "{v:?} position {}: logits rel L2 {err:.3e}",
                prompt.len() + i
            );
        }
    }
}

/// Replay `tokens` on a fresh engine and reference, tracing the last one,
/// and name the first intermediate whose rel L2 passes the tolerance.
fn first_divergence(v: Variant, tokens: &[u32]) -> String {
    let (gpu, cpu) = traces(v, tokens);
    for (name, g) in &gpu {
        if let Some(c) = cpu.get(name) {
            let e = rel_l2(g, c);
            if e >= LOGITS_TOL {
                return format!("first intermediate over tolerance: {name} (rel L2 {e:.3e})");
            }
        }
    }
    "no traced intermediate is over tolerance".into()
}

/// GPU and reference traces of the last of `tokens`.
fn traces(v: Variant, tokens: &[u32]) -> (Vec<(String, Vec<f32>)>, glmw::reference::Trace) {
    let mut e = engine(v, 64, None);
    let mut r = Reference::new(common::tiny(), 64, MlaForm::Absorbed);
    let (last, head) = tokens.split_last().unwrap();
    for &t in head {
        e.step(t).unwrap();
        r.forward(t).unwrap();
    }
    r.set_tracing(true);
    let logits = r.forward(*last).unwrap();
    let mut trace = r.trace().unwrap().clone();
    trace.entries.push(("result_output".into(), logits));
    (e.trace_token(*last).unwrap(), trace)
}

/// Check each of `gpu`'s intermediates (the last `len` floats of each, the
/// last token's row) that the reference also records; return the names.
fn compare_traces<'a>(
    tag: &str,
    gpu: &'a [(String, Vec<f32>)],
    cpu: &glmw::reference::Trace,
    rows: usize,
    tol: f64,
) -> Vec<&'a str> {
    let mut names = Vec::new();
    for (name, g) in gpu {
        // The plans also leave values the reference does not record
        // (q_a, kv_cmpr_pe, the swiglu products).
        let Some(c) = cpu.get(name) else { continue };
        assert_eq!(g.len(), rows * c.len(), "{tag}: {name}: length");
        let e = rel_l2(&g[g.len() - c.len()..], c);
        assert!(
            e < tol,
            "{tag}: {name}: rel L2 {e:.3e} (tolerance {tol:.0e})"
        );
        names.push(name.as_str());
    }
    names
}

#[test]
fn every_traced_intermediate_matches_reference_by_name() {
    for v in VARIANTS {
        let (gpu, cpu) = traces(v, &[9, 8, 7, 300, 42]);
        let names = compare_traces(&format!("{v:?}"), &gpu, &cpu, 1, LOGITS_TOL);
        for must in [
            "inp_embd",
            "q-0",
            "q_nope_absorbed-1",
            "kqv_out-2",
            "ffn_inp-2",
            "ffn_moe_logits-1",
            "ffn_moe_weights-1",
            "ffn_shexp-2",
            "l_out-2",
            "result_norm",
            "result_output",
        ] {
            assert!(names.contains(&must), "trace lacks {must}: {names:?}");
        }
    }
}

/// The prefill's lowering leaves the same named intermediates: a chunk's
/// last row of each against the reference's trace of its last token.
#[test]
fn every_prefill_traced_intermediate_matches_reference_by_name() {
    let tokens = [9u32, 8, 7, 300, 42];
    for v in VARIANTS {
        let mut e = engine(v, 64, None);
        let gpu = e.trace_prefill(&tokens).unwrap();
        let mut r = Reference::new(common::tiny(), 64, MlaForm::Absorbed);
        let (last, head) = tokens.split_last().unwrap();
        r.forward_all(head).unwrap();
        r.set_tracing(true);
        r.forward(*last).unwrap();
        let cpu = r.trace().unwrap();
        let tol = match common::gpu().caps.coop {
            true => PREFILL_F16_TOL,
            false => LOGITS_TOL,
        };
        let names = compare_traces(&format!("{v:?} prefill"), &gpu, cpu, tokens.len(), tol);
        // q_a, kv_a and the router logits are split-K matmuls whose
        // buffers hold partial sums (ops::matmul_k_parts): their
        // consumers' outputs are traced instead.
        for must in [
            "inp_embd",
            "attn_norm-0",
            "q_a_norm-1",
            "q_nope_absorbed-1",
            "kqv_out-2",
            "ffn_norm-0",
            "ffn_moe_weights-1",
            "ffn_moe_weights-2",
            "l_out-2",
        ] {
            assert!(
                names.contains(&must),
                "prefill trace lacks {must}: {names:?}"
            );
        }
        // The chunk is in the cache: the next token decodes from it.
        assert_eq!(e.pos(), tokens.len());
    }
}

/// Direct q (DeepSeek-V2-Lite's form, no q-LoRA) through both plans'
/// lowerings: the prefill's last logits and the next decode step's against
/// the reference, both variants.
#[test]
fn direct_q_model_matches_reference() {
    let m: &'static Model = Box::leak(Box::new(Model::open(common::direct_q()).unwrap()));
    assert_eq!(m.config.n_lora_q, 0);
    prefill_and_step_match_reference(m);
}

/// DeepSeek-V2-Lite's structure at tiny size (`glmw synth --preset
/// tiny-v2-lite`): q without LoRA, softmax gating without renormalisation,
/// two shared experts, YaRN.
#[test]
fn tiny_v2_lite_model_matches_reference() {
    let p = common::temp_dir("tiny-v2-lite").join("m.gguf");
    glmw::synth::synth(&p, Preset::TinyV2Lite, Mix::Q4_0, 1, &mut |_, _| {}).unwrap();
    let m: &'static Model = Box::leak(Box::new(Model::open(&p).unwrap()));
    let c = &m.config;
    assert_eq!((c.n_lora_q, c.n_expert_used), (0, 3));
    assert!(!c.expert_weights_norm && c.yarn.is_some());
    prefill_and_step_match_reference(m);
}

/// A dense MLA model (every block dense, as Youtu-LLM): no router at all.
#[test]
fn all_dense_model_matches_reference() {
    let m: &'static Model = Box::leak(Box::new(Model::open(common::all_dense(|_| {})).unwrap()));
    assert_eq!(m.config.n_layer_dense_lead, m.config.n_layer);
    prefill_and_step_match_reference(m);
}

/// A prompt through the prefill, then one decode step, in both variants:
/// the logits of both against the reference.
fn prefill_and_step_match_reference(m: &'static Model) {
    let tokens = [5u32, 60, 61, 400, 7, 99];
    let mut r = Reference::new(m, 64, MlaForm::Absorbed);
    let want = r.forward_all(&tokens).unwrap();
    let (last, prompt) = tokens.split_last().unwrap();
    for v in VARIANTS {
        let opts = EngineOptions {
            n_ctx: 64,
            variant: Some(v),
            ..Default::default()
        };
        let mut e = Engine::load(m, common::gpu(), opts, &mut |_, _| {}).unwrap();
        let got = [e.prefill_logits(prompt).unwrap(), e.logits(*last).unwrap()];
        for (i, (g, w)) in got.iter().zip(&want[prompt.len() - 1..]).enumerate() {
            let err = rel_l2(g, w);
            assert!(err < LOGITS_TOL, "{v:?}: logits {i}: rel L2 {err:.3e}");
        }
    }
}

/// The engine's rotary table (`gpu::rope`, its own code) against the
/// reference's, plain and with YaRN (GLM-4.7-Flash-like and extreme ramps),
/// at positions up to 2^20.
#[test]
fn rope_table_matches_reference() {
    use glmw::model::Yarn;
    let yarns = [
        None,
        Some(Yarn {
            freq_scale: 0.25,
            n_ctx_orig: 4096,
            beta_fast: 32.0,
            beta_slow: 1.0,
            ext_factor: 1.0,
            log_mul: 0.1,
        }),
        Some(Yarn {
            freq_scale: 1.0 / 40.0,
            n_ctx_orig: 512,
            beta_fast: 8.0,
            beta_slow: 4.0,
            ext_factor: 0.5,
            log_mul: 0.0,
        }),
    ];
    for yarn in &yarns {
        for (n_dims, base) in [(64, 1e6f32), (64, 10000.0), (128, 50000.0)] {
            for pos in [0usize, 1, 7, 511, 4095, 16383, 1 << 20] {
                let got = glmw::gpu::rope::cos_sin(pos, n_dims, base, yarn.as_ref());
                let want = glmw::reference::ops::rope_cos_sin(pos, n_dims, base, yarn.as_ref());
                assert_eq!(got.len(), want.len());
                for (i, (g, w)) in got.iter().zip(&want).enumerate() {
                    // f64 phases of up to ~1e6 radians: ~1e-10 apart.
                    assert!(
                        (g.0 - w.0).abs() < 1e-5 && (g.1 - w.1).abs() < 1e-5,
                        "pos {pos} pair {i} ({n_dims} dims, base {base}, {yarn:?}): {g:?} vs {w:?}"
                    );
                }
            }
        }
    }
}
