//! The closed set of WGSL kernels, and the one place a kernel variant is
//! chosen: each kernel is compiled with the reduction prelude `Caps` selects
//! (subgroup or shared memory). Sources are the files in `shaders/` listed
//! by `manifest.rs`, concatenated with the prelude last, exactly as build.rs
//! validates them. Pipelines are keyed by (kernel, override values) and
//! built while a plan is built, never while a token runs.

use std::collections::HashMap;
use std::sync::Mutex;

use super::context::{Caps, Gpu, Variant};
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

/// How a binding is declared in the shader (and so the state wgpu tracks
/// for the bound buffer: `gpu::barriers`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bind {
    Uniform,
    Read,
    Write,
}

/// One binding of a kernel, as its WGSL declares it.
#[derive(Debug)]
pub struct BindingInfo {
    pub slot: u32,
    pub name: &'static str,
    pub bind: Bind,
    /// The part that declares it (0: the kernel's own file; else a weight
    /// format's, bound through `Bindings::weights`).
    pub part: usize,
}

/// A member of a WGSL struct the host writes.
#[derive(Debug)]
pub struct Member {
    pub name: &'static str,
    pub offset: u32,
    pub size: u32,
}

/// The WGSL layout of a struct the host writes (build.rs checks its Rust
/// mirror against it at compile time).
#[derive(Debug)]
pub struct Layout {
    pub wgsl: &'static str,
    pub size: u32,
    pub members: &'static [Member],
}

/// What build.rs read from one kernel's WGSL (the generated table).
#[derive(Debug)]
pub struct KernelInfo {
    /// The manifest name; also the pipeline label.
    pub name: &'static str,
    /// (file, text) of each WGSL part, in order.
    pub parts: &'static [(&'static str, &'static str)],
    /// In slot order.
    pub bindings: &'static [BindingInfo],
    /// Every value each host-set override may take (build.rs translated
    /// every combination).
    pub overrides: &'static [(&'static str, &'static [f64])],
    pub structs: &'static [Layout],
}

/// A kernel's buffers by the names its WGSL gives them: the generated
/// `XxxBindings` structs, one per kernel file.
pub trait Bindings {
    /// The kernel's own WGSL file (the kernels these bindings fit).
    fn source(&self) -> &'static str;
    /// That file's bindings as (slot, buffer).
    fn named(&self) -> Vec<(u32, &wgpu::Buffer)>;
    /// The weight format file's bindings, in slot order.
    fn weights(&self) -> &[wgpu::Buffer] {
        &[]
    }
}

/// A kernel's host-set override values: the generated `XxxOverrides`
/// structs, one per kernel file that has overrides.
pub trait Overrides {
    fn source(&self) -> &'static str;
    fn constants(&self) -> Vec<(&'static str, f64)>;
}

include!(concat!(env!("OUT_DIR"), "/kernel_table.rs"));

impl Kernel {
    /// The manifest name; also the pipeline label.
    pub fn name(self) -> &'static str {
        self.info().name
    }

    /// Each binding's declaration, in slot order.
    pub fn bindings(self) -> impl Iterator<Item = Bind> {
        self.info().bindings.iter().map(|b| b.bind)
    }

    /// The buffers of `b` with their declarations, in slot order, or why
    /// they do not fit this kernel.
    pub fn bind<'a>(self, b: &'a dyn Bindings) -> Result<Vec<(u32, &'a wgpu::Buffer, Bind)>> {
        let info = self.info();
        let own = info.parts[0].0;
        let internal = |why: String| Error::Gpu(format!("internal: {}: {why}", info.name));
        if b.source() != own {
            return Err(internal(format!("bindings of {} given", b.source())));
        }
        let format_slots = info.bindings.iter().filter(|x| x.part > 0).map(|x| x.slot);
        if format_slots.clone().count() != b.weights().len() {
            return Err(internal(format!(
                "{} weight arrays given, the format binds {}",
                b.weights().len(),
                format_slots.count()
            )));
        }
        let mut bufs = b.named();
        bufs.extend(format_slots.zip(b.weights()));
        bufs.sort_by_key(|x| x.0);
        Ok(bufs
            .into_iter()
            .zip(info.bindings)
            .map(|((slot, buf), decl)| (slot, buf, decl.bind))
            .collect())
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
    for (_, text) in kernel.info().parts {
        s.push_str(text);
        s.push('\n');
    }
    s.push_str(prelude(variant));
    s
}

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
        for k in Kernel::ALL {
            let entries: Vec<wgpu::BindGroupLayoutEntry> = k
                .info()
                .bindings
                .iter()
                .map(|b| wgpu::BindGroupLayoutEntry {
                    binding: b.slot,
                    visibility: wgpu::ShaderStages::COMPUTE,
                    ty: wgpu::BindingType::Buffer {
                        ty: match b.bind {
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

    /// The pipeline of `k` with the override values `o` (the WGSL
    /// defaults where `None`), built on first use.
    pub fn get(
        &self,
        gpu: &Gpu,
        k: Kernel,
        o: Option<&dyn Overrides>,
    ) -> Result<wgpu::ComputePipeline> {
        let consts = constants(k, o)?;
        let consts = consts.as_slice();
        let key: Key = (k, consts.iter().map(|(n, v)| (*n, v.to_bits())).collect());
        let mut built = self.built.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(p) = built.get(&key) {
            return Ok(p.clone());
        }
        let label = format!("{}.{}", k.name(), self.variant.name());
        let scope = gpu.device.push_error_scope(wgpu::ErrorFilter::Validation);
        let module = gpu
            .device
            .create_shader_module(wgpu::ShaderModuleDescriptor {
                label: Some(&label),
                source: wgpu::ShaderSource::Wgsl(source(k, self.variant).into()),
            });
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

/// The override values `o` gives `k`, each one build.rs translated.
fn constants(k: Kernel, o: Option<&dyn Overrides>) -> Result<Vec<(&'static str, f64)>> {
    let info = k.info();
    let internal = |why: String| Err(Error::Gpu(format!("internal: {}: {why}", info.name)));
    let consts = match o {
        None if info.overrides.is_empty() => return Ok(Vec::new()),
        None => return internal("its overrides must be given".into()),
        Some(o) if o.source() != info.parts[0].0 => {
            return internal(format!("overrides of {} given", o.source()))
        }
        Some(o) => o.constants(),
    };
    for (name, v) in &consts {
        let allowed = info.overrides.iter().find(|(n, _)| n == name);
        if !allowed.is_some_and(|(_, vals)| vals.contains(v)) {
            return internal(format!(
                "override {name}={v} is not in build/manifest.rs, so build.rs never checked it"
            ));
        }
    }
    Ok(consts)
}
