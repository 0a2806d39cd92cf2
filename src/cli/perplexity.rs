//! `glmw perplexity`: llama.cpp's method, so the number compares with
//! `llama-perplexity` on the same file: the text is cut into windows of
//! `--ctx` tokens, each run from an empty cache, and the second half of each
//! window is scored (every scored token has at least ctx/2 tokens of
//! context). Prints the running perplexity per window and the final
//! estimate with its standard error.

use std::path::{Path, PathBuf};
use std::time::Instant;

use super::json::Json;
use super::DeviceArgs;
use glmw::model::Model;
use glmw::reference::{MlaForm, Reference};
use glmw::session::{LoadOptions, Runtime, Session};
use glmw::tokenizer::Tokenizer;
use glmw::{Error, Result};

/// −log softmax(logits)[target], in f64.
fn nll(logits: &[f32], target: u32) -> f64 {
    let mx = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max) as f64;
    let lse = mx
        + logits
            .iter()
            .map(|&l| (l as f64 - mx).exp())
            .sum::<f64>()
            .ln();
    lse - logits[target as usize] as f64
}

/// The model, on the CPU or loaded onto a GPU (one per run: its size
/// does not matter).
#[allow(clippy::large_enum_variant)]
enum Loaded {
    Cpu(Model),
    Gpu(Runtime),
}

/// Where the windows run: the CPU reference or a GPU session.
enum Scorer<'a> {
    Cpu(&'a Model),
    Gpu(Box<Session>),
}

impl Scorer<'_> {
    /// The logits after each token of `window`, n_vocab per token, from an
    /// empty cache.
    fn window_logits(&mut self, window: &[u32]) -> Result<Vec<f32>> {
        match self {
            Scorer::Cpu(model) => {
                let mut r = Reference::new(model, window.len(), MlaForm::Absorbed);
                Ok(window
                    .iter()
                    .map(|&t| r.forward(t))
                    .collect::<Result<Vec<_>>>()?
                    .concat())
            }
            Scorer::Gpu(s) => {
                s.reset()?;
                s.feed_logits(window)
            }
        }
    }
}

/// The running sums of scored negative log-likelihoods.
#[derive(Default)]
struct Score {
    sum: f64,
    sum_sq: f64,
    count: usize,
    running: Vec<f64>,
}

impl Score {
    fn add(&mut self, v: f64) {
        self.sum += v;
        self.sum_sq += v * v;
        self.count += 1;
    }

    fn ppl(&self) -> f64 {
        (self.sum / self.count as f64).exp()
    }

    /// The perplexity's standard error, as llama-perplexity estimates it.
    fn err(&self) -> f64 {
        let n = self.count as f64;
        let mean = self.sum / n;
        let var = (self.sum_sq / n - mean * mean).max(0.0);
        self.ppl() * (var / (n - 1.0).max(1.0)).sqrt()
    }
}

/// The text's tokens, checked to fill at least two windows of `n_ctx`.
fn tokens(tok: &Tokenizer, file: &Path, n_ctx: usize) -> Result<Vec<u32>> {
    let ids = tok.encode(&super::read_text(file)?, false)?;
    if ids.len() / n_ctx < 2 {
        return Err(Error::InvalidArgument(format!(
            "{} has {} tokens; --ctx {n_ctx} needs at least {} (two windows)",
            file.display(),
            ids.len(),
            2 * n_ctx as u128
        )));
    }
    Ok(ids)
}

/// `glmw perplexity`'s flags.
#[derive(clap::Args)]
pub struct PerplexityArgs {
    /// Path to a GGUF model file [default: the built-in glmw-tiny, a
    /// 3.5M-parameter model of GLM-4.7-Flash's architecture trained on
    /// the King James Bible].
    #[arg(long, short)]
    pub model: Option<PathBuf>,
    /// The text to score (UTF-8; special-token text is taken as plain text).
    #[arg(long, short)]
    pub file: PathBuf,
    /// Window length in tokens; the text needs at least two windows.
    #[arg(long, short = 'c', visible_alias = "ctx-size", default_value_t = 512)]
    pub ctx: usize,
    #[command(flatten)]
    pub device: DeviceArgs,
    /// Print one JSON document instead of text.
    #[arg(long)]
    pub json: bool,
}

pub fn perplexity(a: &PerplexityArgs) -> Result<()> {
    let (n_ctx, device, json) = (a.ctx, a.device, a.json);
    if n_ctx < 4 {
        return Err(Error::InvalidArgument("--ctx must be at least 4".into()));
    }
    if device.ubatch == 0 {
        return Err(Error::InvalidArgument("--ubatch must be at least 1".into()));
    }
    let model = super::open_model(a.model.as_deref())?;
    let tok = Tokenizer::from_gguf(&model.file)?;
    let ids = tokens(&tok, &a.file, n_ctx)?;
    let bos = tok.window_bos(&model.file)?;
    let n_vocab = model.config.n_vocab;
    let loaded = match device.backend.gpu(device.no_subgroups, device.no_coopmat) {
        Some(gpu) => {
            let opts = LoadOptions {
                gpu,
                n_ctx: Some(n_ctx),
                ubatch: device.ubatch,
            };
            Loaded::Gpu(super::runtime_from(model, opts)?)
        }
        None => Loaded::Cpu(model),
    };
    let (mut scorer, where_) = match &loaded {
        Loaded::Cpu(m) => (Scorer::Cpu(m), "cpu reference".to_string()),
        Loaded::Gpu(rt) => (
            Scorer::Gpu(Box::new(rt.session(Default::default())?)),
            rt.adapter(),
        ),
    };
    let t0 = Instant::now();
    let mut score = Score::default();
    let n_chunks = ids.len() / n_ctx;
    for window in ids.chunks_exact(n_ctx) {
        let mut window = window.to_vec();
        if let Some(b) = bos {
            window[0] = b;
        }
        let logits = scorer.window_logits(&window[..n_ctx - 1])?;
        // Row j predicts token j + 1; the second half is scored.
        for (j, row) in logits.chunks_exact(n_vocab).enumerate().skip(n_ctx / 2) {
            score.add(nll(row, window[j + 1]));
        }
        score.running.push(score.ppl());
        if !json {
            eprint!("[{}]{:.4},", score.running.len(), score.ppl());
        }
    }
    report(
        &score,
        n_ctx,
        n_chunks,
        &where_,
        t0.elapsed().as_secs_f64(),
        json,
    );
    Ok(())
}

fn report(s: &Score, n_ctx: usize, n_chunks: usize, where_: &str, secs: f64, json: bool) {
    let (ppl, err, count) = (s.ppl(), s.err(), s.count);
    if json {
        let doc = Json::obj(vec![
            ("ppl", Json::num(ppl)),
            ("ppl_err", Json::num(err)),
            ("n_ctx", Json::num(n_ctx as f64)),
            ("n_chunks", Json::num(n_chunks as f64)),
            ("tokens_scored", Json::num(count as f64)),
            (
                "running",
                Json::Arr(s.running.iter().map(|&p| Json::num(p)).collect()),
            ),
            ("backend", Json::str(where_)),
            ("seconds", Json::num(secs)),
        ]);
        println!("{}", doc.render());
    } else {
        eprintln!();
        println!(
            "Final estimate: PPL = {ppl:.4} +/- {err:.5} ({n_chunks} windows of {n_ctx}, {count} tokens scored, {where_}, {secs:.1} s)"
        );
    }
}
