//! The GPU context: one adapter, one device and queue, and the capabilities
//! every kernel choice is made from (`Caps`). Features are requested only
//! when the adapter has them; limits are the adapter's own, so large weight
//! bindings work wherever the hardware allows them.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use crate::error::{Error, Result};

/// Which wgpu backend to use.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum BackendChoice {
    /// The best adapter of Metal, Vulkan or DX12 (high-performance
    /// preference). GL is left out: glmw needs compute that GL adapters
    /// lack, and probing it prints EGL's complaints on headless machines.
    #[default]
    Auto,
    Metal,
    Vulkan,
    Dx12,
    Gl,
}

impl BackendChoice {
    fn backends(self) -> wgpu::Backends {
        match self {
            BackendChoice::Auto => wgpu::Backends::PRIMARY,
            BackendChoice::Metal => wgpu::Backends::METAL,
            BackendChoice::Vulkan => wgpu::Backends::VULKAN,
            BackendChoice::Dx12 => wgpu::Backends::DX12,
            BackendChoice::Gl => wgpu::Backends::GL,
        }
    }
}

/// Typed GPU options (the CLI's `--backend`, `--no-subgroups` and
/// `--no-coopmat`).
#[derive(Clone, Copy, Debug, Default)]
pub struct GpuOptions {
    pub backend: BackendChoice,
    /// Use the shared-memory reduction kernels even where subgroups exist.
    pub no_subgroups: bool,
    /// Open the device without cooperative matrices even where the adapter
    /// offers them: the prefill then runs on the f32 matmul (llama.cpp's
    /// GGML_VK_DISABLE_COOPMAT), to compare the two or to avoid a driver's
    /// experimental path.
    pub no_coopmat: bool,
}

/// Which reduction prelude the kernels are built with.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Variant {
    Subgroup,
    Shared,
}

impl Variant {
    pub fn name(self) -> &'static str {
        match self {
            Variant::Subgroup => "subgroup",
            Variant::Shared => "shared-memory",
        }
    }
}

/// What the device can do, negotiated once.
#[derive(Clone, Debug)]
pub struct Caps {
    pub variant: Variant,
    /// The adapter supports subgroups (even if `--no-subgroups` turned them off).
    pub has_subgroups: bool,
    pub shader_f16: bool,
    pub timestamps: bool,
    pub timestamps_in_passes: bool,
    pub max_storage_binding: u64,
    pub max_buffer: u64,
    /// The device was opened with cooperative matrices, and the adapter
    /// offers 16x16x16 f16 x f16 -> f32 ones in subgroup scope (with
    /// subgroups and f16): the prefill's matmuls run on them
    /// (matmul_coop.wgsl). A hardware capability, not a switch.
    pub coop: bool,
    /// The device bounds every storage-buffer access in hardware: a Vulkan
    /// adapter with robustBufferAccess, which wgpu enables wherever it is
    /// offered (an out-of-range access reads within the buffer or zero and
    /// never writes outside it). naga's own clamps are then left out of
    /// the kernels (`kernels::runtime_checks`).
    pub hw_bounds: bool,
}

pub struct Gpu {
    pub device: wgpu::Device,
    pub queue: wgpu::Queue,
    pub info: wgpu::AdapterInfo,
    pub caps: Caps,
    /// The adapter's cooperative-matrix (tensor core / simdgroup matrix)
    /// configurations as "MxNxK A/B->C" (`glmw devices`); the device is
    /// opened with the feature only where `Caps::coop` holds.
    pub coop_matrix: Vec<String>,
    /// Buffers, bind groups and pipelines created so far (the decode test
    /// checks that a token creates none).
    objects: AtomicU64,
    /// Bytes of every buffer created through glmw on this device (never
    /// decreased: glmw frees buffers only with the engine that owns them).
    bytes: AtomicU64,
    /// The first device error no error scope caught (wgpu's default
    /// handler would panic); `wait` reports it.
    uncaptured: Arc<Mutex<Option<String>>>,
}

const INSTALL_HINT: &str = "install a Vulkan driver for your GPU, or Mesa's lavapipe CPU driver \
(Debian/Ubuntu: apt-get install mesa-vulkan-drivers), or pick another --backend";

