//! Everything that talks to wgpu: the device context and capabilities, the
//! kernel set and its single variant selector, weight upload, the decode
//! plan, and buffer helpers.

pub mod barriers;
mod buffers;
pub mod context;
pub mod kernels;
pub mod ops;
pub mod repack;

pub use context::{list_adapters, BackendChoice, Caps, Gpu, GpuOptions, Variant};
pub use kernels::{Format, Kernel, Pipelines};
pub mod plan;
pub mod profile;
pub mod resident;
pub mod rope;
pub mod weights;
