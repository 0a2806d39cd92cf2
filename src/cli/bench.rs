//! `glmw bench --tier micro|block|model`: the ladder of performance.md, on a
//! model file or a synthetic one made on the spot (`--preset`). Text by
//! default, one JSON document with `--json`; both carry the device, backend,
//! driver, kernel variant and model they were measured on.

use std::path::{Path, PathBuf};

use super::json::Json;
use super::DeviceArgs;
use glmw::bench::{self, Stats};
use glmw::engine::{Engine, EngineOptions};
use glmw::gpu::Gpu;
use glmw::model::Model;
use glmw::synth::Preset;
use glmw::{Error, Result};

#[derive(clap::Args)]
pub struct BenchArgs {
    /// Which rung of the ladder.
    #[arg(long, value_parser = ["micro", "block", "model"], default_value = "model")]
    pub tier: String,
    /// Path to a GGUF model file.
    #[arg(long, short)]
    pub model: Option<PathBuf>,
    /// Without --model: synthesize this model into a temp file first.
    #[arg(long, value_parser = ["tiny", "glm-4.7-flash", "deepseek-v2-lite"])]
    pub preset: Option<String>,
    /// KV cache length [default: what the tier needs; 4096 for block].
    #[arg(long)]
    pub ctx: Option<usize>,
    /// Timed repetitions per round (micro, block).
    #[arg(long, default_value_t = 100)]
    pub count: usize,
    /// Rounds (block): the report gives the median of round medians too.
    #[arg(long, default_value_t = 5)]
    pub rounds: usize,
    /// Block to measure (micro, block) [default: the first MoE block].
    #[arg(long)]
    pub layer: Option<usize>,
    /// Prompt tokens for the pp test (model).
    #[arg(long, default_value_t = 512)]
    pub prompt_len: usize,
    /// Tokens generated per decode test (model).
    #[arg(long, default_value_t = 128)]
    pub gen: usize,
    /// Context depths to decode at, as llama-bench -d (model; block uses
    /// the first). The cache is jumped to the depth, not filled.
    #[arg(long, value_delimiter = ',')]
    pub depth: Vec<usize>,
    /// Context lengths for the attention rows (micro).
    #[arg(long, value_delimiter = ',', default_value = "512,4096,16384")]
    pub contexts: Vec<usize>,
    #[command(flatten)]
    pub device: DeviceArgs,
    /// Print one JSON document instead of text.
    #[arg(long)]
    pub json: bool,
}

/// A synthetic model in a temp dir, removed when dropped.
struct TempModel(PathBuf);

