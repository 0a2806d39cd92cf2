//! The closed set of WGSL kernels, and the one place a kernel variant is
//! chosen: each kernel is compiled with the reduction prelude `Caps` selects
//! (subgroup or shared memory). Sources are the files in `shaders/` listed
//! by `manifest.rs`, concatenated with the prelude last, exactly as build.rs
//! validates them. Pipelines are keyed by (kernel, override values) and
//! built while a plan is built, never while a token runs.

use std::collections::HashMap;
use std::sync::Mutex;

use super::context::{Caps, Gpu, Variant};
use super::manifest::{KernelDef, KERNELS};
use crate::error::{Error, Result};

/// Weight formats the matvec kernels read.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Format {
    F32,
    Q4_0,
    Q8_0,
    Q5K,
    Q6K,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kernel {
    RmsNorm,
    Matvec(Format),
    Matmul(Format),
    /// Token embedding gather (shaders/embed.wgsl).
    Embed(Format),
    MoeGroup,
    MoeSum,
    KvAppend,
    Attention,
    /// Short-context decode attention (shaders/attention_head.wgsl).
    AttentionHead,
    Router,
    TopK,
    ReadBandwidth,
}

/// How a binding is declared in the shader (and so the state wgpu tracks
/// for the bound buffer: `gpu::barriers`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bind {
    Uniform,
    Read,
    Write,
}

impl Kernel {
    /// The manifest name; also the pipeline label.
    pub fn name(self) -> &'static str {
        match self {
            Kernel::RmsNorm => "rms_norm",
            Kernel::Matvec(Format::F32) => "matvec_f32",
            Kernel::Matvec(Format::Q4_0) => "matvec_q4_0",
            Kernel::Matvec(Format::Q8_0) => "matvec_q8_0",
            Kernel::Matvec(Format::Q5K) => "matvec_q5_k",
            Kernel::Matvec(Format::Q6K) => "matvec_q6_k",
            Kernel::Matmul(Format::F32) => "matmul_f32",
            Kernel::Matmul(Format::Q4_0) => "matmul_q4_0",
            Kernel::Matmul(Format::Q8_0) => "matmul_q8_0",
            Kernel::Matmul(Format::Q5K) => "matmul_q5_k",
            Kernel::Matmul(Format::Q6K) => "matmul_q6_k",
            Kernel::Embed(Format::F32) => "embed_f32",
            Kernel::Embed(Format::Q4_0) => "embed_q4_0",
            Kernel::Embed(Format::Q8_0) => "embed_q8_0",
            Kernel::Embed(Format::Q5K) => "embed_q5_k",
            Kernel::Embed(Format::Q6K) => "embed_q6_k",
            Kernel::MoeGroup => "moe_group",
            Kernel::MoeSum => "moe_sum",
            Kernel::KvAppend => "kv_append",
            Kernel::Attention => "attention",
            Kernel::AttentionHead => "attention_head",
            Kernel::Router => "router",
            Kernel::TopK => "topk",
            Kernel::ReadBandwidth => "read_bandwidth",
        }
    }

    fn def(self) -> &'static KernelDef {
        let name = self.name();
        KERNELS
            .iter()
            .find(|k| k.name == name)
            .expect("every Kernel is in the manifest")
    }

    /// Each binding's declaration, in binding order.
    pub fn bindings(self) -> &'static [Bind] {
        use Bind::{Read as R, Uniform as U, Write as W};
        match self {
            Kernel::RmsNorm => &[U, R, R, W],
            Kernel::Matvec(Format::Q4_0 | Format::Q8_0) => &[U, R, R, W, R, R, R, R],
            Kernel::Matvec(Format::F32 | Format::Q5K | Format::Q6K) => &[U, R, R, W, R, R, R],
            // binding 5 is unused: the format files bind 6 and 7
            Kernel::Matmul(Format::Q4_0 | Format::Q8_0) => &[U, R, W, R, R, R, R, R],
            Kernel::Matmul(Format::F32 | Format::Q5K | Format::Q6K) => &[U, R, W, R, R, R, R],
            Kernel::Embed(Format::Q4_0 | Format::Q8_0) => &[U, R, W, R, R, R, R, R],
            Kernel::Embed(Format::F32 | Format::Q5K | Format::Q6K) => &[U, R, W, R, R, R, R],
            Kernel::MoeGroup => &[U, R, W, W],
            Kernel::MoeSum => &[U, R, R, W],
            Kernel::KvAppend => &[U, R, R, R, W],
            Kernel::Attention | Kernel::AttentionHead => &[U, R, R, R, R, W, W],
            Kernel::Router => &[U, R, R, R, R, W, W, W],
            Kernel::TopK => &[U, R, R, W, W],
            Kernel::ReadBandwidth => &[U, R, W],
        }
    }
}