fn instance(backend: BackendChoice) -> wgpu::Instance {
    let mut desc = wgpu::InstanceDescriptor::new_without_display_handle();
    desc.backends = backend.backends();
    wgpu::Instance::new(desc)
}

/// Every adapter wgpu sees for `backend` (for `glmw devices`).
pub fn list_adapters(backend: BackendChoice) -> Vec<wgpu::AdapterInfo> {
    let inst = instance(backend);
    pollster::block_on(inst.enumerate_adapters(backend.backends()))
        .iter()
        .map(|a| a.get_info())
        .collect()
}

/// Whether `adapter` offers what matmul_coop.wgsl needs: 16x16x16
/// subgroup matrices of f16 inputs with f32 accumulation, subgroups (its
/// blocks are per subgroup), f16 and the 47 KiB of workgroup memory
/// attention_coop.wgsl takes.
fn coop_16x16_f16(adapter: &wgpu::Adapter) -> bool {
    let need = wgpu::Features::EXPERIMENTAL_COOPERATIVE_MATRIX
        | wgpu::Features::SUBGROUP
        | wgpu::Features::SUBGROUP_BARRIER
        | wgpu::Features::SHADER_F16;
    // attention_coop.wgsl's workgroup arrays take 48272 bytes (queries,
    // then cache rows 37376; scores 8192; probabilities 2560; row factors
    // and the flag 144); matmul_coop.wgsl's 35840
    adapter.features().contains(need)
        && adapter.limits().max_compute_workgroup_storage_size >= 48272
        && adapter.cooperative_matrix_properties().iter().any(|p| {
            (p.m_size, p.n_size, p.k_size) == (16, 16, 16)
                && p.ab_type == wgpu::CooperativeScalarType::F16
                && p.cr_type == wgpu::CooperativeScalarType::F32
        })
}

/// Whether the device wgpu opens on `adapter` bounds storage-buffer
/// accesses in hardware: Vulkan's robustBufferAccess, which wgpu enables
/// whenever the adapter offers it. Metal, DX12 and GL keep naga's clamps.
#[cfg(any(
    windows,
    target_os = "linux",
    target_os = "android",
    target_os = "freebsd"
))]
fn hw_bounds(adapter: &wgpu::Adapter) -> bool {
    // SAFETY: only reads the features the adapter reported; the handle is
    // dropped before the device is used.
    let hal = unsafe { adapter.as_hal::<wgpu::hal::api::Vulkan>() };
    hal.is_some_and(|a| {
        a.get_physical_device_features()
            .get_core()
            .robust_buffer_access
            != 0
    })
}

#[cfg(not(any(
    windows,
    target_os = "linux",
    target_os = "android",
    target_os = "freebsd"
)))]
fn hw_bounds(_adapter: &wgpu::Adapter) -> bool {
    false
}

/// The adapter's cooperative-matrix configurations as "MxNxK A/B->C".
fn coop_configs(adapter: &wgpu::Adapter) -> Vec<String> {
    if !adapter
        .features()
        .contains(wgpu::Features::EXPERIMENTAL_COOPERATIVE_MATRIX)
    {
        return Vec::new();
    }
    adapter
        .cooperative_matrix_properties()
        .iter()
        .map(|p| {
            format!(
                "{}x{}x{} {:?}->{:?}",
                p.m_size, p.n_size, p.k_size, p.ab_type, p.cr_type
            )
        })
        .collect()
}

/// The high-performance adapter of `backend`.
fn find_adapter(backend: BackendChoice) -> Result<wgpu::Adapter> {
    let inst = instance(backend);
    pollster::block_on(inst.request_adapter(&wgpu::RequestAdapterOptions {
        power_preference: wgpu::PowerPreference::HighPerformance,
        force_fallback_adapter: false,
        compatible_surface: None,
        apply_limit_buckets: false,
    }))
    .map_err(|e| {
        Error::Gpu(format!(
            "no GPU adapter for backend {backend:?} ({e}); {INSTALL_HINT}"
        ))
    })
}

