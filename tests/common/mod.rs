//! Helpers shared by the integration tests.
#![allow(dead_code)]

use std::path::PathBuf;
use std::sync::OnceLock;

use glmw::synth::Preset;

/// A fresh directory under the system temp dir, unique per test.
pub fn temp_dir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("glmw-test-{}-{tag}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("create temp dir");
    d
}

/// The tiny synthetic model (seed 1), written once per test binary.
pub fn tiny_model() -> &'static PathBuf {
    static PATH: OnceLock<PathBuf> = OnceLock::new();
    PATH.get_or_init(|| {
        let p = temp_dir("tiny").join("tiny.gguf");
        glmw::synth::synth(&p, Preset::Tiny, 1, &mut |_, _| {}).expect("synth tiny");
        p
    })
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