fn file(name: &str) -> &'static str {
    match name {
        "rms_norm.wgsl" => include_str!("../../shaders/rms_norm.wgsl"),
        "matvec.wgsl" => include_str!("../../shaders/matvec.wgsl"),
        "matmul.wgsl" => include_str!("../../shaders/matmul.wgsl"),
        "embed.wgsl" => include_str!("../../shaders/embed.wgsl"),
        "moe_group.wgsl" => include_str!("../../shaders/moe_group.wgsl"),
        "moe_sum.wgsl" => include_str!("../../shaders/moe_sum.wgsl"),
        "f32.wgsl" => include_str!("../../shaders/f32.wgsl"),
        "q4_0.wgsl" => include_str!("../../shaders/q4_0.wgsl"),
        "q8_0.wgsl" => include_str!("../../shaders/q8_0.wgsl"),
        "q5_k.wgsl" => include_str!("../../shaders/q5_k.wgsl"),
        "q6_k.wgsl" => include_str!("../../shaders/q6_k.wgsl"),
        "kv_append.wgsl" => include_str!("../../shaders/kv_append.wgsl"),
        "attention.wgsl" => include_str!("../../shaders/attention.wgsl"),
        "attention_head.wgsl" => include_str!("../../shaders/attention_head.wgsl"),
        "step.wgsl" => include_str!("../../shaders/step.wgsl"),
        "router.wgsl" => include_str!("../../shaders/router.wgsl"),
        "topk.wgsl" => include_str!("../../shaders/topk.wgsl"),
        "read_bandwidth.wgsl" => include_str!("../../shaders/read_bandwidth.wgsl"),
        other => unreachable!("manifest names unknown shader {other}"),
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
    let mut s = String::new();
    for part in kernel.def().parts {
        s.push_str(file(part));
        s.push('\n');
    }
    s.push_str(prelude(variant));
    s
}

/// The checks naga adds to every kernel. Buffer bounds checks stay (an
/// out-of-range index reads zero or a clamped element, never another
/// buffer, on backends without robust access). Two go, because every
/// loop and index in our kernels is bounded by host-validated params:
/// `force_loop_bounding` (a second counter and exit test in every loop,
/// against shaders that spin forever) and `int_div_checks` (a select
/// around each `/` and `%`; every divisor is a validated non-zero size).
/// Together they cost decode 9% at depth 0 and 13% at 4096 on an H100
/// (docs/perf-journal.md, 2026-11-23 session 5).
const RUNTIME_CHECKS: wgpu::ShaderRuntimeChecks = wgpu::ShaderRuntimeChecks {
    bounds_checks: true,
    force_loop_bounding: false,
    int_div_checks: false,
    ..wgpu::ShaderRuntimeChecks::checked()
};