/// The features glmw asks of `adapter`, and whether the prefill runs on
/// cooperative matrices.
fn choose_features(adapter: &wgpu::Adapter, opts: &GpuOptions) -> (wgpu::Features, bool) {
    let want = wgpu::Features::SUBGROUP
        | wgpu::Features::SHADER_F16
        | wgpu::Features::TIMESTAMP_QUERY
        | wgpu::Features::TIMESTAMP_QUERY_INSIDE_PASSES
        | wgpu::Features::TIMESTAMP_QUERY_INSIDE_ENCODERS;
    let coop = coop_16x16_f16(adapter) && !opts.no_coopmat;
    let mut features = adapter.features() & want;
    if coop {
        // attention_coop.wgsl's subgroups hand their staged columns
        // over with subgroupBarrier.
        features |=
            wgpu::Features::EXPERIMENTAL_COOPERATIVE_MATRIX | wgpu::Features::SUBGROUP_BARRIER;
    }
    (features, coop)
}

/// The workgroup size and memory every kernel needs.
fn check_limits(info: &wgpu::AdapterInfo, limits: &wgpu::Limits) -> Result<()> {
    if limits.max_compute_invocations_per_workgroup < 256
        || limits.max_compute_workgroup_storage_size < 16384
    {
        return Err(Error::Gpu(format!(
            "adapter {} allows {} invocations and {} bytes of shared memory per workgroup; glmw needs 256 and 16384",
            info.name, limits.max_compute_invocations_per_workgroup, limits.max_compute_workgroup_storage_size
        )));
    }
    Ok(())
}

/// Open the device with `features` and all of the adapter's limits.
fn open_device(
    adapter: &wgpu::Adapter,
    info: &wgpu::AdapterInfo,
    features: wgpu::Features,
    coop: bool,
) -> Result<(wgpu::Device, wgpu::Queue)> {
    pollster::block_on(adapter.request_device(&wgpu::DeviceDescriptor {
        label: Some("glmw"),
        required_features: features,
        required_limits: adapter.limits(),
        // SAFETY: wgpu marks cooperative matrices experimental; they are
        // requested only where the adapter reports the configuration
        // matmul_coop.wgsl uses, and tests/gpu_matmul.rs checks it
        // against the f64 oracle on such adapters.
        experimental_features: match coop {
            true => unsafe { wgpu::ExperimentalFeatures::enabled() },
            false => wgpu::ExperimentalFeatures::disabled(),
        },
        ..Default::default()
    }))
    .map_err(|e| Error::Gpu(format!("could not open device {}: {e}", info.name)))
}

/// Keep the device's first uncaptured error (and log every one) for
/// `Gpu` to turn into an `Error`.
fn capture_errors(device: &wgpu::Device) -> Arc<Mutex<Option<String>>> {
    let uncaptured = Arc::new(Mutex::new(None));
    let slot = uncaptured.clone();
    device.on_uncaptured_error(Arc::new(move |e: wgpu::Error| {
        log::error!("gpu: {e}");
        if let Ok(mut s) = slot.lock() {
            s.get_or_insert_with(|| e.to_string());
        }
    }));
    uncaptured
}

impl Gpu {
    pub fn new(opts: GpuOptions) -> Result<Gpu> {
        let adapter = find_adapter(opts.backend)?;
        let info = adapter.get_info();
        let (features, coop) = choose_features(&adapter, &opts);
        let limits = adapter.limits();
        check_limits(&info, &limits)?;
        let (device, queue) = open_device(&adapter, &info, features, coop)?;
        let uncaptured = capture_errors(&device);
        let has_subgroups = features.contains(wgpu::Features::SUBGROUP);
        let caps = Caps {
            variant: if has_subgroups && !opts.no_subgroups {
                Variant::Subgroup
            } else {
                Variant::Shared
            },
            has_subgroups,
            shader_f16: features.contains(wgpu::Features::SHADER_F16),
            timestamps: features.contains(wgpu::Features::TIMESTAMP_QUERY),
            timestamps_in_passes: features.contains(wgpu::Features::TIMESTAMP_QUERY_INSIDE_PASSES),
            max_storage_binding: limits.max_storage_buffer_binding_size,
            max_buffer: limits.max_buffer_size,
            coop,
            hw_bounds: hw_bounds(&adapter),
        };
        let coop_matrix = coop_configs(&adapter);
        log::info!(
            "gpu: {} ({:?}, {}, {}), kernels: {}, subgroup size {}..{}, max binding {} MiB, \
             cooperative matrices: {}, hardware buffer bounds: {}",
            info.name,
            info.backend,
            info.driver,
            info.driver_info,
            caps.variant.name(),
            info.subgroup_min_size,
            info.subgroup_max_size,
            caps.max_storage_binding >> 20,
            caps.coop,
            caps.hw_bounds
        );
        Ok(Gpu {
            device,
            queue,
            info,
            caps,
            coop_matrix,
            objects: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
            uncaptured,
        })
    }

