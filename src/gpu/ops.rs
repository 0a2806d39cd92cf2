//! Host side of each kernel: its `#[repr(C)]` params struct (mirrored field
//! for field by the WGSL `struct Params`) and a constructor for its
//! `Dispatch` — pipeline, bind group and workgroup count, built once and
//! replayed into a compute pass as often as needed.

use super::context::Gpu;
use super::kernels::{Kernel, Pipelines};
use crate::error::{Error, Result};

/// One pre-built dispatch: the unit a decode plan is made of.
pub struct Dispatch {
    pub kernel: Kernel,
    pub bind_group: wgpu::BindGroup,
    pub workgroups: [u32; 3],
}

impl Dispatch {
    pub fn record(&self, pass: &mut wgpu::ComputePass<'_>, pipes: &Pipelines) {
        pass.set_pipeline(pipes.get(self.kernel));
        pass.set_bind_group(0, &self.bind_group, &[]);
        pass.dispatch_workgroups(self.workgroups[0], self.workgroups[1], self.workgroups[2]);
    }
}

/// Record `dispatches` into one compute pass, submit, and wait.
pub fn run(gpu: &Gpu, pipes: &Pipelines, dispatches: &[Dispatch]) -> Result<()> {
    let mut enc = gpu.device.create_command_encoder(&Default::default());
    {
        let mut pass = enc.begin_compute_pass(&Default::default());
        for d in dispatches {
            d.record(&mut pass, pipes);
        }
    }
    gpu.queue.submit([enc.finish()]);
    gpu.device
        .poll(wgpu::PollType::wait_indefinitely())
        .map_err(|e| Error::Gpu(format!("waiting for the GPU: {e}")))?;
    Ok(())
}

fn bind(gpu: &Gpu, pipes: &Pipelines, k: Kernel, buffers: &[&wgpu::Buffer]) -> wgpu::BindGroup {
    let entries: Vec<wgpu::BindGroupEntry> = buffers
        .iter()
        .enumerate()
        .map(|(i, b)| wgpu::BindGroupEntry {
            binding: i as u32,
            resource: b.as_entire_binding(),
        })
        .collect();
    gpu.device.create_bind_group(&wgpu::BindGroupDescriptor {
        label: Some(k.name()),
        layout: &pipes.get(k).get_bind_group_layout(0),
        entries: &entries,
    })
}

/// Workgroup counts for `n` independent items, folded into two dimensions
/// because each is capped at 65535; kernels rebuild the index from both.
fn grid(n: u32) -> [u32; 3] {
    if n <= 65535 {
        [n, 1, 1]
    } else {
        [65535, n.div_ceil(65535), 1]
    }
}

// ---- rms_norm ----------------------------------------------------------

#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
pub struct RmsNormParams {
    pub n: u32,
    pub eps: f32,
    pub n_rows: u32,
    pub _pad: u32,
}
const _: () = assert!(std::mem::size_of::<RmsNormParams>() % 16 == 0);

/// y[r] = RMSNorm(x[r]) · g for `n_rows` rows of `n`.
pub fn rms_norm(
    gpu: &Gpu,
    pipes: &Pipelines,
    params: &wgpu::Buffer,
    x: &wgpu::Buffer,
    g: &wgpu::Buffer,
    y: &wgpu::Buffer,
    n_rows: u32,
) -> Dispatch {
    Dispatch {
        kernel: Kernel::RmsNorm,
        bind_group: bind(gpu, pipes, Kernel::RmsNorm, &[params, x, g, y]),
        workgroups: grid(n_rows),
    }
}

// ---- matvec_q4_0 -------------------------------------------------------

#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
pub struct MatvecParams {
    pub rows: u32,
    /// Quant blocks per row.
    pub blocks: u32,
    pub _pad: [u32; 2],
}
const _: () = assert!(std::mem::size_of::<MatvecParams>() % 16 == 0);

/// Rows per workgroup of the matvec kernels (WG / TPR in the shader).
const MATVEC_ROWS_PER_WG: u32 = 8;

/// y = W·x for a repacked Q4_0 matrix of `rows` rows (`gpu::repack`).
pub fn matvec_q4_0(
    gpu: &Gpu,
    pipes: &Pipelines,
    params: &wgpu::Buffer,
    scales: &wgpu::Buffer,
    nibbles: &wgpu::Buffer,
    x: &wgpu::Buffer,
    y: &wgpu::Buffer,
    rows: u32,
) -> Dispatch {
    Dispatch {
        kernel: Kernel::MatvecQ4_0,
        bind_group: bind(
            gpu,
            pipes,
            Kernel::MatvecQ4_0,
            &[params, scales, nibbles, x, y],
        ),
        workgroups: grid(rows.div_ceil(MATVEC_ROWS_PER_WG)),
    }
}
