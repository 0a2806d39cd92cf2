//! The quality gate of the built-in model (glmw-tiny, tools/model,
//! docs/tiny-model.md): perplexity on the held-out KJV chapters through the
//! CPU reference and the GPU must both be within 1% of the perplexity
//! PyTorch measured for the same Q4_0-mix weights, and the greedy
//! continuation of a fixed prompt must be the one PyTorch produced.
//! Numbers from tools/model/ppl.json (`q4_0`). On text the model has never
//! seen, the GPU's perplexity must be the CPU reference's within 0.02%.

mod common;

use common::glmw;
use glmw::reference::{MlaForm, Reference};
use glmw::tokenizer::Tokenizer;

/// Held-out perplexity of the shipped file in PyTorch (tools/train.py,
/// `--ctx 256` windows, second half scored, 7239 tokens).
const TORCH_PPL: f64 = 17.37911636396283;
/// The gate: relative difference to the PyTorch number.
const PPL_TOL: f64 = 0.01;
const TEST_SPLIT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tools/data/kjv-test.txt");

const PROMPT: &str = "And God said";
/// PyTorch's greedy continuation of [gMASK]<sop>PROMPT, 32 tokens.
const GREEDY_IDS: [u32; 32] = [
    321, 332, 11, 1342, 517, 345, 1696, 371, 11, 1342, 517, 345, 1696, 371, 278, 296, 309, 388, 11,
    303, 491, 258, 1299, 268, 401, 11, 378, 457, 959, 1800, 283, 371,
];
const GREEDY_TEXT: &str = " unto him, Thou shalt not kill me, Thou shalt not kill me.\nAnd he said, I am the Son of man, which hath betrayed me";

/// The number after `"key":` in a flat JSON document.
fn number(doc: &str, key: &str) -> f64 {
    let rest = doc
        .split(&format!("\"{key}\":"))
        .nth(1)
        .unwrap_or_else(|| panic!("no {key:?} in {doc}"));
    let end = rest.find([',', '}']).unwrap_or(rest.len());
    rest[..end].trim().parse().unwrap()
}

fn perplexity(backend: &str) -> f64 {
    let doc = perplexity_json(TEST_SPLIT, backend);
    assert_eq!(number(&doc, "tokens_scored"), 7239.0, "{doc}");
    number(&doc, "ppl")
}

