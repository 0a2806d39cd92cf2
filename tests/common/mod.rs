//! Helpers shared by the integration tests.
#![allow(dead_code)]

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;

use glmw::gguf::{GgufFile, GgufWriter, TensorSpec, Value};
use glmw::gpu::Format;
use glmw::quant::{self, GgmlType};
use glmw::synth::{Mix, Preset};

/// A fresh directory under the system temp dir, unique per call: tests of
/// one binary run on parallel threads, and two calls with the same tag
/// (bad_input's `config_with`) once shared a directory, so one test read
/// the file another had just written.
pub fn temp_dir(tag: &str) -> PathBuf {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let d = std::env::temp_dir().join(format!("glmw-test-{}-{tag}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("create temp dir");
    d
}

/// The tiny synthetic model (seed 1), written once per test binary.
pub fn tiny_model() -> &'static PathBuf {
    static PATH: OnceLock<PathBuf> = OnceLock::new();
    PATH.get_or_init(|| tiny_in(Mix::Q4_0))
}

/// The tiny synthetic model (seed 1) in quant mix `mix`, written now.
pub fn tiny_in(mix: Mix) -> PathBuf {
    let p = temp_dir(&format!("tiny-{}", mix.name())).join("tiny.gguf");
    glmw::synth::synth(&p, Preset::Tiny, mix, 1, &mut |_, _| {}).expect("synth tiny");
    p
}

/// The tiny model with every block dense (blk.0's FFN copied into blocks 1
/// and 2, their experts dropped) and metadata `edit`.
pub fn all_dense(edit: impl FnOnce(&mut Vec<(String, Value)>)) -> PathBuf {
    let src = GgufFile::open(tiny_model()).unwrap();
    let mut md = src.metadata().to_vec();
    let lead = "deepseek2.leading_dense_block_count";
    md.retain(|(k, _)| k != lead);
    md.push((lead.into(), Value::U32(3)));
    edit(&mut md);
    let moe = ["_exps", "_shexp", "ffn_gate_inp", "exp_probs_b"];
    let mut tensors: Vec<(TensorSpec, &[u8])> = Vec::new();
    for t in src.tensors() {
        if t.name.starts_with("blk.0.") || !moe.iter().any(|m| t.name.contains(m)) {
            let spec = TensorSpec::new(t.name.clone(), &t.dims, t.ggml_type);
            tensors.push((spec, src.tensor_data(t)));
        }
        if let Some(ffn) = t
            .name
            .strip_prefix("blk.0.ffn_")
            .filter(|_| !t.name.contains("norm"))
        {
            for il in 1..3 {
                let name = format!("blk.{il}.ffn_{ffn}");
                let spec = TensorSpec::new(name, &t.dims, t.ggml_type);
                tensors.push((spec, src.tensor_data(t)));
            }
        }
    }
    write_model("dense", &md, &tensors)
}

/// The tiny model with q projected directly, as DeepSeek-V2-Lite does: no
/// q_lora_rank, and each block's attn_q_a, attn_q_a_norm and attn_q_b
/// replaced by one attn_q of random Q4_0 weights (seeded).
pub fn direct_q() -> &'static PathBuf {
    static PATH: OnceLock<PathBuf> = OnceLock::new();
    PATH.get_or_init(|| {
        let src = GgufFile::open(tiny_model()).unwrap();
        let c = glmw::model::Config::from_gguf(&src).unwrap();
        let mut md = src.metadata().to_vec();
        md.retain(|(k, _)| k != "deepseek2.attention.q_lora_rank");
        let dims = [c.n_embd as u64, (c.n_head * c.n_embd_head_qk()) as u64];
        let q: Vec<Vec<u8>> = (0..c.n_layer)
            .map(|il| {
                let w = randn((dims[0] * dims[1]) as usize, 0.05, 70 + il as u64);
                let mut out = Vec::new();
                quant::quantize_into(GgmlType::Q4_0, &w, &mut out).unwrap();
                out
            })
            .collect();
        let mut tensors: Vec<(TensorSpec, &[u8])> = Vec::new();
        for t in src.tensors() {
            if !t.name.contains(".attn_q_") {
                let spec = TensorSpec::new(t.name.clone(), &t.dims, t.ggml_type);
                tensors.push((spec, src.tensor_data(t)));
            }
        }
        for (il, data) in q.iter().enumerate() {
            let spec = TensorSpec::new(format!("blk.{il}.attn_q.weight"), &dims, GgmlType::Q4_0);
            tensors.push((spec, data));
        }
        write_model("direct_q", &md, &tensors)
    })
}

/// A GGUF file of `md` and `tensors` in a fresh temp directory.
fn write_model(tag: &str, md: &[(String, Value)], tensors: &[(TensorSpec, &[u8])]) -> PathBuf {
    let path = temp_dir(tag).join("m.gguf");
    let specs: Vec<TensorSpec> = tensors.iter().map(|t| t.0.clone()).collect();
    let mut w = GgufWriter::create(&path, md, &specs).unwrap();
    for (_, data) in tensors {
        w.write_data(data).unwrap();
    }
    w.finish().unwrap();
    path
}

/// The one GPU device shared by a test binary. No adapter is a failure that
/// names the fix, never a silent pass.
pub fn gpu() -> &'static glmw::gpu::Gpu {
    static GPU: OnceLock<glmw::gpu::Gpu> = OnceLock::new();
    GPU.get_or_init(|| {
        glmw::gpu::Gpu::new(Default::default()).unwrap_or_else(|e| {
            panic!("GPU tests need a wgpu adapter: {e}. Without a GPU, install Mesa's lavapipe: apt-get install mesa-vulkan-drivers")
        })
    })
}

