//! `glmw generate`: load a model onto the GPU, run the prompt token by
//! token, stream the continuation to stdout, and end with one stats line on
//! stderr (or one JSON record with --json).

use std::io::Write;
use std::path::Path;
use std::time::Instant;

use super::json::Json;
use super::progress::Progress;
use glmw::engine::{Engine, EngineOptions};
use glmw::gpu::{Gpu, GpuOptions};
use glmw::model::Model;
use glmw::sample::{Sampler, SamplerOptions};
use glmw::tokenizer::Tokenizer;
use glmw::{Error, Result};

pub struct GenerateArgs<'a> {
    pub model: Option<&'a Path>,
    pub prompt: &'a str,
    pub n_predict: usize,
    pub n_ctx: Option<usize>,
    pub sampling: SamplerOptions,
    /// Stop when the output contains one of these.
    pub stop: &'a [String],
    pub gpu: GpuOptions,
    /// Prompt tokens per prefill chunk.
    pub ubatch: usize,
    pub json: bool,
}

/// Load the model and its weights onto the GPU, with a progress bar.
pub fn load<'a>(
    model: &'a Model,
    gpu: &'a Gpu,
    n_ctx: usize,
    candidates: usize,
    ubatch: usize,
) -> Result<Engine<'a>> {
    let mut bar = Progress::new("loading weights");
    let opts = EngineOptions {
        n_ctx,
        candidates,
        ubatch,
        ..Default::default()
    };
    let e = Engine::load(model, gpu, opts, &mut |d, t| bar.update(d, t));
    bar.finish();
    e
}

/// Length of the longest tail of `text` that begins some stop string (it
/// may yet complete one, so it is not printed yet).
fn held_back(text: &str, stops: &[String]) -> usize {
    let mut n = 0;
    for s in stops {
        for k in (1..s.len().min(text.len() + 1)).rev() {
            if text.is_char_boundary(text.len() - k) && s.starts_with(&text[text.len() - k..]) {
                n = n.max(k);
                break;
            }
        }
    }
    n
}

/// The prompt text: `--prompt` or the file's contents, wrapped as one user
/// message by the chat template with `--chat`.
pub fn prompt_text(
    prompt: Option<String>,
    file: Option<&Path>,
    chat: bool,
    thinking: bool,
) -> Result<String> {
    let text = match (prompt, file) {
        (Some(p), _) => p,
        (None, Some(f)) => std::fs::read_to_string(f).map_err(|e| Error::Io {
            path: f.display().to_string(),
            source: e,
        })?,
        (None, None) => {
            return Err(Error::InvalidArgument(
                "give the prompt with --prompt or --prompt-file".into(),
            ))
        }
    };
    Ok(if chat {
        glmw::tokenizer::render_chat(&[glmw::tokenizer::ChatMessage::user(text)], true, thinking)
    } else {
        text
    })
}

/// The prompt's ids; GLM files get their `[gMASK]<sop>` prefix (llama.cpp
/// adds it too) unless the text already starts with it.
fn prompt_ids(tok: &Tokenizer, prompt: &str) -> Result<Vec<u32>> {
    let mut ids = Vec::new();
    if !prompt.starts_with("[gMASK]") {
        if let (Some(a), Some(b)) = (tok.token_id("[gMASK]"), tok.token_id("<sop>")) {
            ids.extend([a, b]);
        } else if let Some(b) = tok.bos() {
            ids.push(b);
        }
    }
    ids.extend(tok.encode(prompt, true)?);
    Ok(ids)
}

