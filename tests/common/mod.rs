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