/// Pipelines for both kernel variants on the shared device.
pub fn pipelines() -> &'static [glmw::gpu::Pipelines] {
    static P: OnceLock<Vec<glmw::gpu::Pipelines>> = OnceLock::new();
    P.get_or_init(|| {
        let g = gpu();
        [glmw::gpu::Variant::Subgroup, glmw::gpu::Variant::Shared]
            .into_iter()
            .map(|v| {
                let caps = g
                    .with_variant(v)
                    .unwrap_or_else(|e| panic!("both kernel variants must be testable: {e}"));
                glmw::gpu::Pipelines::new(g, &caps).unwrap()
            })
            .collect()
    })
}

/// The tiny synthetic model, opened once per test binary.
pub fn tiny() -> &'static glmw::model::Model {
    static M: OnceLock<glmw::model::Model> = OnceLock::new();
    M.get_or_init(|| glmw::model::Model::open(tiny_model()).unwrap())
}

/// An engine over the tiny model with `opts`, on the shared device.
pub fn tiny_engine(opts: glmw::engine::EngineOptions) -> glmw::engine::Engine<'static> {
    glmw::engine::Engine::load(tiny(), gpu(), opts, &mut |_, _| {}).unwrap()
}

/// The dot product in f64, as the oracles sum.
pub fn dot64(a: &[f32], b: &[f32]) -> f64 {
    a.iter().zip(b).map(|(&x, &y)| x as f64 * y as f64).sum()
}

/// The first `n` u32s of a GPU buffer.
pub fn read_u32(buf: &wgpu::Buffer, n: usize) -> Vec<u32> {
    bytemuck::pod_collect_to_vec(&gpu().read(buf, 4 * n as u64).unwrap())
}

/// The GGUF type of a kernel weight format.
pub fn ggml(fmt: Format) -> GgmlType {
    match fmt {
        Format::F32 => GgmlType::F32,
        Format::F16 => GgmlType::F16,
        Format::BF16 => GgmlType::BF16,
        Format::Q4_0 => GgmlType::Q4_0,
        Format::Q4_1 => GgmlType::Q4_1,
        Format::Q5_0 => GgmlType::Q5_0,
        Format::Q5_1 => GgmlType::Q5_1,
        Format::Q8_0 => GgmlType::Q8_0,
        Format::Q4K => GgmlType::Q4_K,
        Format::Q5K => GgmlType::Q5_K,
        Format::Q6K => GgmlType::Q6_K,
        Format::Q2K => GgmlType::Q2_K,
        Format::Q3K => GgmlType::Q3_K,
        Format::IQ4NL => GgmlType::IQ4_NL,
        Format::IQ4XS => GgmlType::IQ4_XS,
    }
}

/// Quantize `w` in `fmt`, upload it as the engine does (its own repack), and
/// return the dequantized weights the GPU result is judged against.
pub fn upload(fmt: Format, w: &[f32]) -> (Vec<f32>, Vec<wgpu::Buffer>) {
    let mut blocks = Vec::new();
    quant::quantize_into(ggml(fmt), w, &mut blocks).unwrap();
    let deq = quant::dequantize_vec(ggml(fmt), &blocks, w.len()).unwrap();
    let arrays = glmw::gpu::weights::repack(fmt, &blocks).unwrap();
    let gpu = gpu();
    (
        deq,
        arrays
            .iter()
            .map(|a| gpu.storage("w", a).unwrap())
            .collect(),
    )
}

/// y as a kernel must leave it: `y0` with the oracle's outputs `out`
/// (index, value) stored there, or added with `accum`; and which elements
/// are written.
pub fn expect(
    tag: &str,
    y0: &[f32],
    out: impl IntoIterator<Item = (usize, f64)>,
    accum: bool,
) -> (Vec<f32>, Vec<bool>) {
    let mut want = y0.to_vec();
    let mut written = vec![false; y0.len()];
    for (i, v) in out {
        assert!(!written[i], "{tag}: test writes y[{i}] twice");
        want[i] = if accum {
            (y0[i] as f64 + v) as f32
        } else {
            v as f32
        };
        written[i] = true;
    }
    (want, written)
}

/// Check a kernel's output `got` against `expect`'s `want`: elements not
/// `written` bit for bit, the written ones within `tol` (relative L2).
/// Returns the error.
pub fn compare(tag: &str, got: &[f32], want: &[f32], written: &[bool], tol: f64) -> f64 {
    for (i, (&a, &b)) in got.iter().zip(want).enumerate() {
        assert!(
            written[i] || a.to_bits() == b.to_bits(),
            "{tag}: y[{i}] must stay {b}, is {a}"
        );
    }
    let pick = |v: &[f32]| -> Vec<f32> {
        v.iter()
            .zip(written)
            .filter(|p| *p.1)
            .map(|p| *p.0)
            .collect()
    };
    let (got, exp) = (pick(got), pick(want));
    let e = glmw::reference::ops::rel_l2(&got, &exp);
    assert!(
        e < tol,
        "{tag}: rel L2 {e:.3e}; {:?} vs {:?}",
        &got[..3.min(got.len())],
        &exp[..3.min(exp.len())]
    );
    e
}

/// Seeded values ≈ N(0, std) (xorshift + sum of uniforms); never all zero.
pub fn randn(n: usize, std: f32, seed: u64) -> Vec<f32> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            let u = ((s & 0xFFFF) + ((s >> 16) & 0xFFFF) + ((s >> 32) & 0xFFFF) + (s >> 48)) as f32;
            (u / 65536.0 - 2.0) * std * 3f32.sqrt()
        })
        .collect()
}

/// Run the `glmw` binary with `args`.
pub fn glmw(args: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_glmw"))
        .args(args)
        .output()
        .expect("run glmw")
}
