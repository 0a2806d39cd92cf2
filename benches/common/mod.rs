//! What the benches share: the tiny synthetic model in a temp file, and
//! the GPU.

use glmw::gpu::Gpu;
use glmw::synth::{self, Preset};
use std::path::PathBuf;

/// The tiny synthetic model (Q4_0 mix) written to a temp directory that
/// is removed again on drop.
pub struct TinyFile {
    dir: PathBuf,
    pub path: PathBuf,
}

impl TinyFile {
    pub fn new(tag: &str) -> TinyFile {
        let dir = std::env::temp_dir().join(format!("glmw-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let path = dir.join("tiny.gguf");
        synth::synth(&path, Preset::Tiny, synth::Mix::Q4_0, 1, &mut |_, _| {}).expect("synth tiny");
        TinyFile { dir, path }
    }
}

impl Drop for TinyFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

pub fn gpu() -> Gpu {
    Gpu::new(Default::default()).expect("a wgpu adapter (or mesa-vulkan-drivers)")
}