impl Drop for TempModel {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn model_path(a: &BenchArgs) -> Result<(PathBuf, Option<TempModel>)> {
    match (&a.model, &a.preset) {
        (Some(m), _) => Ok((m.clone(), None)),
        (None, Some(p)) => {
            let preset = Preset::from_name(p)
                .ok_or_else(|| Error::InvalidArgument(format!("unknown preset {p:?}")))?;
            let dir = std::env::temp_dir().join(format!("glmw-bench-{}", std::process::id()));
            std::fs::create_dir_all(&dir).map_err(|e| Error::Io {
                path: dir.display().to_string(),
                source: e,
            })?;
            let path = dir.join(format!("{}.gguf", preset.name()));
            let mut bar = super::progress::Progress::new(format!("synth {}", preset.name()));
            glmw::synth::synth(&path, preset, 1, &mut |d, t| bar.update(d, t))?;
            bar.finish();
            Ok((path, Some(TempModel(dir))))
        }
        (None, None) => Err(Error::InvalidArgument(
            "give --model FILE, or --preset NAME to benchmark a synthetic model".into(),
        )),
    }
}

fn stats_json(s: &Stats) -> Json {
    Json::obj(vec![
        ("n", Json::num(s.n as f64)),
        ("median_us", Json::num(s.median)),
        ("p10_us", Json::num(s.p10)),
        ("p90_us", Json::num(s.p90)),
        ("iqr_us", Json::num(s.iqr)),
        ("mad_us", Json::num(s.mad)),
    ])
}

fn stats_text(s: &Stats) -> String {
    format!(
        "median {:.1} us, p10 {:.1}, p90 {:.1}, IQR {:.1}, MAD {:.1} (n {})",
        s.median, s.p10, s.p90, s.iqr, s.mad, s.n
    )
}

pub fn bench(a: &BenchArgs) -> Result<()> {
    if a.count == 0 || a.rounds == 0 {
        return Err(Error::InvalidArgument(
            "--count and --rounds must be at least 1".into(),
        ));
    }
    let (path, _temp) = model_path(a)?;
    let model = Model::open(&path)?;
    let c = &model.config;
    let max_depth = a.depth.iter().copied().max().unwrap_or(0);
    let n_ctx = a.ctx.unwrap_or(match a.tier.as_str() {
        // + warm-up and profiled tokens
        "model" => (a.prompt_len + a.gen).max(max_depth + a.gen) + 8,
        "micro" => a.contexts.iter().copied().max().unwrap_or(1),
        _ => (max_depth + 1).max(glmw::session::default_n_ctx(c)),
    });
    let gpu_opts = a.device.gpu_only("bench")?;
    let gpu = Gpu::new(gpu_opts)?;
    let opts = EngineOptions {
        n_ctx,
        ubatch: a.device.ubatch,
        ..Default::default()
    };
    let mut bar = super::progress::Progress::new("loading weights");
    let mut e = Engine::load(&model, &gpu, opts, &mut |d, t| bar.update(d, t))?;
    bar.finish();
    let i = &gpu.info;
    let header = vec![
        ("tier", Json::str(a.tier.clone())),
        ("adapter", Json::str(i.name.clone())),
        ("backend", Json::str(format!("{:?}", i.backend))),
        (
            "driver",
            Json::str(format!("{} {}", i.driver, i.driver_info)),
        ),
        ("kernels", Json::str(e.variant().name())),
        (
            "timing",
            Json::str(if e.has_timer() {
                "gpu timestamps"
            } else {
                "wall clock"
            }),
        ),
        ("model", Json::str(path.display().to_string())),
        (
            "config",
            Json::str(format!(
                "{} {} layers, n_embd {}, {} experts top-{}, vocab {}",
                c.arch, c.n_layer, c.n_embd, c.n_expert, c.n_expert_used, c.n_vocab
            )),
        ),
        ("n_ctx", Json::num(n_ctx as f64)),
    ];
    let mut text = vec![format!(
        "{} ({:?}, {} {}), {} kernels, {} | {}: {} layers, {} experts top-{}, ctx {n_ctx}",
        i.name,
        i.backend,
        i.driver,
        i.driver_info,
        e.variant().name(),
        if e.has_timer() {
            "GPU timestamps"
        } else {
            "wall clock"
        },
        short(&path),
        c.n_layer,
        c.n_expert,
        c.n_expert_used
    )];
    let body = match a.tier.as_str() {
        "model" => model_tier(&mut e, a, &mut text)?,
        "block" => block_tier(&mut e, a, &mut text)?,
        "micro" => micro_tier(&mut e, a, &mut text)?,
        t => {
            return Err(Error::InvalidArgument(format!(
                "--tier {t}: choose micro, block or model"
            )))
        }
    };
    if a.json {
        let mut fields = header;
        fields.extend(body);
        println!("{}", Json::obj(fields).render());
    } else {
        for l in text {
            println!("{l}");
        }
    }
    Ok(())
}

fn short(p: &Path) -> String {
    p.file_name()
        .map_or_else(|| p.display().to_string(), |n| n.to_string_lossy().into())
}

fn model_tier(
    e: &mut Engine,
    a: &BenchArgs,
    text: &mut Vec<String>,
) -> Result<Vec<(&'static str, Json)>> {
    let r = bench::model(e, a.prompt_len, a.gen, &a.depth)?;
    text.push(format!(
        "pp{}: {:.1} tok/s (batched prefill, ubatch {}), time to first token {:.1} ms",
        r.prompt_tokens,
        r.pp_tok_s,
        e.ubatch(),
        r.ttft_ms
    ));
    let mut runs = Vec::new();
    for d in &r.decode {
        let name = if d.depth == r.prompt_tokens {
            format!("tg{}", d.tokens)
        } else {
            format!("tg{} @ d{}", d.tokens, d.depth)
        };
        text.push(format!("{name}: {:.1} tok/s", d.tok_s));
        runs.push(Json::obj(vec![
            ("name", Json::str(name)),
            ("depth", Json::num(d.depth as f64)),
            ("tokens", Json::num(d.tokens as f64)),
            ("tok_s", Json::num(d.tok_s)),
        ]));
    }
    text.push(format!(
        "{} dispatches/token; profiled token: GPU {:.0} us, wall {:.0} us",
        r.dispatches, r.gpu_us, r.wall_us
    ));
    op_lines(&r.ops, r.gpu_us, text);
    text.push(format!(
        "prefill chunk of {} tokens: {} dispatches, GPU {:.0} us ({:.1} tok/s)",
        r.prefill_chunk,
        r.prefill_dispatches,
        r.prefill_gpu_us,
        r.prefill_chunk as f64 / (r.prefill_gpu_us * 1e-6).max(1e-12)
    ));
    op_lines(&r.prefill_ops, r.prefill_gpu_us, text);
    Ok(vec![
        ("prompt_tokens", Json::num(r.prompt_tokens as f64)),
        ("pp_tok_s", Json::num(r.pp_tok_s)),
        ("ttft_ms", Json::num(r.ttft_ms)),
        ("decode", Json::Arr(runs)),
        ("dispatches_per_token", Json::num(r.dispatches as f64)),
        ("gpu_us_per_token", Json::num(r.gpu_us)),
        ("wall_us_per_token", Json::num(r.wall_us)),
        ("ops", ops_json(&r.ops, r.gpu_us)),
        ("prefill_chunk", Json::num(r.prefill_chunk as f64)),
        ("prefill_dispatches", Json::num(r.prefill_dispatches as f64)),
        ("prefill_gpu_us", Json::num(r.prefill_gpu_us)),
        ("prefill_ops", ops_json(&r.prefill_ops, r.prefill_gpu_us)),
    ])
}

fn op_lines(ops: &[bench::OpTime], total_us: f64, text: &mut Vec<String>) {
    for o in ops.iter().take(20) {
        text.push(format!(
            "  {:<24} {:<14} x{:<3} {:>9.1} us {:>5.1}%",
            o.op,
            o.kernel,
            o.count,
            o.us,
            100.0 * o.us / total_us.max(1e-9)
        ));
    }
}

fn ops_json(ops: &[bench::OpTime], total_us: f64) -> Json {
    Json::Arr(
        ops.iter()
            .map(|o| {
                Json::obj(vec![
                    ("op", Json::str(o.op.clone())),
                    ("kernel", Json::str(o.kernel)),
                    ("count", Json::num(o.count as f64)),
                    ("us", Json::num(o.us)),
                    ("share", Json::num(o.us / total_us.max(1e-9))),
                ])
            })
            .collect(),
    )
}

fn block_tier(
    e: &mut Engine,
    a: &BenchArgs,
    text: &mut Vec<String>,
) -> Result<Vec<(&'static str, Json)>> {
    let depth = a.depth.first().copied().unwrap_or(0);
    let r = bench::block(e, a.layer, a.count, a.rounds, depth)?;
    text.push(format!(
        "block {} ({}, {} dispatches, depth {depth}): {}; median of {} round medians {:.1} us",
        r.layer,
        if r.moe { "MoE" } else { "dense" },
        r.dispatches,
        stats_text(&r.block),
        a.rounds,
        r.block_round_median
    ));
    text.push(format!("  feed-forward half: {}", stats_text(&r.ffn)));
    if let Some(d) = &r.dense {
        text.push(format!("  dense block 0: {}", stats_text(d)));
    }
    Ok(vec![
        ("layer", Json::num(r.layer as f64)),
        ("moe", Json::Bool(r.moe)),
        ("depth", Json::num(depth as f64)),
        ("dispatches", Json::num(r.dispatches as f64)),
        ("block", stats_json(&r.block)),
        ("block_round_median_us", Json::num(r.block_round_median)),
        ("ffn", stats_json(&r.ffn)),
        ("dense", r.dense.as_ref().map_or(Json::Null, stats_json)),
    ])
}

fn micro_tier(
    e: &mut Engine,
    a: &BenchArgs,
    text: &mut Vec<String>,
) -> Result<Vec<(&'static str, Json)>> {
    let r = bench::micro(e, a.layer, a.count, &a.contexts)?;
    text.push(format!(
        "read bandwidth {:.0} GB/s; kernels of block {} and the head:",
        r.read_gb_s, r.layer
    ));
    text.push(format!(
        "  {:<28} {:<14} {:>9} {:>10} {:>8} {:>7}",
        "op", "kernel", "us", "MB", "GB/s", "% read"
    ));
    let mut rows = Vec::new();
    for m in &r.rows {
        let op = match m.context {
            Some(c) => format!("{} @ {c}", m.op),
            None => m.op.clone(),
        };
        text.push(format!(
            "  {:<28} {:<14} {:>9.2} {:>10.3} {:>8.0} {:>6.1}%",
            op,
            m.kernel,
            m.median_us,
            m.bytes as f64 / 1e6,
            m.gb_s,
            100.0 * m.of_read
        ));
        rows.push(Json::obj(vec![
            ("op", Json::str(m.op.clone())),
            ("kernel", Json::str(m.kernel)),
            (
                "context",
                m.context.map_or(Json::Null, |c| Json::num(c as f64)),
            ),
            ("median_us", Json::num(m.median_us)),
            ("bytes", Json::num(m.bytes as f64)),
            ("gb_s", Json::num(m.gb_s)),
            ("of_read", Json::num(m.of_read)),
        ]));
    }
    Ok(vec![
        ("read_gb_s", Json::num(r.read_gb_s)),
        ("layer", Json::num(r.layer as f64)),
        ("kernels", Json::Arr(rows)),
    ])
}
