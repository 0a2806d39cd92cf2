//! The bench's counting and test semantics on the tiny synthetic model:
//! dispatches and wgpu barriers per token and per prefill chunk (pinned, so
//! a new dispatch or barrier is a visible decision), llama-bench's pp/tg at
//! depth, and the block tier's prediction. No timing is asserted.

mod common;

use glmw::bench;
use glmw::engine::{Engine, EngineOptions};
use glmw::gpu::barriers::Barriers;
use glmw::gpu::Variant;
use glmw::model::Model;

fn model() -> &'static Model {
    static M: std::sync::OnceLock<Model> = std::sync::OnceLock::new();
    M.get_or_init(|| Model::open(common::tiny_model()).unwrap())
}

fn engine(variant: Variant, n_ctx: usize) -> Engine<'static> {
    let opts = EngineOptions {
        n_ctx,
        variant: Some(variant),
        ubatch: 16,
        ..Default::default()
    };
    Engine::load(model(), common::gpu(), opts, &mut |_, _| {}).unwrap()
}

/// The tiny preset's counts (3 layers: one dense block, two MoE blocks, the
/// head). Update these when a plan change adds or removes a dispatch or a
/// barrier on purpose, and say so in the commit.
const DECODE: Barriers = Barriers {
    dispatches: 41,
    barriers: 30,
    transitions: 69,
};
/// Per full prefill chunk at depth 0 (one pass of the prefill plan, without
/// the head), on either attention kernel: its tokens attend in one split,
/// so no merge runs. kv_append runs beside q_b with no barrier from the
/// second block on (the first's kv_a writes q_a's buffer, where it wrote a
/// buffer of its own). moe_group's `rows` (written) and moe_sum's (read)
/// add transitions (three here) but no barrier: both dispatches already
/// have one. A MoE block's shared gate+up runs beside the experts' with
/// no barrier (it writes a buffer of its layer's, first used there).
const PREFILL: Barriers = Barriers {
    dispatches: 52,
    barriers: 46,
    transitions: 89,
};

#[test]
fn dispatches_and_barriers_per_token_and_chunk_are_pinned() {
    for v in [Variant::Subgroup, Variant::Shared] {
        let e = engine(v, 32);
        let (d, p) = (e.decode_barriers(), e.prefill_barriers());
        assert_eq!(d.dispatches, e.dispatches_per_token());
        let parts = glmw::bench::part_barriers(&e);
        let names: Vec<&str> = parts.iter().map(|p| p.0).collect();
        assert_eq!(names, ["embedding", "dense block", "MoE block", "head"]);
        // the embedding, one dense block, two MoE blocks and the head make
        // the token
        let sum = |f: fn(&Barriers) -> usize| {
            f(&parts[0].1) + f(&parts[1].1) + 2 * f(&parts[2].1) + f(&parts[3].1)
        };
        assert_eq!(sum(|b| b.dispatches), d.dispatches);
        assert_eq!(sum(|b| b.barriers), d.barriers);
        assert!(
            d == DECODE && p == PREFILL,
            "{v:?} tiny preset: decode {d:?}, prefill chunk {p:?}; pinned decode {DECODE:?}, \
             prefill {PREFILL:?}. If the plan changed on purpose, copy the new numbers into \
             DECODE / PREFILL in tests/gpu_bench.rs (barriers: wgpu's rule in gpu::barriers)"
        );
    }
}

#[test]
fn tests_run_at_their_depth_on_a_cache_filled_by_prefill() {
    let mut e = engine(Variant::Subgroup, 64);
    bench::model::warm_up(&mut e, 4).unwrap();
    let secs = bench::model::fill(&mut e, 0, 40).unwrap();
    assert!(secs > 0.0);
    assert_eq!(e.pos(), 40);
    let t = bench::model::tg(&mut e, 0, 3, 2).unwrap();
    assert_eq!(
        (t.name(), e.pos(), t.samples_ns.len()),
        ("tg3".into(), 3, 2)
    );
    let t = bench::model::pp(&mut e, 40, 5, 1).unwrap();
    assert_eq!((t.name(), e.pos()), ("pp5 @ d40".into(), 45));
    let t = bench::model::tg(&mut e, 40, 4, 1).unwrap();
    assert_eq!((t.name(), e.pos()), ("tg4 @ d40".into(), 44));
    let err = bench::model::check_fits(&e, 60, 5).unwrap_err();
    assert!(err.to_string().contains("--ctx"), "{err}");
}

