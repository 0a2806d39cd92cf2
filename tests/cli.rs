//! The `glmw` binary end to end: synth, info, tokenize, logits, the
//! built-in model when `--model` is left out, and clean one-line errors for
//! bad input.

mod common;

use std::process::Output;

use common::glmw;

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn synth_info_tokenize_logits() {
    let dir = common::temp_dir("cli");
    let model = dir.join("tiny.gguf");
    let m = model.to_str().unwrap();
    let o = glmw(&["synth", "--preset", "tiny", "-o", m, "--seed", "3"]);
    assert!(o.status.success(), "{}", stderr(&o));

    let o = glmw(&["info", m, "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let j = stdout(&o);
    for needle in [
        "\"architecture\":\"deepseek2\"",
        "\"n_layer\":3",
        "\"gating\":\"sigmoid\"",
        "\"Q4_0\":{",
        "\"Q6_K\":{",
        "\"n_tokens\":512",
        "\"memory\":{\"gpu_weights_bytes\":",
    ] {
        assert!(j.contains(needle), "{needle} not in {j}");
    }
    let o = glmw(&["info", m]);
    assert!(stdout(&o).contains("MLA, 4 heads"), "{}", stdout(&o));
    assert!(
        stdout(&o).contains("KV cache at the default context"),
        "{}",
        stdout(&o)
    );

    let o = glmw(&["tokenize", "--model", m, "<|user|>Hello world", "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).starts_with("{\"ids\":[483,"), "{}", stdout(&o));

    let out = dir.join("logits.bin");
    let args = [
        "logits",
        "--model",
        m,
        "--tokens",
        "478,480,10,200",
        "--json",
        "--all",
        "--out",
        out.to_str().unwrap(),
    ];
    let a = glmw(&args);
    assert!(a.status.success(), "{}", stderr(&a));
    let bytes = std::fs::read(&out).unwrap();
    assert_eq!(bytes.len(), 4 * 512 * 4, "4 positions x 512 logits x f32");
    let b = glmw(&args);
    let strip = |s: String| s.split(",\"seconds\"").next().unwrap().to_string();
    assert_eq!(
        strip(stdout(&a)),
        strip(stdout(&b)),
        "logits are deterministic"
    );
    assert!(stdout(&a).contains("\"argmax\":"));
}

#[test]
fn bad_input_gives_one_clear_line() {
    let dir = common::temp_dir("cli-bad");
    let junk = dir.join("junk.gguf");
    std::fs::write(&junk, b"not a model at all").unwrap();
    let o = glmw(&["info", junk.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    let e = stderr(&o);
    assert!(
        e.starts_with("error: malformed GGUF at byte 0: bad magic"),
        "{e}"
    );
    assert_eq!(e.trim_end().lines().count(), 1, "{e}");

    let o = glmw(&["info", "/no/such/file.gguf"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("No such file"), "{}", stderr(&o));

    let m = common::tiny_model().to_str().unwrap().to_string();
    let o = glmw(&["logits", "--model", &m, "--tokens", "1,99999"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("outside the vocabulary"),
        "{}",
        stderr(&o)
    );

    let o = glmw(&["logits", "--model", &m, "--tokens", "1,x"]);
    assert_eq!(o.status.code(), Some(2), "clap rejects non-numeric ids");
    let o = glmw(&["synth", "--preset", "huge", "-o", "/tmp/x.gguf"]);
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn help_explains_every_flag() {
    for (cmd, needles) in [
        (
            "info",
            &["Print one JSON", "Also list every metadata key"][..],
        ),
        (
            "tokenize",
            &["Path to a GGUF model", "Treat special-token text"][..],
        ),
        (
            "logits",
            &[
                "Comma-separated token ids",
                "Where to run",
                "raw little-endian f32",
                "every position",
            ][..],
        ),
        (
            "synth",
            &["Which model to imitate", "Output GGUF path", "Random seed"][..],
        ),
    ] {
        let o = glmw(&[cmd, "--help"]);
        assert!(o.status.success());
        let h = stdout(&o).split_whitespace().collect::<Vec<_>>().join(" ");
        for n in needles {
            assert!(h.contains(n), "glmw {cmd} --help lacks {n:?}: {h}");
        }
    }
}

#[test]
fn builtin_model_without_model_flag() {
    // info: the built-in glmw-tiny, named as such
    let o = glmw(&["info", "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let j = stdout(&o);
    for needle in [
        "glmw-tiny (built in",
        "\"architecture\":\"deepseek2\"",
        "\"n_layer\":4",
        "\"n_tokens\":2048",
    ] {
        assert!(j.contains(needle), "{needle} not in {j}");
    }
    // tokenize with its tokenizer: the ids tools/train.py saw for the prompt
    let o = glmw(&["tokenize", "[gMASK]<sop>And God said", "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let j = stdout(&o);
    assert!(j.contains("\"ids\":[2014,2016,296,387,388]"), "{j}");
    // logits on the CPU reference name the model on stderr
    let o = glmw(&["logits", "--tokens", "2014,2016,296"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stderr(&o).contains("glmw-tiny (built in"), "{}", stderr(&o));
}

/// Wait for `child` at most `secs`; a hang kills it and fails.
fn wait_bounded(mut child: std::process::Child, secs: u64) -> Output {
    let t0 = std::time::Instant::now();
    while child.try_wait().unwrap().is_none() {
        if t0.elapsed().as_secs() > secs {
            child.kill().unwrap();
            panic!("glmw still running after {secs} s");
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    child.wait_with_output().unwrap()
}

#[test]
fn a_fifo_is_not_read_as_a_prompt_or_text_file() {
    let dir = common::temp_dir("cli-fifo");
    let fifo = dir.join("fifo");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    let f = fifo.to_str().unwrap();
    for args in [
        vec!["generate", "--prompt-file", f, "-n", "1"],
        vec!["perplexity", "-f", f, "--ctx", "8"],
    ] {
        let child = std::process::Command::new(env!("CARGO_BIN_EXE_glmw"))
            .args(&args)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let o = wait_bounded(child, 30);
        assert_eq!(o.status.code(), Some(1), "{args:?}");
        assert!(
            stderr(&o).contains("not a regular file"),
            "{args:?}: {}",
            stderr(&o)
        );
    }
}

#[test]
fn perplexity_rejects_bad_sizes_with_true_numbers() {
    let dir = common::temp_dir("cli-ppl-args");
    let f = dir.join("t.txt");
    std::fs::write(&f, "In the beginning God created the heaven and the earth.").unwrap();
    let f = f.to_str().unwrap();
    let o = glmw(&["perplexity", "-f", f, "--ctx", "9223372036854775808"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("needs at least 18446744073709551616"),
        "{}",
        stderr(&o)
    );
    let o = glmw(&["perplexity", "-f", f, "--ubatch", "0", "--backend", "cpu"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("--ubatch"), "{}", stderr(&o));
}

#[test]
fn cpu_logits_warns_about_long_inputs() {
    let few = glmw(&["logits", "--tokens", "2014,2016,296"]);
    assert!(few.status.success(), "{}", stderr(&few));
    assert!(!stderr(&few).contains("warning"), "{}", stderr(&few));
    let ids: Vec<String> = (0..65).map(|i| (300 + i).to_string()).collect();
    let many = glmw(&["logits", "--tokens", &ids.join(",")]);
    assert!(many.status.success(), "{}", stderr(&many));
    assert!(
        stderr(&many).contains("warning: the CPU reference runs 65 tokens"),
        "{}",
        stderr(&many)
    );
}
