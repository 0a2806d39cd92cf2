//! The closed set of WGSL kernels, and the one place a kernel variant is
//! chosen: each kernel is compiled with the reduction prelude `Caps` selects
//! (subgroup or shared memory). Sources are the files in `shaders/`, the
//! kernel first and the prelude after it, exactly as build.rs validates them.

use std::collections::HashMap;

use super::context::{Caps, Gpu, Variant};
use crate::error::{Error, Result};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kernel {
    RmsNorm,
    MatvecQ4_0,
}

impl Kernel {
    pub const ALL: [Kernel; 2] = [Kernel::RmsNorm, Kernel::MatvecQ4_0];

    /// The shader file's stem; also the pipeline label.
    pub fn name(self) -> &'static str {
        match self {
            Kernel::RmsNorm => "rms_norm",
            Kernel::MatvecQ4_0 => "matvec_q4_0",
        }
    }

    fn wgsl(self) -> &'static str {
        match self {
            Kernel::RmsNorm => include_str!("../../shaders/rms_norm.wgsl"),
            Kernel::MatvecQ4_0 => include_str!("../../shaders/matvec_q4_0.wgsl"),
        }
    }
}

fn prelude(v: Variant) -> &'static str {
    match v {
        Variant::Subgroup => include_str!("../../shaders/prelude_subgroup.wgsl"),
        Variant::Shared => include_str!("../../shaders/prelude_shared.wgsl"),
    }
}

/// The WGSL text compiled for `kernel` in `variant`.
pub fn source(kernel: Kernel, variant: Variant) -> String {
    format!("{}\n{}", kernel.wgsl(), prelude(variant))
}

/// Every pipeline, built eagerly so the first token has no compile stall.
pub struct Pipelines {
    pub variant: Variant,
    pipes: HashMap<Kernel, wgpu::ComputePipeline>,
}

impl Pipelines {
    pub fn new(gpu: &Gpu, caps: &Caps) -> Result<Pipelines> {
        let mut pipes = HashMap::new();
        for k in Kernel::ALL {
            let label = format!("{}.{}", k.name(), caps.variant.name());
            let scope = gpu.device.push_error_scope(wgpu::ErrorFilter::Validation);
            let module = gpu
                .device
                .create_shader_module(wgpu::ShaderModuleDescriptor {
                    label: Some(&label),
                    source: wgpu::ShaderSource::Wgsl(source(k, caps.variant).into()),
                });
            let pipe = gpu
                .device
                .create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
                    label: Some(&label),
                    layout: None,
                    module: &module,
                    entry_point: Some("main"),
                    compilation_options: wgpu::PipelineCompilationOptions {
                        // Kernels write their shared memory before reading it.
                        zero_initialize_workgroup_memory: false,
                        ..Default::default()
                    },
                    cache: None,
                });
            if let Some(e) = pollster::block_on(scope.pop()) {
                return Err(Error::Gpu(format!(
                    "kernel {label} failed to build on {}: {e}",
                    gpu.info.name
                )));
            }
            pipes.insert(k, pipe);
        }
        Ok(Pipelines {
            variant: caps.variant,
            pipes,
        })
    }

    pub fn get(&self, k: Kernel) -> &wgpu::ComputePipeline {
        &self.pipes[&k]
    }
}