#[test]
fn model_tier_runs_every_test_at_every_depth_in_llama_bench_order() {
    let mut e = engine(Variant::Subgroup, 64);
    let spec = bench::ModelSpec {
        prompts: vec![6, 0],
        gens: vec![3],
        depths: vec![0, 20],
        reps: 2,
        count: 2,
        rounds: 2,
    };
    let r = bench::model(&mut e, &spec).unwrap();
    let names: Vec<String> = r.tests.iter().map(|t| t.name()).collect();
    assert_eq!(names, ["pp6", "tg3", "pp6 @ d20", "tg3 @ d20"]);
    for t in &r.tests {
        assert_eq!(t.samples_ts().len(), 2);
        assert!(t.ts().0 > 0.0);
        assert_eq!(t.prediction.is_some(), t.n_gen > 0, "{}", t.name());
        // Where the host's time went, over the repetitions' steps.
        match &t.host {
            Some(h) => {
                assert_eq!(h.steps, 2 * 3, "{}", t.name());
                let (record, submit, wait) = h.per_step_us();
                assert!(record > 0.0 && submit > 0.0 && wait > 0.0, "{h:?}");
            }
            None => assert_eq!(t.n_gen, 0, "{}", t.name()),
        }
    }
    let p = r.tests[3].prediction.as_ref().unwrap();
    assert_eq!((p.pos, p.n_dense, p.n_moe), (21, 1, 2));
    assert!(p.token_us > 0.0 && p.dense.is_some() && p.moe.is_some());
    assert!(p.moe_sequence.is_some() && p.token_us_sequence().unwrap() > 0.0);
    // The reported prediction is the one from the MoE blocks in sequence.
    assert_eq!(p.predicted_us(), p.token_us_sequence().unwrap());
    assert_eq!(r.decode, e.decode_barriers());
    assert_eq!(r.fills.iter().map(|f| f.0).collect::<Vec<_>>(), [0, 20]);
}

#[test]
fn mean_and_sd_are_llama_bench_s() {
    assert_eq!(bench::mean_sd(&[]), (0.0, 0.0));
    assert_eq!(bench::mean_sd(&[5.0]), (5.0, 0.0));
    let (m, sd) = bench::mean_sd(&[1.0, 2.0, 3.0, 4.0]);
    assert_eq!(m, 2.5);
    // sample standard deviation (n - 1)
    assert!((sd - (5.0f64 / 3.0).sqrt()).abs() < 1e-12, "{sd}");
}

#[test]
fn op_costs_leave_out_each_op_once_and_the_engine_decodes_after() {
    let mut e = engine(Variant::Subgroup, 32);
    let want = e.logits(3).unwrap();
    e.reset();
    let c = bench::op_costs(&mut e, 5, 1).unwrap();
    let n = e.dispatches_per_token();
    // every dispatch belongs to exactly one op, named once, in token order
    assert_eq!(c.ops.iter().map(|o| o.count).sum::<usize>(), n);
    let names: Vec<&str> = c.ops.iter().map(|o| o.op.as_str()).collect();
    for (i, a) in names.iter().enumerate() {
        assert!(!names[i + 1..].contains(a), "{a} twice in {names:?}");
    }
    assert_eq!(names.first(), Some(&e.dispatch_info(0).0.as_str()));
    assert!(
        names.contains(&"attention") && names.contains(&"output"),
        "{names:?}"
    );
    for o in &c.ops {
        assert_eq!(o.without.n, 1, "{}", o.op);
    }
    // The replays without an op leave wrong values in the buffers; a reset
    // engine decodes as before.
    e.reset();
    let got = e.logits(3).unwrap();
    assert_eq!(got, want);
}

/// The micro tier's attention rows: one per --contexts value, found by the
/// op (not by the long-context kernel's name, which on adapters with
/// cooperative matrices is attention_coop), each naming the kernel that
/// runs at that context and its cache bytes.
#[test]
fn micro_times_attention_at_each_context_with_the_kernel_that_runs_there() {
    let short = glmw::gpu::ops::short_attention_max(false);
    let long = short + 64;
    let mut e = engine(Variant::Subgroup, long + 8);
    let r = bench::micro(&mut e, None, (2, 1), &[8, long]).unwrap();
    let attn: Vec<_> = r.rows.iter().filter(|r| r.op == "attention").collect();
    let ctx: Vec<_> = attn.iter().map(|r| r.context).collect();
    assert_eq!(ctx, [Some(8), Some(long)]);
    let row = (model().config.kv_row() * 2) as u64;
    for a in &attn {
        assert_eq!(a.bytes, a.context.unwrap() as u64 * row);
    }
    // The short kernel at 8 positions; past the longer of the two
    // hand-overs the long one: attention.wgsl (lavapipe) or
    // attention_coop.wgsl.
    let kernels: Vec<_> = attn.iter().map(|r| r.kernel).collect();
    assert_eq!(kernels[0], "attention_head");
    assert!(
        ["attention", "attention_coop"].contains(&kernels[1]),
        "{kernels:?}"
    );
}
