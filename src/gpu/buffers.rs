//! Buffer helpers: uploads, uniforms and blocking readback.

use super::context::Gpu;
use crate::error::{Error, Result};

/// `size` rounded up to what a storage buffer holds (a multiple of 4, at
/// least 16), checked against overflow.
fn padded(label: &str, size: u64) -> Result<u64> {
    size.max(16)
        .checked_next_multiple_of(4)
        .ok_or_else(|| Error::InvalidArgument(format!("buffer {label} of {size} bytes overflows")))
}

/// Data from this size on is written to the GPU from several threads.
const PARALLEL_WRITE: usize = 32 << 20;

const STORAGE: wgpu::BufferUsages = wgpu::BufferUsages::STORAGE
    .union(wgpu::BufferUsages::COPY_SRC)
    .union(wgpu::BufferUsages::COPY_DST);

impl Gpu {
    /// A buffer of `size` bytes, checked against the adapter's limits
    /// before it is made; a failed creation (out of memory) is an error,
    /// never a panic in wgpu's default handler.
    fn buffer(
        &self,
        label: &str,
        size: u64,
        usage: wgpu::BufferUsages,
        mapped_at_creation: bool,
    ) -> Result<wgpu::Buffer> {
        self.check_size(label, size)?;
        self.count_object();
        let buf = self.scoped(&format!("creating buffer {label}"), || {
            Ok(self.device.create_buffer(&wgpu::BufferDescriptor {
                label: Some(label),
                size,
                usage,
                mapped_at_creation,
            }))
        })?;
        self.count_bytes(size);
        Ok(buf)
    }

    /// A storage buffer holding `data` (weights are uploaded read-only and
    /// bound as `var<storage, read>`, so readers need no barriers).
    pub fn storage(&self, label: &str, data: &[u8]) -> Result<wgpu::Buffer> {
        if data.len() >= PARALLEL_WRITE && data.len() % 4 == 0 {
            return self.storage_parallel(label, data);
        }
        let buf = self.buffer(label, padded(label, data.len() as u64)?, STORAGE, true)?;
        // Unlike wgpu's `create_buffer_init`, a mapping that fails is
        // reported instead of panicking.
        let mut view = buf
            .get_mapped_range_mut(..)
            .map_err(|e| Error::Gpu(format!("buffer {label}: {e}")))?;
        view.slice(..data.len()).copy_from_slice(data);
        drop(view);
        buf.unmap();
        Ok(buf)
    }

    /// `storage` for large data: written by `queue.write_buffer` from all
    /// cores, a slice each (wgpu's mapped views cannot be written from
    /// several threads; one core copied a full-size model at ~2.5 GB/s).
    /// The staging copies reach the GPU at the next submit.
    fn storage_parallel(&self, label: &str, data: &[u8]) -> Result<wgpu::Buffer> {
        let buf = self.buffer(label, padded(label, data.len() as u64)?, STORAGE, false)?;
        let cores = std::thread::available_parallelism().map_or(1, |c| c.get());
        let per = data.len().div_ceil(cores).next_multiple_of(4);
        std::thread::scope(|s| {
            for (i, chunk) in data.chunks(per).enumerate() {
                let buf = &buf;
                s.spawn(move || self.queue.write_buffer(buf, (i * per) as u64, chunk));
            }
        });
        Ok(buf)
    }

    /// A uniform buffer of a `#[repr(C)]` params struct (a few bytes: it
    /// cannot exceed a limit, and a write never panics).
    pub fn uniform<T: bytemuck::Pod>(&self, label: &str, params: &T) -> wgpu::Buffer {
        self.count_object();
        let bytes = bytemuck::bytes_of(params);
        let size = (bytes.len() as u64).max(16).next_multiple_of(4);
        let buf = self.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some(label),
            size,
            usage: wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        self.count_bytes(size);
        self.queue.write_buffer(&buf, 0, bytes);
        buf
    }

    /// A zero-filled read-write storage buffer of `size` bytes (at least 16).
    pub fn scratch(&self, label: &str, size: u64) -> Result<wgpu::Buffer> {
        self.buffer(label, padded(label, size)?, STORAGE, false)
    }

    /// A zero-filled f32 scratch buffer of `dims` multiplied out, the
    /// product checked (sizes come from the file and the options).
    pub fn scratch_f32(&self, label: &str, dims: &[usize]) -> Result<wgpu::Buffer> {
        let size = dims
            .iter()
            .try_fold(4u64, |a, &d| a.checked_mul(d as u64))
            .ok_or_else(|| {
                Error::InvalidArgument(format!("buffer {label} of {dims:?} floats overflows"))
            })?;
        self.scratch(label, size)
    }

    /// A buffer the CPU maps to read results (`map_read`).
    pub fn readback(&self, label: &str, size: u64) -> Result<wgpu::Buffer> {
        let usage = wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST;
        self.buffer(label, size, usage, false)
    }

    /// Copy `len` bytes of `src` back to the CPU, waiting for the GPU.
    pub fn read(&self, src: &wgpu::Buffer, len: u64) -> Result<Vec<u8>> {
        let staging = self.readback("readback", len)?;
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
        self.map_read_after(staging, out, None)
    }

    /// `map_read`, waiting only for submission `after` (the last one that
    /// writes `staging`), not for work submitted behind it.
    pub fn map_read_after(
        &self,
        staging: &wgpu::Buffer,
        out: &mut [u8],
        after: Option<wgpu::SubmissionIndex>,
    ) -> Result<()> {
        let (tx, rx) = std::sync::mpsc::channel();
        staging.map_async(wgpu::MapMode::Read, .., move |r| {
            let _ = tx.send(r);
        });
        self.wait_for(after)?;
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