    pub(crate) fn count_object(&self) {
        self.objects.fetch_add(1, Ordering::Relaxed);
    }

    /// GPU objects (buffers, bind groups, pipelines) created through glmw.
    pub fn objects_created(&self) -> u64 {
        self.objects.load(Ordering::Relaxed)
    }

    pub(crate) fn count_bytes(&self, n: u64) {
        self.bytes.fetch_add(n, Ordering::Relaxed);
    }

    /// Bytes of GPU memory glmw has allocated on this device: weights, KV
    /// caches, every session's scratch and readback buffers.
    pub fn bytes_allocated(&self) -> u64 {
        self.bytes.load(Ordering::Relaxed)
    }

    /// Block until the GPU has finished all submitted work; an error the
    /// device reported outside any scope since the last wait is returned
    /// here.
    pub fn wait(&self) -> Result<()> {
        self.wait_for(None)
    }

    /// Block until the GPU has finished all submitted work, leaving any
    /// error the device reported for the next `wait` (a dropped engine's
    /// last act; its error, if any, is the next user's to see).
    pub fn idle(&self) {
        if let Err(e) = self.block_on(None) {
            log::warn!("waiting for the GPU to go idle: {e}");
        }
    }

    /// Block until submission `index` (`None`: the latest) is done.
    fn block_on(
        &self,
        index: Option<wgpu::SubmissionIndex>,
    ) -> std::result::Result<(), wgpu::PollError> {
        let poll = wgpu::PollType::Wait {
            submission_index: index,
            timeout: None,
        };
        self.device.poll(poll).map(|_| ())
    }

    /// `wait` for submission `index` only (`None`: the latest).
    pub fn wait_for(&self, index: Option<wgpu::SubmissionIndex>) -> Result<()> {
        self.block_on(index)
            .map_err(|e| Error::Gpu(format!("waiting for the GPU: {e}")))?;
        let taken = self.uncaptured.lock().ok().and_then(|mut s| s.take());
        match taken {
            Some(e) => Err(Error::Gpu(e)),
            None => Ok(()),
        }
    }

    /// Run `f` with the device's out-of-memory and validation errors
    /// captured: one of them becomes an `Error::Gpu` naming `what`, rather
    /// than a panic in wgpu's default handler.
    pub fn scoped<T>(&self, what: &str, f: impl FnOnce() -> Result<T>) -> Result<T> {
        let oom = self.device.push_error_scope(wgpu::ErrorFilter::OutOfMemory);
        let invalid = self.device.push_error_scope(wgpu::ErrorFilter::Validation);
        let out = f();
        let errors = [
            pollster::block_on(invalid.pop()),
            pollster::block_on(oom.pop()),
        ];
        match (out, errors) {
            (Err(e), _) => Err(e),
            (Ok(_), [Some(e), _] | [None, Some(e)]) => Err(Error::Gpu(format!("{what}: {e}"))),
            (Ok(v), _) => Ok(v),
        }
    }

    /// Check that a buffer of `size` bytes for `label` can be created and
    /// bound whole on this adapter.
    pub fn check_size(&self, label: &str, size: u64) -> Result<()> {
        let limit = self.caps.max_storage_binding.min(self.caps.max_buffer);
        if size > limit {
            return Err(Error::Gpu(format!(
                "buffer {label} needs {} MiB; this adapter allows {} MiB per buffer \
                 (a shorter context or prefill chunk, or a smaller model, may fit)",
                size >> 20,
                limit >> 20
            )));
        }
        Ok(())
    }

    /// The same device with the other kernel variant (tests run both on one adapter).
    pub fn with_variant(&self, variant: Variant) -> Result<Caps> {
        if variant == Variant::Subgroup && !self.caps.has_subgroups {
            return Err(Error::Gpu(format!(
                "adapter {} has no subgroup support",
                self.info.name
            )));
        }
        Ok(Caps {
            variant,
            ..self.caps.clone()
        })
    }
}
