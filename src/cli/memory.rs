//! The memory line commands print after loading, as llama.cpp reports its
//! model, KV and compute buffers: GPU bytes from the engine, the process's
//! resident host memory where the OS says it.

use glmw::Memory;

use super::json::Json;

/// Bytes as GB, or MB below one GB.
pub fn size(b: u64) -> String {
    if b >= 1_000_000_000 {
        format!("{:.2} GB", b as f64 / 1e9)
    } else {
        format!("{:.1} MB", b as f64 / 1e6)
    }
}

/// Resident set size of this process in bytes (Linux `/proc/self/status`;
/// `None` elsewhere or when it cannot be read).
pub fn host_rss() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kb.checked_mul(1024)
}

/// `memory: GPU 17.16 GB weights + 0.59 GB KV cache (18.02 GB in all) | host 1.10 GB resident`.
pub fn text(m: Memory) -> String {
    let host = host_rss().map_or(String::new(), |b| format!(" | host {} resident", size(b)));
    format!(
        "memory: GPU {} weights + {} KV cache ({} in all){host}",
        size(m.weights),
        size(m.kv_cache),
        size(m.device_total)
    )
}

pub fn json(m: Memory) -> Json {
    Json::obj(vec![
        ("gpu_weights_bytes", Json::num(m.weights as f64)),
        ("gpu_kv_cache_bytes", Json::num(m.kv_cache as f64)),
        ("gpu_total_bytes", Json::num(m.device_total as f64)),
        (
            "host_rss_bytes",
            host_rss().map_or(Json::Null, |b| Json::num(b as f64)),
        ),
    ])
}

/// What loading `f` will take on the GPU, before loading it (`glmw info`):
/// (weight bytes, KV cache bytes, context) at the default context. The
/// GPU holds each tensor in its file's format, so the weights take about
/// their bytes in the file; the cache holds an f16 latent row per layer
/// and position.
pub fn expected(f: &glmw::gguf::GgufFile, c: &glmw::model::Config) -> (u64, u64, usize) {
    let weights = f.tensors().iter().map(|t| t.n_bytes).sum();
    let n_ctx = glmw::session::default_n_ctx(c);
    let kv = (c.n_layer as u64)
        .saturating_mul(n_ctx as u64)
        .saturating_mul(2 * c.kv_row() as u64);
    (weights, kv, n_ctx)
}
