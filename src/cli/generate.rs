//! `glmw generate`: a session on the GPU fed the prompt, its continuation
//! streamed to stdout, and one stats line on stderr at the end (or one JSON
//! record with --json).

use std::io::Write;
use std::path::PathBuf;
use std::time::Instant;

use super::json::Json;
use super::sampling::{n_predict, NPredict, SamplingArgs};
use super::{DeviceArgs, WarmupArgs};
use glmw::session::{Perf, Session, Stop};
use glmw::ChatMessage;
use glmw::{Error, Result};

/// `glmw generate`'s flags.
#[derive(clap::Args)]
pub struct GenerateArgs {
    /// Path to a GGUF model file [default: the built-in glmw-tiny, a
    /// 3.5M-parameter model of GLM-4.7-Flash's architecture trained on
    /// the King James Bible].
    #[arg(long, short)]
    pub model: Option<PathBuf>,
    /// The prompt. Special tokens such as <|user|> are recognised; GLM
    /// files get their [gMASK]<sop> prefix unless the prompt has it.
    #[arg(
        long,
        short,
        required_unless_present = "prompt_file",
        conflicts_with = "prompt_file"
    )]
    pub prompt: Option<String>,
    /// Read the prompt from this file instead of --prompt (- reads stdin).
    #[arg(long, short = 'f')]
    pub prompt_file: Option<PathBuf>,
    /// Send the prompt as one user message through the model's chat
    /// template (GLM: thinking on unless --no-think).
    #[arg(long)]
    pub chat: bool,
    /// A system message before the prompt (implies --chat).
    #[arg(long, visible_alias = "system-prompt")]
    pub system: Option<String>,
    /// With --chat: ask for an answer without a thinking section.
    #[arg(long)]
    pub no_think: bool,
    /// Tokens to generate; -1 runs to an end-of-generation token or the
    /// end of the context (generation also stops at those).
    #[arg(long, short = 'n', default_value = "128", value_parser = n_predict, allow_negative_numbers = true)]
    pub n_predict: NPredict,
    #[command(flatten)]
    pub sampling: SamplingArgs,
    /// Context length in tokens (prompt + generated); the KV cache holds
    /// this many [default: 4096, or the model's training context if shorter].
    #[arg(long, short = 'c', visible_alias = "ctx-size")]
    pub ctx: Option<usize>,
    #[command(flatten)]
    pub device: DeviceArgs,
    /// Print one JSON record (text, token ids, timings) instead of streaming.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub warmup: WarmupArgs,
}

/// The prompt text: `--prompt` or the file's contents (`-` is stdin).
fn prompt_text(a: &GenerateArgs) -> Result<String> {
    let text = match (&a.prompt, &a.prompt_file) {
        (Some(p), _) => p.clone(),
        (None, Some(f)) => super::read_text(f)?,
        (None, None) => {
            return Err(Error::InvalidArgument(
                "give the prompt with --prompt or --prompt-file".into(),
            ))
        }
    };
    Ok(text)
}

/// The prompt's ids: as the session tokenizes the caller's text, or with
/// `--chat` one user message in the chat template, the message itself
/// encoded as plain text (special-token text in it cannot forge a turn).
fn prompt_ids(
    a: &GenerateArgs,
    rt: &glmw::Runtime,
    s: &glmw::Session,
    text: &str,
) -> Result<Vec<u32>> {
    if !a.chat && a.system.is_none() {
        if a.no_think {
            return Err(Error::InvalidArgument(
                "--no-think goes with --chat or --system".into(),
            ));
        }
        return s.tokenize(text);
    }
    let mut msgs = Vec::new();
    if let Some(sys) = &a.system {
        msgs.push(ChatMessage::system(sys.clone()));
    }
    msgs.push(ChatMessage::user(text.to_string()));
    let tok = rt.tokenizer();
    Ok(tok.with_prompt_prefix(tok.encode_messages(&msgs, !a.no_think)?))
}

/// What a generation produced, for the stats line or the JSON record.
struct Outcome {
    text: String,
    tokens: Vec<u32>,
    stop: Stop,
}

