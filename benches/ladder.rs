//! `cargo bench --bench ladder`: the three rungs of `glmw bench` (micro,
//! block, model) through the same library code, on the tiny synthetic model,
//! so the ladder runs on any machine with a wgpu adapter (lavapipe too).
//! Full-size numbers come from `glmw bench --preset glm-4.7-flash`.

mod common;

use glmw::bench;
use glmw::engine::{Engine, EngineOptions};
use glmw::model::Model;

fn main() {
    let tiny = common::TinyFile::new("ladder");
    let model = Model::open(&tiny.path).expect("open tiny");
    let gpu = common::gpu();
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
    let m = bench::micro(&mut e, None, (20, 3), &[64, 200]).expect("micro");
    println!("micro: read bandwidth {:.1} GB/s", m.read_gb_s);
    for r in &m.rows {
        println!("  {:<22} {:>9.1} us", r.op, r.median_us);
    }
    let b = bench::block(&mut e, None, 20, 3, 64, (16, 2)).expect("block");
    println!(
        "block {}: median {:.1} us (IQR {:.1}); ffn {:.1} us; token predicted {:.0} us, measured {:.0} us",
        b.layer,
        b.block.median,
        b.block.iqr,
        b.ffn.median,
        b.prediction.token_us,
        b.measured.us_per_token()
    );
    let spec = bench::ModelSpec {
        prompts: vec![32],
        gens: vec![32],
        depths: vec![0, 128],
        reps: 2,
        count: 20,
        rounds: 2,
    };
    let r = bench::model(&mut e, &spec).expect("model");
    for t in &r.tests {
        let (m, sd) = t.ts();
        println!("  {:<14} {m:>9.1} ± {sd:.1} t/s", t.name());
    }
}
