//! `glmw perplexity`: llama.cpp's method, so the number compares with
//! `llama-perplexity` on the same file: the text is cut into windows of
//! `--ctx` tokens, each run from an empty cache, and the second half of each
//! window is scored (every scored token has at least ctx/2 tokens of
//! context). Prints the running perplexity per window and the final
//! estimate with its standard error.

use std::path::Path;
use std::time::Instant;

use super::json::Json;
use super::DeviceArgs;
use glmw::gpu::Gpu;
use glmw::reference::{MlaForm, Reference};
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

pub fn perplexity(
    path: Option<&Path>,
    file: &Path,
    n_ctx: usize,
    device: DeviceArgs,
    json: bool,
) -> Result<()> {
    if n_ctx < 4 {
        return Err(Error::InvalidArgument("--ctx must be at least 4".into()));
    }
    let model = super::open_model(path)?;
    let tok = Tokenizer::from_gguf(&model.file)?;
    let text = std::fs::read_to_string(file).map_err(|e| Error::Io {
        path: file.display().to_string(),
        source: e,
    })?;
    let ids = tok.encode(&text, false)?;
    let n_chunks = ids.len() / n_ctx;
    if n_chunks == 0 || ids.len() < 2 * n_ctx {
        return Err(Error::InvalidArgument(format!(
            "{} has {} tokens; --ctx {n_ctx} needs at least {} (two windows)",
            file.display(),
            ids.len(),
            2 * n_ctx
        )));
    }
    // As llama-perplexity: each window starts with BOS when the model adds one.
    let bos = match model.file.get_bool("tokenizer.ggml.add_bos_token")? {
        Some(true) => tok.bos(),
        _ => None,
    };
    let gpu = match device.backend.gpu(device.no_subgroups) {
        Some(o) => Some(Gpu::new(o)?),
        None => None,
    };
    let mut engine = match &gpu {
        Some(g) => Some(super::generate::load(
            &model,
            g,
            n_ctx,
            1,
            glmw::engine::DEFAULT_UBATCH,
        )?),
        None => None,
    };
    let t0 = Instant::now();
    let (mut sum, mut sum_sq, mut count) = (0f64, 0f64, 0usize);
    let mut running = Vec::new();
    for c in 0..n_chunks {
        let mut window = ids[c * n_ctx..(c + 1) * n_ctx].to_vec();
        if let Some(b) = bos {
            window[0] = b;
        }
        let mut reference = engine
            .is_none()
            .then(|| Reference::new(&model, n_ctx, MlaForm::Absorbed));
        if let Some(e) = engine.as_mut() {
            e.reset();
        }
        // Position j's logits predict token j + 1; the second half is scored.
        let n_vocab = model.config.n_vocab;
        let mut score = |j: usize, logits: &[f32]| {
            if j >= n_ctx / 2 {
                let v = nll(logits, window[j + 1]);
                sum += v;
                sum_sq += v * v;
                count += 1;
            }
        };
        match (&mut reference, engine.as_mut()) {
            (Some(r), _) => {
                for (j, &t) in window[..n_ctx - 1].iter().enumerate() {
                    score(j, &r.forward(t)?);
                }
            }
            (None, Some(e)) => {
                let rows = e.prefill_all_logits(&window[..n_ctx - 1])?;
                for (j, logits) in rows.chunks_exact(n_vocab).enumerate() {
                    score(j, logits);
                }
            }
            (None, None) => unreachable!("one backend is set"),
        }
        let ppl = (sum / count as f64).exp();
        running.push(ppl);
        if !json {
            eprint!("[{}]{ppl:.4},", c + 1);
        }
    }
    let mean = sum / count as f64;
    let var = (sum_sq / count as f64 - mean * mean).max(0.0);
    let ppl = mean.exp();
    let err = ppl * (var / (count as f64 - 1.0).max(1.0)).sqrt();
    let secs = t0.elapsed().as_secs_f64();
    let where_ = match &gpu {
        Some(g) => format!("{} ({:?})", g.info.name, g.info.backend),
        None => "cpu reference".into(),
    };
    if json {
        let doc = Json::obj(vec![
            ("ppl", Json::num(ppl)),
            ("ppl_err", Json::num(err)),
            ("n_ctx", Json::num(n_ctx as f64)),
            ("n_chunks", Json::num(n_chunks as f64)),
            ("tokens_scored", Json::num(count as f64)),
            (
                "running",
                Json::Arr(running.iter().map(|&p| Json::num(p)).collect()),
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
    Ok(())
}