fn stop_name(s: Stop) -> &'static str {
    match s {
        Stop::EndOfTurn => "end of generation token",
        Stop::Length => "length",
        Stop::Cancelled => "cancelled",
        Stop::ContextFull => "context full",
        Stop::StopString => "stop string",
    }
}

/// Generate up to `n` tokens, streaming their text unless `quiet`.
fn stream(s: &mut Session, n: usize, quiet: bool) -> Result<Outcome> {
    let mut out = std::io::stdout().lock();
    let mut write = |t: &str| {
        if quiet {
            return Ok(());
        }
        out.write_all(t.as_bytes())
            .and_then(|_| out.flush())
            .map_err(|e| Error::Io {
                path: "stdout".into(),
                source: e,
            })
    };
    let (mut text, mut tokens) = (String::new(), Vec::new());
    for t in s.tokens(n) {
        let t = t?;
        write(&t.text)?;
        text.push_str(&t.text);
        tokens.push(t.id);
    }
    write(s.held_text())?;
    text.push_str(s.held_text());
    let stop = s.stop().unwrap_or(Stop::Length);
    Ok(Outcome { text, tokens, stop })
}

pub fn generate(a: &GenerateArgs) -> Result<()> {
    let load = a.device.load_options("generate", a.ctx)?;
    let prompt = prompt_text(a)?;
    let sampling = a.sampling.options();
    let t_load = Instant::now();
    let rt = super::load_runtime(a.model.as_deref(), load)?;
    let mut s = rt.session(sampling)?;
    a.warmup.run(&mut s)?;
    let load_s = t_load.elapsed().as_secs_f64();
    s.set_stop_strings(&a.sampling.stop);
    let ids = prompt_ids(a, &rt, &s, &prompt)?;
    if ids.len() >= s.n_ctx() {
        return Err(Error::InvalidArgument(format!(
            "the prompt is {} tokens and the context {}: use a larger -c / --ctx",
            ids.len(),
            s.n_ctx()
        )));
    }
    s.feed(&ids)?;
    let n = a.n_predict.within(s.n_ctx());
    let o = stream(&mut s, n, a.json)?;
    if o.stop == Stop::ContextFull {
        eprintln!(
            "\n[context full: all {} positions are used; rerun with a larger -c / --ctx]",
            s.n_ctx()
        );
    }
    let (perf, adapter) = (s.perf(), rt.adapter());
    let dispatches = s.dispatches_per_token();
    if a.json {
        let doc = Json::obj(vec![
            ("text", Json::str(o.text)),
            ("prompt_tokens", Json::num(ids.len() as f64)),
            (
                "tokens",
                Json::Arr(o.tokens.iter().map(|&t| Json::num(t as f64)).collect()),
            ),
            ("stop", Json::str(stop_name(o.stop))),
            ("load_s", Json::num(load_s)),
            ("prompt_tok_s", Json::num(perf.prompt_tok_s())),
            ("gen_tok_s", Json::num(perf.gen_tok_s())),
            ("dispatches_per_token", Json::num(dispatches as f64)),
            ("adapter", Json::str(adapter)),
            ("kernels", Json::str(rt.kernels())),
            ("seed", Json::num(sampling.seed as f64)),
            ("memory", super::memory::json(s.memory())),
        ]);
        println!("{}", doc.render());
    } else {
        println!();
        eprintln!(
            "load {load_s:.2} s | {} (stop: {}) | {dispatches} dispatches/token | {adapter}, {} kernels | seed {}",
            speeds(&perf, o.tokens.len()),
            stop_name(o.stop),
            rt.kernels(),
            sampling.seed
        );
        eprintln!("{}", super::memory::text(s.memory()));
    }
    Ok(())
}

fn speeds(p: &Perf, n_gen: usize) -> String {
    format!(
        "prompt {} tokens, {:.1} tok/s | generated {n_gen} tokens, {:.1} tok/s",
        p.prompt_tokens,
        p.prompt_tok_s(),
        p.gen_tok_s()
    )
}
