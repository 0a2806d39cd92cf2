//! `cargo bench --bench ladder`: the three rungs of `glmw bench` (micro,
//! block, model) through the same library code, on the tiny synthetic model,
//! so the ladder runs on any machine with a wgpu adapter (lavapipe too).
//! Full-size numbers come from `glmw bench --preset glm-4.7-flash`.

use glmw::bench;
use glmw::engine::{Engine, EngineOptions};
use glmw::gpu::Gpu;
use glmw::model::Model;
use glmw::synth::{self, Preset};

fn main() {
    let dir = std::env::temp_dir().join(format!("glmw-ladder-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let path = dir.join("tiny.gguf");
    synth::synth(&path, Preset::Tiny, 1, &mut |_, _| {}).expect("synth tiny");
    let model = Model::open(&path).expect("open tiny");
    let gpu = Gpu::new(Default::default()).expect("a wgpu adapter (or mesa-vulkan-drivers)");
    let opts = EngineOptions {
        n_ctx: 256,
        ..Default::default()
    };
    let mut e = Engine::load(&model, &gpu, opts, &mut |_, _| {}).expect("load");
    println!(
        "{} ({:?}), {} kernels",
        gpu.info.name,
        gpu.info.backend,
        e.variant().name()
    );
    let m = bench::micro(&mut e, None, 20, &[64, 200]).expect("micro");
    println!("micro: read bandwidth {:.1} GB/s", m.read_gb_s);
    for r in &m.rows {
        println!("  {:<22} {:>9.1} us", r.op, r.median_us);
    }
    let b = bench::block(&mut e, None, 20, 3, 64).expect("block");
    println!(
        "block {}: median {:.1} us (IQR {:.1}); ffn {:.1} us",
        b.layer, b.block.median, b.block.iqr, b.ffn.median
    );
    let r = bench::model(&mut e, 32, 32, &[128]).expect("model");
    println!("model: pp32 {:.1} tok/s", r.pp_tok_s);
    for d in &r.decode {
        println!("  tg{} @ d{}: {:.1} tok/s", d.tokens, d.depth, d.tok_s);
    }
    let _ = std::fs::remove_dir_all(&dir);
}
