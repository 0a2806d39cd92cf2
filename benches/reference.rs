//! `cargo bench`: time the CPU reference forward pass on the tiny synthetic
//! model. The GPU tiers (`glmw bench`) will call the same code paths here.

use std::time::Instant;

use glmw::model::Model;
use glmw::reference::{MlaForm, Reference};
use glmw::synth::{self, Preset};

fn main() {
    let dir = std::env::temp_dir().join(format!("glmw-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let path = dir.join("tiny.gguf");
    synth::synth(&path, Preset::Tiny, synth::Mix::Q4_0, 1, &mut |_, _| {}).expect("synth tiny");
    let model = Model::open(&path).expect("open tiny");
    let tokens: Vec<u32> = (0..32).map(|i| (i * 13 % 470) as u32).collect();
    let mut times = Vec::new();
    for _ in 0..5 {
        let mut r = Reference::new(&model, tokens.len(), MlaForm::Absorbed);
        let t0 = Instant::now();
        r.forward_all(&tokens).expect("forward");
        times.push(t0.elapsed().as_secs_f64() / tokens.len() as f64);
    }
    times.sort_by(f64::total_cmp);
    println!(
        "reference forward (tiny, 32 tokens): median {:.3} ms/token",
        times[2] * 1e3
    );
    let _ = std::fs::remove_dir_all(&dir);
}
