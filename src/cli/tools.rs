//! `glmw info | tokenize | logits | synth`.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

use super::json::Json;
use super::progress::Progress;
use super::Backend;
use glmw::model::Config;
use glmw::reference::{MlaForm, Reference};
use glmw::synth::{Mix, Preset};
use glmw::tokenizer::Tokenizer;
use glmw::{Error, Result};

/// What `info` reports about a file.
struct Summary {
    shown: String,
    name: String,
    config: Result<Config>,
    /// Tensor count and bytes per GGML type.
    by_type: BTreeMap<String, (usize, u64)>,
    tok_model: String,
    tok_pre: String,
    n_tokens: usize,
    n_merges: usize,
    special: Vec<(&'static str, Option<u32>)>,
}

pub fn info(path: Option<&Path>, json: bool, verbose: bool) -> Result<()> {
    let f = super::open_gguf(path)?;
    let s = summary(&f, path)?;
    if json {
        info_json(&f, s, verbose)
    } else {
        info_text(&f, s, verbose)
    }
}

fn summary(f: &glmw::gguf::GgufFile, path: Option<&Path>) -> Result<Summary> {
    let shown = path.map_or(glmw::builtin::NAME.to_string(), |p| p.display().to_string());
    let config = Config::from_gguf(f);
    let mut by_type: BTreeMap<String, (usize, u64)> = BTreeMap::new();
    for t in f.tensors() {
        let e = by_type.entry(t.ggml_type.name().to_string()).or_default();
        e.0 += 1;
        e.1 += t.n_bytes;
    }
    let tok_model = f
        .get_str("tokenizer.ggml.model")?
        .unwrap_or("none")
        .to_string();
    let tok_pre = f
        .get_str("tokenizer.ggml.pre")?
        .unwrap_or("none")
        .to_string();
    let n_tokens = f
        .get_str_array("tokenizer.ggml.tokens")?
        .map_or(0, |t| t.len());
    let n_merges = f
        .get_str_array("tokenizer.ggml.merges")?
        .map_or(0, |t| t.len());
    let special: Vec<(&'static str, Option<u32>)> = ["bos", "eos", "eot", "eom", "padding"]
        .iter()
        .map(|k| {
            (
                *k,
                f.get_u32(&format!("tokenizer.ggml.{k}_token_id"))
                    .ok()
                    .flatten(),
            )
        })
        .collect();
    let name = f.get_str("general.name")?.unwrap_or("").to_string();

    Ok(Summary {
        shown,
        name,
        config,
        by_type,
        tok_model,
        tok_pre,
        n_tokens,
        n_merges,
        special,
    })
}

fn info_json(f: &glmw::gguf::GgufFile, s: Summary, verbose: bool) -> Result<()> {
    let cfg = match &s.config {
        Ok(c) => config_json(c),
        Err(e) => Json::obj(vec![("error", Json::str(e.to_string()))]),
    };
    let memory = match &s.config {
        Ok(c) => {
            let (w, kv, n_ctx) = super::memory::expected(f, c);
            Json::obj(vec![
                ("gpu_weights_bytes", Json::num(w as f64)),
                ("gpu_kv_cache_bytes", Json::num(kv as f64)),
                ("n_ctx", Json::num(n_ctx as f64)),
            ])
        }
        Err(_) => Json::Null,
    };
    let types = s
        .by_type
        .iter()
        .map(|(k, (n, b))| {
            (
                k.clone(),
                Json::obj(vec![
                    ("count", Json::num(*n as f64)),
                    ("bytes", Json::num(*b as f64)),
                ]),
            )
        })
        .collect();
    let mut doc = vec![
        ("file", Json::str(s.shown)),
        ("file_bytes", Json::num(f.file_len() as f64)),
        ("gguf_version", Json::num(f.version)),
        ("name", Json::str(s.name)),
        (
            "architecture",
            Json::str(f.get_str("general.architecture")?.unwrap_or("")),
        ),
        ("config", cfg),
        ("memory", memory),
        ("n_tensors", Json::num(f.tensors().len() as f64)),
        ("tensor_types", Json::Obj(types)),
        (
            "tokenizer",
            Json::obj(vec![
                ("model", Json::str(s.tok_model)),
                ("pre", Json::str(s.tok_pre)),
                ("n_tokens", Json::num(s.n_tokens as f64)),
                ("n_merges", Json::num(s.n_merges as f64)),
                (
                    "special",
                    Json::Obj(
                        s.special
                            .iter()
                            .map(|(k, v)| (k.to_string(), v.map_or(Json::Null, Json::num)))
                            .collect(),
                    ),
                ),
            ]),
        ),
    ];
    if verbose {
        doc.push((
            "metadata",
            Json::Obj(
                f.metadata()
                    .iter()
                    .map(|(k, v)| (k.clone(), Json::str(v.summary())))
                    .collect(),
            ),
        ));
    }
    println!("{}", Json::obj(doc).render());
    Ok(())
}

fn info_text(f: &glmw::gguf::GgufFile, s: Summary, verbose: bool) -> Result<()> {
    println!(
        "file:         {} ({:.2} GiB, GGUF v{})",
        s.shown,
        f.file_len() as f64 / (1u64 << 30) as f64,
        f.version
    );
    println!("name:         {}", s.name);
    match &s.config {
        Ok(c) => {
            print_config(c);
            let (w, kv, n_ctx) = super::memory::expected(f, c);
            let size = super::memory::size;
            println!(
                "memory:       GPU about {} weights + {} KV cache at the default context of {n_ctx} (-c)",
                size(w),
                size(kv)
            );
        }
        Err(e) => println!("config:       not loadable: {e}"),
    }
    let types: Vec<String> = s
        .by_type
        .iter()
        .map(|(k, (n, _))| format!("{k} {n}"))
        .collect();
    println!("tensors:      {} ({})", f.tensors().len(), types.join(", "));
    let sp: Vec<String> = s
        .special
        .iter()
        .filter_map(|(k, v)| v.map(|v| format!("{k} {v}")))
        .collect();
    println!(
        "tokenizer:    {}/{}, {} tokens, {} merges; {}",
        s.tok_model,
        s.tok_pre,
        s.n_tokens,
        s.n_merges,
        sp.join(", ")
    );
    if verbose {
        for (k, v) in f.metadata() {
            println!("  {k} = {}", v.summary());
        }
        for t in f.tensors() {
            println!(
                "  {} {:?} {} {} bytes",
                t.name, t.dims, t.ggml_type, t.n_bytes
            );
        }
    }
    s.config.map(|_| ())
}

fn config_json(c: &Config) -> Json {
    let n = |v: usize| Json::num(v as f64);
    Json::obj(vec![
        ("n_layer", n(c.n_layer)),
        ("n_embd", n(c.n_embd)),
        ("n_vocab", n(c.n_vocab)),
        ("n_head", n(c.n_head)),
        ("n_ff", n(c.n_ff)),
        ("n_layer_dense_lead", n(c.n_layer_dense_lead)),
        ("n_lora_q", n(c.n_lora_q)),
        ("n_lora_kv", n(c.n_lora_kv)),
        ("n_embd_head_qk_nope", n(c.n_embd_head_qk_nope)),
        ("n_embd_head_qk_rope", n(c.n_embd_head_qk_rope)),
        ("n_embd_head_v", n(c.n_embd_head_v)),
        ("n_expert", n(c.n_expert)),
        ("n_expert_used", n(c.n_expert_used)),
        ("n_expert_shared", n(c.n_expert_shared)),
        ("n_ff_exp", n(c.n_ff_exp)),
        ("expert_weights_scale", Json::num(c.expert_weights_scale)),
        ("expert_weights_norm", Json::Bool(c.expert_weights_norm)),
        (
            "gating",
            Json::str(format!("{:?}", c.gating).to_lowercase()),
        ),
        ("rope_freq_base", Json::num(c.rope_freq_base)),
        ("yarn", Json::Bool(c.yarn.is_some())),
        ("rms_eps", Json::num(c.rms_eps)),
        ("kq_scale", Json::num(c.kq_scale())),
        ("n_ctx_train", n(c.n_ctx_train)),
    ])
}

fn print_config(c: &Config) {
    println!(
        "architecture: {} ({} layers, {} dense lead), hidden {}, vocab {}",
        c.arch, c.n_layer, c.n_layer_dense_lead, c.n_embd, c.n_vocab
    );
    let q = if c.n_lora_q > 0 {
        format!("q LoRA {}", c.n_lora_q)
    } else {
        "direct q".to_string()
    };
    println!(
        "attention:    MLA, {} heads, {q}, kv LoRA {}, nope/rope/v {}/{}/{}, kq_scale {:.6}",
        c.n_head,
        c.n_lora_kv,
        c.n_embd_head_qk_nope,
        c.n_embd_head_qk_rope,
        c.n_embd_head_v,
        c.kq_scale()
    );
    println!(
        "rope:         base {}, {}",
        c.rope_freq_base,
        if let Some(y) = c.yarn {
            format!("YaRN x{}", 1.0 / y.freq_scale)
        } else {
            "no scaling".into()
        }
    );
    if c.n_expert > 0 {
        println!(
            "moe:          {} experts, top-{}, {} shared, width {}, {:?} gating, norm {}, scale {}",
            c.n_expert,
            c.n_expert_used,
            c.n_expert_shared,
            c.n_ff_exp,
            c.gating,
            c.expert_weights_norm,
            c.expert_weights_scale
        );
    }
    println!(
        "dense ffn:    {}; rms eps {}; trained context {}",
        c.n_ff, c.rms_eps, c.n_ctx_train
    );
}

pub fn tokenize(path: Option<&Path>, text: &str, special: bool, json: bool) -> Result<()> {
    let f = super::open_gguf(path)?;
    let tok = Tokenizer::from_gguf(&f)?;
    let ids = tok.encode(text, special)?;
    let pieces: Vec<String> = ids
        .iter()
        .map(|&i| tok.piece(i).unwrap_or("").to_string())
        .collect();
    if json {
        let doc = Json::obj(vec![
            (
                "ids",
                Json::Arr(ids.iter().map(|&i| Json::num(i)).collect()),
            ),
            (
                "pieces",
                Json::Arr(pieces.into_iter().map(Json::Str).collect()),
            ),
        ]);
        println!("{}", doc.render());
    } else {
        for (id, p) in ids.iter().zip(&pieces) {
            println!("{id:>8} {p:?}");
        }
        println!("{} tokens", ids.len());
    }
    Ok(())
}

/// `glmw logits`'s flags.
#[derive(clap::Args)]
pub struct LogitsArgs {
    /// Path to a GGUF model file [default: the built-in glmw-tiny, a
    /// 3.5M-parameter model of GLM-4.7-Flash's architecture trained on
    /// the King James Bible].
    #[arg(long, short)]
    pub model: Option<PathBuf>,
    /// Comma-separated token ids, e.g. 154822,154824,785.
    #[arg(long, value_delimiter = ',', required = true)]
    pub tokens: Vec<u32>,
    /// Where to run the forward pass: the CPU reference, or a GPU
    /// (auto/gpu picks the best adapter; metal, vulkan, dx12, gl force one).
    #[arg(long, value_enum, default_value = "cpu")]
    pub backend: Backend,
    /// Use the shared-memory kernels even where the GPU has subgroups.
    #[arg(long)]
    pub no_subgroups: bool,
    /// Run the prefill on the f32 matmul even where the GPU offers
    /// cooperative matrices.
    #[arg(long)]
    pub no_coopmat: bool,
    /// KV cache length for the GPU run (default: the number of tokens).
    #[arg(long)]
    pub ctx: Option<usize>,
    /// With --out, write the logits of every position, not only the last
    /// (the GPU then decodes token by token instead of one batched prefill).
    #[arg(long)]
    pub all: bool,
    /// Write raw little-endian f32 logits to this file (n_vocab per position).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Print one JSON document instead of text.
    #[arg(long)]
    pub json: bool,
}

pub fn logits(a: &LogitsArgs) -> Result<()> {
    let (tokens, backend, all, json) = (&a.tokens[..], a.backend, a.all, a.json);
    let model = super::open_model(a.model.as_deref())?;
    let n_vocab = model.config.n_vocab;
    if let Some(&bad) = tokens.iter().find(|&&t| t as usize >= n_vocab) {
        return Err(Error::InvalidArgument(format!(
            "token id {bad} is outside the vocabulary (0..{n_vocab})"
        )));
    }
    let t0 = Instant::now();
    let rows: Vec<Vec<f32>> = match backend.gpu(a.no_subgroups, a.no_coopmat) {
        None => {
            if tokens.len() > CPU_TOKENS_WARN {
                eprintln!(
                    "warning: the CPU reference runs {} tokens one at a time in plain f32, which is slow on large models; --backend gpu runs them batched",
                    tokens.len()
                );
            }
            Reference::new(&model, tokens.len(), MlaForm::Absorbed).forward_all(tokens)?
        }
        Some(opts) => gpu_logits(&model, opts, a.ctx.unwrap_or(tokens.len()), tokens, all)?,
    };
    let elapsed = t0.elapsed().as_secs_f64();
    let last = rows.last().expect("tokens is non-empty");
    if let Some(out) = &a.out {
        let shown = out.display().to_string();
        let mut w = std::io::BufWriter::new(std::fs::File::create(out).map_err(|e| Error::Io {
            path: shown.clone(),
            source: e,
        })?);
        let chosen: Vec<&Vec<f32>> = if all {
            rows.iter().collect()
        } else {
            vec![last]
        };
        for r in chosen {
            w.write_all(bytemuck::cast_slice(r))
                .map_err(|e| Error::Io {
                    path: shown.clone(),
                    source: e,
                })?;
        }
        w.flush().map_err(|e| Error::Io {
            path: shown,
            source: e,
        })?;
    }
    let top = top_k(last, 5);
    let tok = Tokenizer::from_gguf(&model.file).ok();
    let piece = |id: usize| {
        tok.as_ref()
            .and_then(|t| t.piece(id as u32))
            .unwrap_or("")
            .to_string()
    };
    if json {
        let doc = Json::obj(vec![
            ("backend", Json::str(format!("{backend:?}").to_lowercase())),
            ("n_tokens", Json::num(tokens.len() as f64)),
            ("n_vocab", Json::num(n_vocab as f64)),
            ("argmax", Json::num(top[0].0 as f64)),
            (
                "top",
                Json::Arr(
                    top.iter()
                        .map(|&(id, l)| {
                            Json::obj(vec![
                                ("id", Json::num(id as f64)),
                                ("logit", Json::num(l)),
                                ("piece", Json::str(piece(id))),
                            ])
                        })
                        .collect(),
                ),
            ),
            ("seconds", Json::num(elapsed)),
        ]);
        println!("{}", doc.render());
    } else {
        println!(
            "{} tokens on {backend:?} in {elapsed:.2} s; last position:",
            tokens.len()
        );
        println!("argmax {}", top[0].0);
        for (id, l) in top {
            println!("{id:>8} {l:>12.6} {:?}", piece(id));
        }
    }
    Ok(())
}

/// Above this many tokens `logits` on the CPU warns that it will be slow
/// (llama.cpp warns, rather than refuses, when a request is costly).
const CPU_TOKENS_WARN: usize = 64;

/// Logits from the GPU engine: every position's (token by token) with
/// `all`, else the last one's from one batched prefill.
fn gpu_logits(
    model: &glmw::model::Model,
    opts: glmw::gpu::GpuOptions,
    n_ctx: usize,
    tokens: &[u32],
    all: bool,
) -> Result<Vec<Vec<f32>>> {
    let gpu = glmw::gpu::Gpu::new(opts)?;
    let mut bar = Progress::new("loading weights");
    let eopts = glmw::engine::EngineOptions {
        n_ctx,
        ..Default::default()
    };
    let e = glmw::engine::Engine::load(model, &gpu, eopts, &mut |d, t| bar.update(d, t));
    bar.finish();
    let mut e = e?;
    if all {
        tokens.iter().map(|&t| e.logits(t)).collect()
    } else {
        Ok(vec![e.prefill_logits(tokens)?])
    }
}

/// Indices and values of the k largest logits, largest first.
fn top_k(x: &[f32], k: usize) -> Vec<(usize, f32)> {
    let mut idx: Vec<usize> = (0..x.len()).collect();
    idx.sort_by(|&a, &b| x[b].total_cmp(&x[a]).then(a.cmp(&b)));
    idx.into_iter().take(k).map(|i| (i, x[i])).collect()
}

pub fn synth(preset: &str, mix: &str, output: &Path, seed: u64) -> Result<()> {
    let preset = Preset::from_name(preset)
        .ok_or_else(|| Error::InvalidArgument(format!("unknown preset {preset:?}")))?;
    let mix = Mix::from_name(mix)
        .ok_or_else(|| Error::InvalidArgument(format!("unknown mix {mix:?}")))?;
    let t0 = Instant::now();
    let mut bar = Progress::new(format!("synth {} {}", preset.name(), mix.name()));
    let s = glmw::synth::synth(output, preset, mix, seed, &mut |d, t| bar.update(d, t))?;
    bar.finish();
    println!(
        "wrote {} ({} {}, seed {seed}): {} tensors, {:.3} GB of tensor data in {:.1} s",
        output.display(),
        preset.name(),
        mix.name(),
        s.n_tensors,
        s.tensor_bytes as f64 / 1e9,
        t0.elapsed().as_secs_f64()
    );
    Ok(())
}

pub fn devices(json: bool) -> Result<()> {
    let all = glmw::gpu::list_adapters(glmw::gpu::BackendChoice::Auto);
    let chosen = glmw::gpu::Gpu::new(Default::default());
    let describe = |i: &wgpu::AdapterInfo| {
        format!(
            "{} ({:?}, {:?}, driver {} {}, subgroup size {}..{})",
            i.name,
            i.backend,
            i.device_type,
            i.driver,
            i.driver_info,
            i.subgroup_min_size,
            i.subgroup_max_size
        )
    };
    if json {
        let adapters = all.iter().map(|i| Json::str(describe(i))).collect();
        let pick = match &chosen {
            Ok(g) => Json::obj(vec![
                ("adapter", Json::str(describe(&g.info))),
                ("kernels", Json::str(g.caps.variant.name())),
                ("shader_f16", Json::Bool(g.caps.shader_f16)),
                ("timestamps", Json::Bool(g.caps.timestamps)),
                (
                    "max_storage_binding",
                    Json::num(g.caps.max_storage_binding as f64),
                ),
                ("max_buffer", Json::num(g.caps.max_buffer as f64)),
                (
                    "cooperative_matrix",
                    Json::Arr(g.coop_matrix.iter().map(|c| Json::str(c.clone())).collect()),
                ),
                ("prefill_cooperative_matrices", Json::Bool(g.caps.coop)),
                ("hardware_buffer_bounds", Json::Bool(g.caps.hw_bounds)),
            ]),
            Err(e) => Json::obj(vec![("error", Json::str(e.to_string()))]),
        };
        println!(
            "{}",
            Json::obj(vec![("adapters", Json::Arr(adapters)), ("chosen", pick)]).render()
        );
    } else {
        for i in &all {
            println!("adapter: {}", describe(i));
        }
        if let Ok(g) = &chosen {
            println!(
                "chosen:  {} with {} kernels; f16 {}, timestamps {}, max binding {} MiB, max buffer {} MiB, hardware buffer bounds {}",
                g.info.name,
                g.caps.variant.name(),
                g.caps.shader_f16,
                g.caps.timestamps,
                g.caps.max_storage_binding >> 20,
                g.caps.max_buffer >> 20,
                g.caps.hw_bounds
            );
            let coop = match g.coop_matrix.is_empty() {
                true => "none".to_string(),
                false => g.coop_matrix.join(", "),
            };
            let used = match g.caps.coop {
                true => "prefill matmuls on 16x16x16 F16->F32",
                false => "unused (prefill needs 16x16x16 F16->F32)",
            };
            println!("cooperative matrices: {coop}; {used}");
        }
    }
    chosen.map(|_| ())
}
