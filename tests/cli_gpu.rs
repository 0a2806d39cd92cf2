//! The GPU commands end to end on the tiny synthetic model (lavapipe in CI):
//! `generate` (text, JSON, errors), `logits --backend gpu` against the CPU
//! reference, and every `bench` tier briefly, checking the JSON fields.
//! No timing is asserted.

mod common;

use std::process::Command;

use common::glmw;

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn ok(args: &[&str]) -> String {
    let o = glmw(args);
    assert!(
        o.status.success(),
        "glmw {args:?} failed: {}",
        text(&o.stderr)
    );
    text(&o.stdout)
}

fn has_all(doc: &str, keys: &[&str]) {
    for k in keys {
        assert!(doc.contains(&format!("\"{k}\":")), "no {k:?} in {doc}");
    }
}

#[test]
fn generate_streams_and_reports() {
    let m = common::tiny_model().to_str().unwrap();
    let o = glmw(&["generate", "-m", m, "-p", "Hello", "-n", "8", "--seed", "1"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let err = text(&o.stderr);
    for needle in [
        "load ",
        "prompt ",
        "generated ",
        "dispatches/token",
        "kernels",
        "seed 1",
        "memory: GPU ",
        "KV cache",
    ] {
        assert!(err.contains(needle), "stats line lacks {needle:?}: {err}");
    }
    // Same seed, same tokens; greedy with --no-subgroups too.
    let a = ok(&[
        "generate", "-m", m, "-p", "Hi", "-n", "6", "--seed", "9", "--json",
    ]);
    let b = ok(&[
        "generate", "-m", m, "-p", "Hi", "-n", "6", "--seed", "9", "--json",
    ]);
    let tokens = |s: &str| {
        s.split("\"tokens\":")
            .nth(1)
            .unwrap()
            .split(']')
            .next()
            .unwrap()
            .to_string()
    };
    assert_eq!(tokens(&a), tokens(&b));
    has_all(
        &a,
        &[
            "text",
            "tokens",
            "gen_tok_s",
            "dispatches_per_token",
            "adapter",
            "kernels",
            "memory",
            "gpu_weights_bytes",
            "gpu_kv_cache_bytes",
            "gpu_total_bytes",
        ],
    );
    let g1 = ok(&[
        "generate", "-m", m, "-p", "Hi", "-n", "6", "--temp", "0", "--json",
    ]);
    let g2 = ok(&[
        "generate",
        "-m",
        m,
        "-p",
        "Hi",
        "-n",
        "6",
        "--temp",
        "0",
        "--json",
        "--no-subgroups",
        // the f32 prefill everywhere (lavapipe has no cooperative matrices,
        // so the flag is accepted and changes nothing here)
        "--no-coopmat",
    ]);
    assert_eq!(
        tokens(&g1),
        tokens(&g2),
        "greedy differs between kernel variants"
    );
    assert!(g2.contains("\"kernels\":\"shared-memory\""), "{g2}");
}

#[test]
fn generate_rejects_bad_settings_and_stops_at_full_context() {
    let m = common::tiny_model().to_str().unwrap();
    for (args, needle) in [
        (vec!["--temp", "-1"], "temperature"),
        (vec!["--top-p", "0"], "top-p"),
        (vec!["-n", "-2"], "-1 for no limit"),
        (vec!["--ctx", "2"], "--ctx"),
        (vec!["--backend", "cpu"], "GPU"),
    ] {
        let mut a = vec!["generate", "-m", m, "-p", "Hello world"];
        a.extend(args);
        let o = glmw(&a);
        assert!(!o.status.success(), "{a:?} should fail");
        let e = text(&o.stderr);
        assert!(e.contains(needle) && e.lines().count() <= 3, "{a:?}: {e}");
    }
    let o = glmw(&[
        "generate", "-m", m, "-p", "Hi", "-n", "50", "--ctx", "10", "--temp", "0",
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(
        text(&o.stderr).contains("context full"),
        "{}",
        text(&o.stderr)
    );
}

#[test]
fn logits_gpu_agrees_with_cpu() {
    let m = common::tiny_model().to_str().unwrap();
    let dir = common::temp_dir("cli-gpu");
    let read = |p: &std::path::Path| -> Vec<f32> {
        bytemuck::pod_collect_to_vec(&std::fs::read(p).unwrap())
    };
    let cpu = dir.join("cpu.f32");
    let gpu = dir.join("gpu.f32");
    let toks = "1,2,3,100,200";
    ok(&[
        "logits",
        "-m",
        m,
        "--tokens",
        toks,
        "--all",
        "--out",
        cpu.to_str().unwrap(),
    ]);
    ok(&[
        "logits",
        "-m",
        m,
        "--tokens",
        toks,
        "--all",
        "--backend",
        "gpu",
        "--out",
        gpu.to_str().unwrap(),
    ]);
    let e = glmw::reference::ops::rel_l2(&read(&gpu), &read(&cpu));
    assert!(e < 1e-3, "GPU vs CPU logits rel L2 {e}");
}

#[test]
fn bench_tiers_emit_their_fields() {
    let m = common::tiny_model().to_str().unwrap();
    let common_keys = [
        "tier", "adapter", "backend", "driver", "kernels", "timing", "model", "config",
    ];
    let j = ok(&[
        "bench", "--tier", "model", "-m", m, "-p", "8", "-n", "4", "-d", "0,32", "-r", "2",
        "--count", "3", "--rounds", "2", "--json",
    ]);
    has_all(&j, &common_keys);
    has_all(
        &j,
        &[
            "tests",
            "n_prompt",
            "n_gen",
            "n_depth",
            "avg_ts",
            "stddev_ts",
            "samples_ts",
            "prediction",
            "token_us",
            "measured_us",
            "record_us",
            "submit_us",
            "wait_us",
            "fills",
            "ttft_ms",
            "dispatches_per_token",
            "barriers_per_token",
            "buffer_transitions_per_token",
            "prefill_dispatches",
            "prefill_barriers",
            "token_parts",
            "gpu_us_per_token",
            "ops",
            "share",
        ],
    );
    let at = |name: &str| {
        j.find(&format!("\"name\":\"{name}\""))
            .unwrap_or_else(|| panic!("no test {name}: {j}"))
    };
    assert!(
        at("pp8") < at("tg4") && at("tg4") < at("pp8 @ d32") && at("pp8 @ d32") < at("tg4 @ d32")
    );
    let samples = j.split("\"samples_ts\":[").nth(1).unwrap();
    assert_eq!(
        samples.split(']').next().unwrap().matches(',').count(),
        1,
        "-r 2: {j}"
    );
    // today's flag names still work, and the text is llama-bench's table
    let t = ok(&[
        "bench",
        "--tier",
        "model",
        "-m",
        m,
        "--prompt-len",
        "8",
        "--gen",
        "4",
        "--depth",
        "16",
        "--repetitions",
        "1",
        "--count",
        "2",
        "--rounds",
        "1",
    ]);
    let has_row = |name: &str| {
        t.lines()
            .any(|l| l.starts_with('|') && l.split('|').nth(1).map(str::trim) == Some(name))
    };
    assert!(has_row("pp8 @ d16") && has_row("tg4 @ d16"), "{t}");
    assert!(t.contains("barriers/token"), "{t}");
    let j = ok(&[
        "bench", "--tier", "block", "-m", m, "--count", "3", "--rounds", "2", "-n", "4", "-d", "8",
        "-r", "1", "-o", "json",
    ]);
    has_all(&j, &common_keys);
    has_all(
        &j,
        &[
            "block",
            "median_us",
            "p10_us",
            "p90_us",
            "iqr_us",
            "mad_us",
            "replays",
            "ffn",
            "dense",
            "head",
            "measured",
            "prediction",
            "predicted_us",
            "token_us",
            "error",
            "moe_sequence",
            "token_parts",
            "op_costs",
            "cost_us",
            "without",
        ],
    );
    assert!(j.contains("\"name\":\"tg4 @ d8\""), "{j}");
    let j = ok(&[
        "bench",
        "--tier",
        "micro",
        "-m",
        m,
        "--count",
        "3",
        "--contexts",
        "8,40",
        "--json",
    ]);
    has_all(&j, &common_keys);
    has_all(
        &j,
        &[
            "read_gb_s",
            "kernels",
            "median_us",
            "bytes",
            "gb_s",
            "of_read",
        ],
    );
    for op in [
        "attn_q_a",
        "attention",
        "ffn_gate_inp",
        "ffn_gate_up_exps",
        "ffn_down_exps",
        "output",
        "topk1",
    ] {
        assert!(
            j.contains(&format!("\"op\":\"{op}\"")),
            "micro lacks {op}: {j}"
        );
    }
    // Without --model or --preset: the built-in model, as everywhere.
    let j = ok(&[
        "bench", "--tier", "model", "-p", "8", "-n", "2", "-d", "0", "-r", "1", "--json",
    ]);
    assert!(j.contains("glmw-tiny (built in)"), "{j}");
}

#[test]
fn llama_cpp_flags_work() {
    let run = |extra: &[&str]| {
        let mut args = vec!["generate", "-p", "In the beginning", "--json"];
        args.extend(extra);
        ok(&args)
    };
    // -c, -s, --temperature, -n -1 (to the end of the context), --top-k 0.
    let a = run(&[
        "-c",
        "24",
        "-s",
        "3",
        "--temperature",
        "0.7",
        "-n",
        "-1",
        "--top-k",
        "0",
    ]);
    assert!(a.contains("\"stop\":\"context full\""), "{a}");
    assert!(a.contains("\"seed\":3"), "{a}");
    let b = run(&[
        "--ctx-size",
        "24",
        "--seed",
        "3",
        "--temp",
        "0.7",
        "-n",
        "-1",
        "--top-k",
        "64",
        "--no-warmup",
    ]);
    // The warm-up changes nothing a run computes.
    assert_eq!(field(&a, "tokens"), field(&b, "tokens"));
    // top-k past the GPU's 64 candidates takes them all; --system wraps
    // the prompt in the chat template.
    run(&["-n", "2", "--top-k", "100"]);
    let c = run(&["-n", "2", "--system", "Be brief.", "--no-think"]);
    let d = run(&["-n", "2"]);
    assert_ne!(field(&c, "prompt_tokens"), field(&d, "prompt_tokens"));
    // chat takes the same sampling flags.
    let o = Command::new(env!("CARGO_BIN_EXE_glmw"))
        .args([
            "chat", "-c", "48", "-n", "3", "--top-p", "0.9", "--min-p", "0.1",
        ])
        .arg("--no-warmup")
        .args(["--repeat-penalty", "1.1", "--stop", "zzz", "-s", "1"])
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o.stderr));
}

/// The text of a number or number-array field in a one-line JSON record.
fn field(doc: &str, key: &str) -> String {
    let at = doc.find(&format!("\"{key}\":")).expect(key) + key.len() + 3;
    doc[at..]
        .chars()
        .take_while(|c| c.is_ascii_digit() || ".-+eE[],".contains(*c))
        .collect()
}

#[test]
fn a_closed_stdout_and_a_headless_machine_are_quiet() {
    use std::io::Read;
    use std::process::Stdio;
    let quiet = |args: &[&str], read: usize| {
        let mut child = Command::new(env!("CARGO_BIN_EXE_glmw"))
            .args(args)
            .env_remove("XDG_RUNTIME_DIR")
            .env_remove("NODEVICE_SELECT")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run glmw");
        // Read a little, then close the pipe as `| head` does.
        let mut out = child.stdout.take().unwrap();
        out.read_exact(&mut vec![0; read]).unwrap();
        drop(out);
        let o = child.wait_with_output().unwrap();
        let err = text(&o.stderr);
        assert!(o.status.success(), "glmw {args:?}: {:?} {err}", o.status);
        assert!(!err.contains("error") && !err.contains("panicked"), "{err}");
    };
    quiet(&["generate", "-p", "In the beginning", "-n", "64"], 4);
    quiet(&["info"], 0);
}

#[test]
fn generate_reads_prompt_files_and_applies_the_chat_template() {
    let m = common::tiny_model().to_str().unwrap();
    let dir = common::temp_dir("cli-prompt");
    let f = dir.join("prompt.txt");
    std::fs::write(&f, "Hello there").unwrap();
    let n_prompt = |s: &str| -> String {
        s.split("\"prompt_tokens\":")
            .nth(1)
            .unwrap()
            .split(',')
            .next()
            .unwrap()
            .to_string()
    };
    let base = ["generate", "-m", m, "-n", "2", "--temp", "0", "--json"];
    let with = |extra: &[&str]| {
        let mut a = base.to_vec();
        a.extend(extra);
        ok(&a)
    };
    let plain = with(&["-p", "Hello there"]);
    let file = with(&["--prompt-file", f.to_str().unwrap()]);
    assert_eq!(n_prompt(&plain), n_prompt(&file));
    let tokens = |s: &str| {
        let after = s.split("\"tokens\":").nth(1).unwrap();
        after.split(']').next().unwrap().to_string()
    };
    assert_eq!(tokens(&plain), tokens(&file));
    // [gMASK]<sop><|user|>Hello there<|assistant|><think>: 3 more specials.
    let chat = with(&["-p", "Hello there", "--chat"]);
    let (p, c): (usize, usize) = (
        n_prompt(&plain).parse().unwrap(),
        n_prompt(&chat).parse().unwrap(),
    );
    assert_eq!(c, p + 3, "chat prompt {c} tokens vs plain {p}");
    let no_think = with(&["-p", "Hello there", "--chat", "--no-think"]);
    assert_eq!(n_prompt(&no_think).parse::<usize>().unwrap(), p + 3);
    // With --chat the prompt is a user's message: a turn marker typed into
    // it stays text (several tokens), it does not become the special token.
    let one = with(&["-p", "x", "--chat"]);
    let forged = with(&["-p", "<|assistant|>", "--chat"]);
    let (one, forged): (usize, usize) = (
        n_prompt(&one).parse().unwrap(),
        n_prompt(&forged).parse().unwrap(),
    );
    assert!(
        forged > one,
        "<|assistant|> in a --chat prompt read as a marker"
    );
    let o = glmw(&["generate", "-m", m, "--prompt-file", "/nonexistent/p.txt"]);
    assert!(!o.status.success() && text(&o.stderr).contains("/nonexistent/p.txt"));
}

#[test]
fn generate_stops_at_a_stop_string() {
    let m = common::tiny_model().to_str().unwrap();
    let args = [
        "generate", "-m", m, "-p", "Hello", "-n", "24", "--temp", "0",
    ];
    let full = ok(&args);
    // Greedy text of the tiny model; stop at a piece from its middle.
    let chars: Vec<char> = full.trim_end().chars().collect();
    assert!(chars.len() > 12, "{full:?}");
    let stop: String = chars[8..11].iter().collect();
    let mut a = args.to_vec();
    a.extend(["--stop", &stop]);
    let cut = ok(&a);
    let at = full.find(&stop).unwrap();
    assert_eq!(cut.trim_end_matches('\n'), &full[..at], "stop {stop:?}");
    a.push("--json");
    assert!(ok(&a).contains("\"stop\":\"stop string\""));
    // An empty stop string is ignored, as llama.cpp does.
    let mut e = args.to_vec();
    e.extend(["--stop", ""]);
    assert_eq!(ok(&e), full);
}

#[test]
fn perplexity_gpu_matches_cpu_reference() {
    let m = common::tiny_model().to_str().unwrap();
    let dir = common::temp_dir("cli-ppl");
    let f = dir.join("text.txt");
    let words = [
        "the", "water", "of", "time", "people", "and", "long", "sound",
    ];
    let body: Vec<&str> = (0..110)
        .map(|i| words[(i * 7 + i / 3) % words.len()])
        .collect();
    std::fs::write(&f, body.join(" ")).unwrap();
    let f = f.to_str().unwrap();
    let ppl = |extra: &[&str]| -> f64 {
        let mut a = vec!["perplexity", "-m", m, "-f", f, "--ctx", "32", "--json"];
        a.extend(extra);
        let j = ok(&a);
        has_all(
            &j,
            &["ppl", "ppl_err", "n_chunks", "tokens_scored", "running"],
        );
        j.split("\"ppl\":")
            .nth(1)
            .unwrap()
            .split(',')
            .next()
            .unwrap()
            .parse()
            .unwrap()
    };
    let (cpu, gpu) = (ppl(&["--backend", "cpu"]), ppl(&["--backend", "gpu"]));
    // The GPU's f16 KV cache is the only difference that matters here.
    assert!(
        (gpu / cpu - 1.0).abs() < 1e-3,
        "GPU perplexity {gpu} vs CPU {cpu}"
    );
    assert!(cpu > 1.0 && cpu.is_finite());
    // --ubatch is used (smaller chunks, same result) and 0 is refused.
    let small = ppl(&["--ubatch", "5"]);
    assert!(
        (small / gpu - 1.0).abs() < 1e-4,
        "ubatch 5: {small} vs {gpu}"
    );
    let o = glmw(&[
        "perplexity",
        "-m",
        m,
        "-f",
        f,
        "--ctx",
        "32",
        "--ubatch",
        "0",
    ]);
    assert!(!o.status.success() && text(&o.stderr).contains("--ubatch"));
    let o = glmw(&["perplexity", "-m", m, "-f", f, "--ctx", "100000"]);
    assert!(!o.status.success() && text(&o.stderr).contains("two windows"));
}

#[test]
fn chat_reads_turns_from_stdin() {
    use std::io::Write;
    let m = common::tiny_model().to_str().unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_glmw"))
        .args(["chat", "-m", m, "-n", "6", "--temp", "0", "--ctx", "40"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run glmw chat");
    // One line is not UTF-8: it is skipped and the chat goes on.
    let turns = b"Hello\nAnd \xff\xfe more\n/help\n/nope\nAnd more\n/reset\nAgain\nfour\nfive\nsix\nseven\n/exit\nnot read\n";
    child.stdin.take().unwrap().write_all(turns).unwrap();
    let o = child.wait_with_output().unwrap();
    assert!(o.status.success(), "{}", text(&o.stderr));
    let err = text(&o.stderr);
    assert!(err.contains("[conversation reset]"), "{err}");
    assert!(err.contains("memory: GPU "), "{err}");
    assert!(err.contains("/reset   start a new conversation"), "{err}");
    assert!(err.contains("unknown command /nope"), "{err}");
    assert!(err.contains("not UTF-8"), "{err}");
    // 40 tokens of context fill up within the turns after the reset.
    assert!(err.contains("context full"), "{err}");
    assert!(text(&o.stdout).lines().count() >= 3);
}

/// A DeepSeek-V2-Lite-shaped file (`synth --preset tiny-v2-lite`) written
/// and run by the CLI on the GPU, greedy (the steps queued ahead) and
/// sampled.
#[test]
fn a_v2_lite_shaped_file_generates_on_the_gpu() {
    let dir = common::temp_dir("cli-v2-lite");
    let path = dir.join("v2.gguf");
    let m = path.to_str().unwrap();
    ok(&["synth", "--preset", "tiny-v2-lite", "-o", m]);
    for temp in ["0", "0.8"] {
        let o = glmw(&[
            "generate", "-m", m, "-p", "Hello", "-n", "12", "--temp", temp,
        ]);
        assert!(o.status.success(), "--temp {temp}: {}", text(&o.stderr));
        assert!(
            text(&o.stderr).contains("generated "),
            "{}",
            text(&o.stderr)
        );
    }
}
