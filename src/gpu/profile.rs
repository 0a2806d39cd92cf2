//! GPU timing with timestamp queries written between dispatches of one
//! compute pass (TIMESTAMP_QUERY_INSIDE_PASSES). One fixed query set,
//! resolve buffer and readback buffer, made once.

use super::context::Gpu;
use super::ops::Dispatch;
use crate::error::{Error, Result};

/// Most segments one `time` call can measure (one query per boundary).
pub const MAX_SEGMENTS: usize = wgpu::QUERY_SET_MAX_QUERIES as usize - 1;

pub struct Timer {
    queries: wgpu::QuerySet,
    resolve: wgpu::Buffer,
    read: wgpu::Buffer,
    period_ns: f64,
}

impl Timer {
    pub fn max_segments() -> usize {
        MAX_SEGMENTS
    }

    /// `None` when the adapter cannot write timestamps inside passes.
    pub fn new(gpu: &Gpu) -> Option<Timer> {
        if !gpu.caps.timestamps_in_passes {
            return None;
        }
        let n = MAX_SEGMENTS as u32 + 1;
        let queries = gpu.device.create_query_set(&wgpu::QuerySetDescriptor {
            label: Some("timestamps"),
            ty: wgpu::QueryType::Timestamp,
            count: n,
        });
        let size = 8 * n as u64;
        let resolve = gpu.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("timestamps.resolve"),
            size,
            usage: wgpu::BufferUsages::QUERY_RESOLVE | wgpu::BufferUsages::COPY_SRC,
            mapped_at_creation: false,
        });
        let read = gpu.device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("timestamps.read"),
            size,
            usage: wgpu::BufferUsages::MAP_READ | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        Some(Timer {
            queries,
            resolve,
            read,
            period_ns: gpu.queue.get_timestamp_period() as f64,
        })
    }

    /// Run `segments` back to back in one pass; GPU nanoseconds of each.
    pub fn time(&self, gpu: &Gpu, segments: &[&[Dispatch]]) -> Result<Vec<f64>> {
        self.time_with(gpu, segments.len(), &mut |pass, i| {
            for d in segments[i] {
                d.record(pass);
            }
        })
    }

    /// GPU nanoseconds from the start of the first to the end of the last
    /// of `n` command buffers submitted together, buffer i recorded by
    /// `record(pass, i)` in a compute pass of its own. wgpu puts a buffer's
    /// state transitions at its first use in a command buffer between the
    /// command buffers, as between two tokens.
    pub fn time_buffers(
        &self,
        gpu: &Gpu,
        n: usize,
        record: &mut dyn FnMut(&mut wgpu::ComputePass<'_>, usize),
    ) -> Result<f64> {
        let mut bufs = Vec::with_capacity(n);
        for i in 0..n {
            let mut enc = gpu.device.create_command_encoder(&Default::default());
            {
                let mut pass = enc.begin_compute_pass(&Default::default());
                if i == 0 {
                    pass.write_timestamp(&self.queries, 0);
                }
                record(&mut pass, i);
                if i + 1 == n {
                    pass.write_timestamp(&self.queries, 1);
                }
            }
            if i + 1 == n {
                enc.resolve_query_set(&self.queries, 0..2, &self.resolve, 0);
                enc.copy_buffer_to_buffer(&self.resolve, 0, &self.read, 0, 16);
            }
            bufs.push(enc.finish());
        }
        gpu.queue.submit(bufs);
        let mut bytes = [0u8; 16];
        gpu.map_read(&self.read, &mut bytes)?;
        let ticks: &[u64] = bytemuck::cast_slice(&bytes);
        Ok(ticks[1].saturating_sub(ticks[0]) as f64 * self.period_ns)
    }

    /// Record `n` segments through `record(pass, i)` back to back in one
    /// pass; GPU nanoseconds of each.
    pub fn time_with(
        &self,
        gpu: &Gpu,
        n: usize,
        record: &mut dyn FnMut(&mut wgpu::ComputePass<'_>, usize),
    ) -> Result<Vec<f64>> {
        if n == 0 || n > MAX_SEGMENTS {
            return Err(Error::InvalidArgument(format!(
                "{n} segments to time; 1 to {MAX_SEGMENTS} fit one query set"
            )));
        }
        let n = n as u32 + 1;
        let mut enc = gpu.device.create_command_encoder(&Default::default());
        {
            let mut pass = enc.begin_compute_pass(&Default::default());
            pass.write_timestamp(&self.queries, 0);
            for i in 0..n - 1 {
                record(&mut pass, i as usize);
                pass.write_timestamp(&self.queries, i + 1);
            }
        }
        enc.resolve_query_set(&self.queries, 0..n, &self.resolve, 0);
        enc.copy_buffer_to_buffer(&self.resolve, 0, &self.read, 0, 8 * n as u64);
        gpu.queue.submit([enc.finish()]);
        let mut bytes = vec![0u8; 8 * n as usize];
        gpu.map_read(&self.read, &mut bytes)?;
        let ticks: &[u64] = bytemuck::cast_slice(&bytes);
        Ok(ticks
            .windows(2)
            .map(|w| w[1].saturating_sub(w[0]) as f64 * self.period_ns)
            .collect())
    }
}