pub fn generate(a: &GenerateArgs) -> Result<()> {
    let t_load = Instant::now();
    let model = super::open_model(a.model)?;
    let tok = Tokenizer::from_gguf(&model.file)?;
    let mut sampler = Sampler::new(a.sampling)?;
    let ids = prompt_ids(&tok, a.prompt)?;
    let n_ctx = a
        .n_ctx
        .unwrap_or_else(|| 4096.min(model.config.n_ctx_train.max(1)));
    if ids.len() >= n_ctx {
        return Err(Error::InvalidArgument(format!(
            "the prompt is {} tokens and the context {n_ctx}: use a larger --ctx",
            ids.len()
        )));
    }
    let gpu = Gpu::new(a.gpu)?;
    let mut engine = load(&model, &gpu, n_ctx, sampler.candidates(), a.ubatch)?;
    let load_s = t_load.elapsed().as_secs_f64();

    let t_prompt = Instant::now();
    let mut cands = engine.prefill(&ids)?;
    for &t in &ids {
        sampler.accept(t);
    }
    let prompt_s = t_prompt.elapsed().as_secs_f64();

    let mut out = std::io::stdout().lock();
    let mut write = |s: &str| {
        if a.json {
            return Ok(());
        }
        out.write_all(s.as_bytes())
            .and_then(|_| out.flush())
            .map_err(|e| Error::Io {
                path: "stdout".into(),
                source: e,
            })
    };
    let mut stream = tok.stream_decoder();
    let mut text = String::new();
    // Bytes of `text` already printed: text that could still become a stop
    // string is held back.
    let mut shown = 0;
    let mut generated = Vec::new();
    let mut stop = "length";
    let t_gen = Instant::now();
    while generated.len() < a.n_predict {
        let next = sampler.sample(&cands)?;
        generated.push(next);
        sampler.accept(next);
        if tok.is_eog(next) {
            stop = "end of generation token";
            break;
        }
        text.push_str(&stream.push(next)?);
        if let Some(at) = a.stop.iter().filter_map(|s| text.find(s.as_str())).min() {
            text.truncate(at);
            stop = "stop string";
            break;
        }
        let safe = text.len() - held_back(&text, a.stop);
        write(&text[shown..safe])?;
        shown = safe;
        if generated.len() == a.n_predict {
            break;
        }
        match engine.step(next) {
            Ok(c) => cands = c,
            Err(Error::ContextFull { n_ctx }) => {
                stop = "context full";
                eprintln!(
                    "\n[context full: all {n_ctx} positions are used; rerun with a larger --ctx]"
                );
                break;
            }
            Err(e) => return Err(e),
        }
    }
    write(&text[shown.min(text.len())..])?;
    let gen_s = t_gen.elapsed().as_secs_f64();
    // Tokens that went through the model while generating (the last sampled
    // one is not run).
    let n_gen = generated.len();
    let gen_tps = n_gen.saturating_sub(1) as f64 / gen_s.max(1e-9);
    let prompt_tps = ids.len() as f64 / prompt_s.max(1e-9);
    let adapter = format!("{} ({:?})", gpu.info.name, gpu.info.backend);
    if a.json {
        let doc = Json::obj(vec![
            ("text", Json::str(text)),
            ("prompt_tokens", Json::num(ids.len() as f64)),
            (
                "tokens",
                Json::Arr(generated.iter().map(|&t| Json::num(t as f64)).collect()),
            ),
            ("stop", Json::str(stop)),
            ("load_s", Json::num(load_s)),
            ("prompt_tok_s", Json::num(prompt_tps)),
            ("gen_tok_s", Json::num(gen_tps)),
            (
                "dispatches_per_token",
                Json::num(engine.dispatches_per_token() as f64),
            ),
            ("adapter", Json::str(adapter)),
            ("kernels", Json::str(engine.variant().name())),
            ("seed", Json::num(a.sampling.seed as f64)),
        ]);
        println!("{}", doc.render());
    } else {
        println!();
        eprintln!(
            "load {load_s:.2} s | prompt {} tokens, {prompt_tps:.1} tok/s | generated {n_gen} tokens, {gen_tps:.1} tok/s (stop: {stop}) | {} dispatches/token | {adapter}, {} kernels | seed {}",
            ids.len(),
            engine.dispatches_per_token(),
            engine.variant().name(),
            a.sampling.seed
        );
    }
    Ok(())
}
