//! Buffer helpers: uploads, uniforms and blocking readback.

use wgpu::util::DeviceExt;

use super::context::Gpu;
use crate::error::{Error, Result};

impl Gpu {
    /// A storage buffer holding `data` (weights are uploaded read-only and
    /// bound as `var<storage, read>`, so readers need no barriers).
    pub fn storage(&self, label: &str, data: &[u8]) -> wgpu::Buffer {
        self.count_object();
        self.device
            .create_buffer_init(&wgpu::util::BufferInitDescriptor {
                label: Some(label),
                contents: data,
                usage: wgpu::BufferUsages::STORAGE
                    | wgpu::BufferUsages::COPY_SRC
                    | wgpu::BufferUsages::COPY_DST,
            })
    }

    /// A uniform buffer of a `#[repr(C)]` params struct.
    pub fn uniform<T: bytemuck::Pod>(&self, label: &str, params: &T) -> wgpu::Buffer {
        self.count_object();
        self.device
            .create_buffer_init(&wgpu::util::BufferInitDescriptor {
                label: Some(label),
                contents: bytemuck::bytes_of(params),
                usage: wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
            })
    }

    /// A zero-filled read-write storage buffer of `size` bytes (at least 16).
    pub fn scratch(&self, label: &str, size: u64) -> wgpu::Buffer {
        self.count_object();
        self.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some(label),
            size: size.max(16).next_multiple_of(4),
            usage: wgpu::BufferUsages::STORAGE
                | wgpu::BufferUsages::COPY_SRC
                | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        })
    }

    /// Copy `len` bytes of `src` back to the CPU, waiting for the GPU.
    pub fn read(&self, src: &wgpu::Buffer, len: u64) -> Result<Vec<u8>> {
        let staging = self.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("readback"),
            size: len,
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        let mut enc = self.device.create_command_encoder(&Default::default());
        enc.copy_buffer_to_buffer(src, 0, &staging, 0, len);
        self.queue.submit([enc.finish()]);
        let mut out = vec![0u8; len as usize];
        self.map_read(&staging, &mut out)?;
        Ok(out)
    }

    /// Map a MAP_READ buffer (after the copies into it were submitted), copy
    /// its first `out.len()` bytes out, and unmap it for reuse.
    pub fn map_read(&self, staging: &wgpu::Buffer, out: &mut [u8]) -> Result<()> {
        let (tx, rx) = std::sync::mpsc::channel();
        staging.map_async(wgpu::MapMode::Read, .., move |r| {
            let _ = tx.send(r);
        });
        self.wait()?;
        rx.recv()
            .map_err(|_| Error::Gpu("readback callback never ran".into()))?
            .map_err(|e| Error::Gpu(format!("mapping a readback buffer: {e}")))?;
        {
            let view = staging
                .get_mapped_range(..)
                .map_err(|e| Error::Gpu(format!("readback view: {e}")))?;
            out.copy_from_slice(&view[..out.len()]);
        }
        staging.unmap();
        Ok(())
    }

    /// `read` for f32 data.
    pub fn read_f32(&self, src: &wgpu::Buffer, n: usize) -> Result<Vec<f32>> {
        Ok(bytemuck::pod_collect_to_vec(&self.read(src, 4 * n as u64)?))
    }
}