/// Override values for one pipeline, e.g. `[("MODE", 1.0), ("TPR", 8.0)]`.
pub type Consts<'a> = &'a [(&'static str, f64)];

type Key = (Kernel, Vec<(&'static str, u64)>);

/// Pipelines and bind-group layouts of one kernel variant on one device.
pub struct Pipelines {
    pub variant: Variant,
    layouts: HashMap<Kernel, wgpu::BindGroupLayout>,
    built: Mutex<HashMap<Key, wgpu::ComputePipeline>>,
}

impl Pipelines {
    pub fn new(gpu: &Gpu, caps: &Caps) -> Result<Pipelines> {
        let mut layouts = HashMap::new();
        let kernels = [
            Kernel::RmsNorm,
            Kernel::Matvec(Format::F32),
            Kernel::Matvec(Format::Q4_0),
            Kernel::Matvec(Format::Q8_0),
            Kernel::Matvec(Format::Q5K),
            Kernel::Matvec(Format::Q6K),
            Kernel::Matmul(Format::F32),
            Kernel::Matmul(Format::Q4_0),
            Kernel::Matmul(Format::Q8_0),
            Kernel::Matmul(Format::Q5K),
            Kernel::Matmul(Format::Q6K),
            Kernel::Embed(Format::F32),
            Kernel::Embed(Format::Q4_0),
            Kernel::Embed(Format::Q8_0),
            Kernel::Embed(Format::Q5K),
            Kernel::Embed(Format::Q6K),
            Kernel::MoeGroup,
            Kernel::MoeSum,
            Kernel::KvAppend,
            Kernel::Attention,
            Kernel::AttentionHead,
            Kernel::Router,
            Kernel::TopK,
            Kernel::ReadBandwidth,
        ];
        for k in kernels {
            let entries: Vec<wgpu::BindGroupLayoutEntry> = k
                .bindings()
                .iter()
                .enumerate()
                .map(|(i, b)| wgpu::BindGroupLayoutEntry {
                    binding: i as u32,
                    visibility: wgpu::ShaderStages::COMPUTE,
                    ty: wgpu::BindingType::Buffer {
                        ty: match b {
                            Bind::Uniform => wgpu::BufferBindingType::Uniform,
                            Bind::Read => wgpu::BufferBindingType::Storage { read_only: true },
                            Bind::Write => wgpu::BufferBindingType::Storage { read_only: false },
                        },
                        has_dynamic_offset: false,
                        min_binding_size: None,
                    },
                    count: None,
                })
                .collect();
            let layout = gpu
                .device
                .create_bind_group_layout(&wgpu::BindGroupLayoutDescriptor {
                    label: Some(k.name()),
                    entries: &entries,
                });
            layouts.insert(k, layout);
        }
        Ok(Pipelines {
            variant: caps.variant,
            layouts,
            built: Mutex::new(HashMap::new()),
        })
    }

    pub fn layout(&self, k: Kernel) -> &wgpu::BindGroupLayout {
        &self.layouts[&k]
    }

    /// The pipeline of `k` with override values `consts`, built on first use.
    pub fn get(&self, gpu: &Gpu, k: Kernel, consts: Consts<'_>) -> Result<wgpu::ComputePipeline> {
        let key: Key = (k, consts.iter().map(|(n, v)| (*n, v.to_bits())).collect());
        let mut built = self.built.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(p) = built.get(&key) {
            return Ok(p.clone());
        }
        for (name, v) in consts {
            let allowed = k.def().overrides.iter().find(|(n, _)| n == name);
            assert!(
                allowed.is_some_and(|(_, vals)| vals.contains(v)),
                "{}: override {name}={v} is not in the manifest, so build.rs never checked it",
                k.name()
            );
        }
        let label = format!("{}.{}", k.name(), self.variant.name());
        let scope = gpu.device.push_error_scope(wgpu::ErrorFilter::Validation);
        // SAFETY: the kernels are ours, compiled into the binary and
        // checked by build.rs, not text from a web page (`RUNTIME_CHECKS`).
        let module = unsafe {
            gpu.device.create_shader_module_trusted(
                wgpu::ShaderModuleDescriptor {
                    label: Some(&label),
                    source: wgpu::ShaderSource::Wgsl(source(k, self.variant).into()),
                },
                RUNTIME_CHECKS,
            )
        };
        let layout = gpu
            .device
            .create_pipeline_layout(&wgpu::PipelineLayoutDescriptor {
                label: Some(&label),
                bind_group_layouts: &[Some(self.layout(k))],
                immediate_size: 0,
            });
        let pipe = gpu
            .device
            .create_compute_pipeline(&wgpu::ComputePipelineDescriptor {
                label: Some(&label),
                layout: Some(&layout),
                module: &module,
                entry_point: Some("main"),
                compilation_options: wgpu::PipelineCompilationOptions {
                    constants: consts,
                    // Kernels write their shared memory before reading it.
                    zero_initialize_workgroup_memory: false,
                },
                cache: None,
            });
        if let Some(e) = pollster::block_on(scope.pop()) {
            return Err(Error::Gpu(format!(
                "kernel {label} {consts:?} failed to build on {}: {e}",
                gpu.info.name
            )));
        }
        gpu.count_object();
        built.insert(key, pipe.clone());
        Ok(pipe)
    }
}
