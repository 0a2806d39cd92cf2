//! `glmw generate`: a session on the GPU fed the prompt, its continuation
//! streamed to stdout, and one stats line on stderr at the end (or one JSON
//! record with --json).

use std::io::Write;
use std::path::PathBuf;
use std::time::Instant;

use super::json::Json;
use super::DeviceArgs;
use glmw::sample::SamplerOptions;
use glmw::session::{Perf, Session, Stop};
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
    /// With --chat: ask for an answer without a thinking section.
    #[arg(long, requires = "chat")]
    pub no_think: bool,
    /// Tokens to generate (generation also stops at an end-of-generation token).
    #[arg(long, short = 'n', default_value_t = 128)]
    pub n_predict: usize,
    /// Sampling temperature; 0 is greedy (always the most likely token).
    #[arg(long, default_value_t = 0.8, allow_negative_numbers = true)]
    pub temp: f32,
    /// Sample among the K most likely tokens (1 to 64; 0 means 64).
    #[arg(long, default_value_t = 40)]
    pub top_k: usize,
    /// Keep the smallest set of top tokens whose probability reaches P, in (0, 1].
    #[arg(long, default_value_t = 0.95, allow_negative_numbers = true)]
    pub top_p: f32,
    /// Drop tokens less likely than P times the most likely one (0 = off).
    #[arg(long, default_value_t = 0.05, allow_negative_numbers = true)]
    pub min_p: f32,
    /// Penalise tokens seen in the last --repeat-last-n tokens: positive
    /// logits are divided by it, negative ones multiplied (1 = off).
    #[arg(long, default_value_t = 1.0, allow_negative_numbers = true)]
    pub repeat_penalty: f32,
    /// How many recent tokens (prompt included) the penalties look at.
    #[arg(long, default_value_t = 64)]
    pub repeat_last_n: usize,
    /// Subtract this from the logit of every recent token (0 = off).
    #[arg(long, default_value_t = 0.0, allow_negative_numbers = true)]
    pub presence_penalty: f32,
    /// Subtract this once per occurrence among the recent tokens (0 = off).
    #[arg(long, default_value_t = 0.0, allow_negative_numbers = true)]
    pub frequency_penalty: f32,
    /// Stop when the output contains this text (repeatable); the stop text
    /// itself is not printed.
    #[arg(long)]
    pub stop: Vec<String>,
    /// Random seed for sampling (default: from the clock, printed in the stats line).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Context length in tokens (prompt + generated); the KV cache holds
    /// this many [default: 4096, or the model's training context if shorter].
    #[arg(long)]
    pub ctx: Option<usize>,
    #[command(flatten)]
    pub device: DeviceArgs,
    /// Print one JSON record (text, token ids, timings) instead of streaming.
    #[arg(long)]
    pub json: bool,
}

impl GenerateArgs {
    fn sampling(&self) -> SamplerOptions {
        SamplerOptions {
            temperature: self.temp,
            top_k: self.top_k,
            top_p: self.top_p,
            min_p: self.min_p,
            repeat_penalty: self.repeat_penalty,
            repeat_last_n: self.repeat_last_n,
            presence_penalty: self.presence_penalty,
            frequency_penalty: self.frequency_penalty,
            seed: self.seed.unwrap_or_else(super::clock_seed),
        }
    }
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
    if !a.chat {
        return s.tokenize(text);
    }
    let user = [glmw::tokenizer::ChatMessage::user(text.to_string())];
    let parts = glmw::tokenizer::render_chat_parts(&user, true, !a.no_think);
    let tok = rt.tokenizer();
    Ok(tok.with_prompt_prefix(tok.encode_chat(&parts)?))
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
    let sampling = a.sampling();
    let t_load = Instant::now();
    let rt = super::load_runtime(a.model.as_deref(), load)?;
    let mut s = rt.session(sampling)?;
    let load_s = t_load.elapsed().as_secs_f64();
    s.set_stop_strings(&a.stop);
    let ids = prompt_ids(a, &rt, &s, &prompt)?;
    if ids.len() >= s.n_ctx() {
        return Err(Error::InvalidArgument(format!(
            "the prompt is {} tokens and the context {}: use a larger --ctx",
            ids.len(),
            s.n_ctx()
        )));
    }
    s.feed(&ids)?;
    let o = stream(&mut s, a.n_predict, a.json)?;
    if o.stop == Stop::ContextFull {
        eprintln!(
            "\n[context full: all {} positions are used; rerun with a larger --ctx]",
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