/// `glmw perplexity --json` over `file` in windows of 256 on `backend`.
fn perplexity_json(file: &str, backend: &str) -> String {
    let o = glmw(&[
        "perplexity",
        "-f",
        file,
        "--ctx",
        "256",
        "--backend",
        backend,
        "--json",
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        o.status.success(),
        "glmw perplexity --backend {backend}: {err}"
    );
    assert!(
        err.contains("glmw-tiny (built in"),
        "without --model the built-in model is used and named: {err}"
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn gate(backend: &str) {
    let ppl = perplexity(backend);
    let rel = (ppl / TORCH_PPL - 1.0).abs();
    eprintln!("{backend}: ppl {ppl:.5} vs PyTorch {TORCH_PPL:.5} ({rel:.2e})");
    assert!(
        rel < PPL_TOL,
        "{backend}: held-out perplexity {ppl:.4} is {:.2}% from PyTorch's {TORCH_PPL:.4} (gate {:.0}%)",
        100.0 * rel,
        100.0 * PPL_TOL
    );
}

#[test]
fn perplexity_gate_cpu_reference() {
    gate("cpu");
}

#[test]
fn perplexity_gate_gpu() {
    gate("auto");
}

/// Modern technical English (the first 6,000 bytes of
/// docs/architecture.md as of 2026-11-29), which the KJV-trained model
/// predicts badly: its large, confident errors make the residual stream
/// large, where biased rounding shows.
const UNSEEN_TEXT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/unseen-prose.txt");

/// The GPU's perplexity against the CPU reference's on UNSEEN_TEXT.
/// Rounding that is biased rather than noisy moves every score the same
/// way, which the logits tests (rel L2 on a few prompts) do not see, nor
/// the 1% gate above: matmul_coop.wgsl with the residual started in the
/// tensor cores' f32 accumulators (session 32) passed both and moved this
/// perplexity by -9.7e-4 of the CPU's. Measured on an H200: +4.5e-5 with
/// cooperative matrices, +2.3e-7 on the f32 path (lavapipe: -9e-7). The
/// bound sits 4x above the first and 5x below the bias.
const GPU_CPU_TOL: f64 = 2e-4;

#[test]
fn gpu_perplexity_on_unseen_text_matches_the_cpu_reference() {
    let ppl = |backend| number(&perplexity_json(UNSEEN_TEXT, backend), "ppl");
    let (gpu, cpu) = (ppl("auto"), ppl("cpu"));
    let rel = gpu / cpu - 1.0;
    eprintln!("unseen text: gpu ppl {gpu:.4} vs cpu {cpu:.4}: {rel:+.2e}");
    assert!(
        rel.abs() < GPU_CPU_TOL,
        "GPU perplexity {gpu:.4} is {:+.4}% from the CPU reference's {cpu:.4} on {UNSEEN_TEXT} (tolerance {:.2}%)",
        100.0 * rel,
        100.0 * GPU_CPU_TOL
    );
}

#[test]
fn greedy_continuation_cpu_reference() {
    let model = glmw::builtin::model().unwrap();
    let tok = Tokenizer::from_gguf(&model.file).unwrap();
    // generate's prefix: [gMASK]<sop>, then the prompt
    let mut ids = tok.encode("[gMASK]<sop>", true).unwrap();
    ids.extend(tok.encode(PROMPT, false).unwrap());
    let mut r = Reference::new(&model, 64, MlaForm::Absorbed);
    let mut logits = Vec::new();
    for &t in &ids {
        logits = r.forward(t).unwrap();
    }
    let mut out = Vec::new();
    for _ in 0..GREEDY_IDS.len() {
        let next = (0..logits.len())
            .max_by(|&a, &b| logits[a].total_cmp(&logits[b]))
            .unwrap() as u32;
        out.push(next);
        logits = r.forward(next).unwrap();
    }
    assert_eq!(out, GREEDY_IDS, "CPU reference greedy continuation");
    assert_eq!(tok.decode(&out).unwrap(), GREEDY_TEXT);
}

#[test]
fn greedy_continuation_gpu() {
    let o = glmw(&[
        "generate", "-p", PROMPT, "-n", "32", "--temp", "0", "--json",
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let doc = String::from_utf8_lossy(&o.stdout);
    let want: Vec<String> = GREEDY_IDS.iter().map(|i| i.to_string()).collect();
    assert!(
        doc.contains(&format!("\"tokens\":[{}]", want.join(","))),
        "GPU greedy continuation differs from PyTorch's: {doc}"
    );
    assert!(doc.contains("\"prompt_tokens\":5"), "{doc}");
}

#[test]
fn greedy_continuation_through_the_api() {
    common::gpu(); // fails with the lavapipe hint when there is no adapter
    let opts = glmw::LoadOptions {
        n_ctx: Some(64),
        ..Default::default()
    };
    let rt = glmw::Runtime::load_builtin(opts, &mut |_, _| {}).unwrap();
    let greedy = glmw::SamplerOptions {
        temperature: 0.0,
        ..Default::default()
    };
    // The prompt prefix is the library's: plain text gets [gMASK]<sop> as
    // `glmw generate` gives it, and text that has it is taken as it is.
    for prompt in [PROMPT.to_string(), format!("[gMASK]<sop>{PROMPT}")] {
        let mut s = rt.session(greedy).unwrap();
        assert_eq!(s.feed_text(&prompt).unwrap(), 5, "{prompt}");
        let ids: Vec<u32> = s.tokens(32).map(|t| t.unwrap().id).collect();
        assert_eq!(ids, GREEDY_IDS, "{prompt}");
    }
}
