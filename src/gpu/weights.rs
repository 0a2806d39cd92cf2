//! Weights on the GPU: every matrix the decode plan reads, uploaded from the
//! mapped GGUF in the layout its kernel reads (`repack.rs`), as read-only
//! storage. A matrix larger than the adapter's binding limit is split by
//! rows into parts, each its own buffer and its own dispatch; a 3-D tensor
//! (experts, attention heads) splits the same rows of every slice together.
//! Routed experts' gate and up (and the dense/shared FFN's) are stored
//! merged, gate rows then up rows per matrix, so one dispatch reads both.

use super::context::Gpu;
use super::kernels::Format;
use super::repack;
use crate::error::{Error, Result};
use crate::gguf::{GgufFile, TensorInfo};
use crate::quant::{self, GgmlType};

/// Rows [row0, row0 + rows) of every matrix, in one set of buffers.
pub struct Part {
    pub row0: u32,
    pub rows: u32,
    /// The arrays the format binds, in binding order.
    pub buffers: Vec<wgpu::Buffer>,
}

/// A (stack of) weight matrices as the matvec kernels read them.
pub struct Matrix {
    pub name: String,
    pub format: Format,
    /// 32-weight units per row.
    pub units: u32,
    /// Output rows per matrix (for a merged gate/up: rows of each half).
    pub rows: u32,
    pub n_mat: u32,
    pub gate_up: bool,
    pub parts: Vec<Part>,
}

impl Matrix {
    /// Units between consecutive matrices inside one part's buffers.
    pub fn mat_units(&self, part: &Part) -> u32 {
        part.rows * self.units * if self.gate_up { 2 } else { 1 }
    }
}

/// One source of rows: `rows` consecutive rows per slice, starting at row
/// `first` of each slice of a tensor with `slice_rows` rows per slice.
struct Rows<'a> {
    data: &'a [u8],
    row_bytes: usize,
    slice_rows: usize,
    first: usize,
}

fn format_of(t: &TensorInfo) -> Result<Format> {
    match t.ggml_type {
        GgmlType::F32 => Ok(Format::F32),
        GgmlType::F16 => Ok(Format::F16),
        GgmlType::BF16 => Ok(Format::BF16),
        GgmlType::Q4_0 => Ok(Format::Q4_0),
        GgmlType::Q4_1 => Ok(Format::Q4_1),
        GgmlType::Q5_0 => Ok(Format::Q5_0),
        GgmlType::Q5_1 => Ok(Format::Q5_1),
        GgmlType::Q8_0 => Ok(Format::Q8_0),
        GgmlType::Q4_K => Ok(Format::Q4K),
        GgmlType::Q5_K => Ok(Format::Q5K),
        GgmlType::Q6_K => Ok(Format::Q6K),
        GgmlType::Q2_K => Ok(Format::Q2K),
        GgmlType::Q3_K => Ok(Format::Q3K),
        GgmlType::IQ4_NL => Ok(Format::IQ4NL),
        GgmlType::IQ4_XS => Ok(Format::IQ4XS),
        other => Err(Error::Unsupported(format!(
            "tensor {} is {}; the GPU engine reads F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, \
             Q8_0, IQ4_NL, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K and IQ4_XS matrices",
            t.name,
            other.name()
        ))),
    }
}

/// Raw GGUF blocks → the arrays `format`'s kernel binds (the tests upload
/// their random matrices through it too). The legacy blocks (Q4_0, Q4_1,
/// Q5_0, Q5_1, Q8_0, IQ4_NL) are split into aligned scale and quant arrays
/// Q6_K's units are gathered into whole vec4s and Q3_K / IQ4_XS padded to
/// them (`repack.rs` draws each layout); the float formats and Q2_K / Q4_K / Q5_K (super-blocks of
/// 84, 144 and 176 bytes, already word aligned) are read as the file has
/// them.
pub fn repack(format: Format, raw: &[u8]) -> Result<Vec<Vec<u8>>> {
    let pair = |(a, b)| vec![a, b];
    Ok(match format {
        Format::Q4_0 => pair(repack::repack_q4_0(raw)?),
        Format::Q4_1 => pair(repack::repack_q4_1(raw)?),
        Format::Q5_0 => pair(repack::repack_q5_0(raw)?),
        Format::Q5_1 => pair(repack::repack_q5_1(raw)?),
        Format::Q8_0 => pair(repack::repack_q8_0(raw)?),
        Format::IQ4NL => pair(repack::repack_iq4_nl(raw)?),
        Format::F32 | Format::F16 | Format::BF16 | Format::Q2K | Format::Q4K | Format::Q5K => {
            vec![raw.to_vec()]
        }
        Format::IQ4XS => vec![repack::rotate_iq4_xs(raw)?],
        Format::Q6K => vec![repack::repack_q6_k(raw)?],
        Format::Q3K => vec![repack::pad_q3_k(raw)?],
    })
}

/// Uploads weights, counting bytes for the progress callback and flushing
/// the queue now and then so staging memory does not pile up.
pub struct Uploader<'a> {
    pub gpu: &'a Gpu,
    pub file: &'a GgufFile,
    /// Largest buffer a part may use (binding and buffer limits).
    pub limit: u64,
    pub done: u64,
    pub total: u64,
    since_flush: u64,
    progress: &'a mut dyn FnMut(u64, u64),
    /// Where the time goes (issue 17 item 5): gathering and repacking
    /// rows, copying them into mapped buffers, waiting for the GPU.
    pub times: UploadTimes,
}

/// Seconds an upload spent in each of its parts.
#[derive(Clone, Copy, Debug, Default)]
pub struct UploadTimes {
    pub repack: f64,
    pub copy: f64,
    pub wait: f64,
}

const FLUSH_BYTES: u64 = 256 << 20;

impl<'a> Uploader<'a> {
    pub fn new(
        gpu: &'a Gpu,
        file: &'a GgufFile,
        limit: u64,
        total: u64,
        progress: &'a mut dyn FnMut(u64, u64),
    ) -> Uploader<'a> {
        Uploader {
            gpu,
            file,
            limit,
            done: 0,
            total,
            since_flush: 0,
            progress,
            times: UploadTimes::default(),
        }
    }

    fn buffer(&mut self, label: &str, bytes: &[u8]) -> Result<wgpu::Buffer> {
        let t0 = std::time::Instant::now();
        let b = self.gpu.storage(label, bytes)?;
        self.times.copy += t0.elapsed().as_secs_f64();
        self.done += bytes.len() as u64;
        self.since_flush += bytes.len() as u64;
        if self.since_flush >= FLUSH_BYTES {
            let t0 = std::time::Instant::now();
            self.gpu.queue.submit([]);
            self.gpu.wait()?;
            self.times.wait += t0.elapsed().as_secs_f64();
            self.since_flush = 0;
        }
        (self.progress)(self.done, self.total);
        Ok(b)
    }

    /// A vector (norm weight, bias, F32 router) as f32.
    pub fn vector(&mut self, t: &TensorInfo) -> Result<wgpu::Buffer> {
        let v = quant::dequantize_vec(
            t.ggml_type,
            self.file.tensor_data(t),
            t.n_elements() as usize,
        )?;
        self.buffer(&t.name, bytemuck::cast_slice(&v))
    }

    /// The token embedding, gathered by embed.wgsl: in its own format
    /// where the kernels read it, else dequantized to F32 here (4 bytes a
    /// weight: a stopgap until every format has a kernel).
    pub fn embedding(&mut self, t: &TensorInfo) -> Result<Matrix> {
        if format_of(t).is_ok() {
            return self.matrix(t);
        }
        log::info!(
            "{} is {}: the GPU holds it as F32 ({} MiB)",
            t.name,
            t.ggml_type.name(),
            (t.n_elements() * 4) >> 20
        );
        let f = quant::dequantize_vec(
            t.ggml_type,
            self.file.tensor_data(t),
            t.n_elements() as usize,
        )?;
        let src = Rows {
            data: bytemuck::cast_slice(&f),
            row_bytes: t.ne(0) as usize * 4,
            slice_rows: t.ne(1) as usize,
            first: 0,
        };
        let rows = t.ne(1) as usize;
        self.build(&t.name, Format::F32, t, &[src], rows, 1, false)
    }

    /// A matrix or stack of matrices (`t` with ne0 columns, ne1 rows, ne2
    /// slices).
    pub fn matrix(&mut self, t: &TensorInfo) -> Result<Matrix> {
        let rows = t.ne(1) as usize;
        let src = self.rows_of(t, 0)?;
        self.build(
            &t.name,
            format_of(t)?,
            t,
            &[src],
            rows,
            t.ne(2) as usize,
            false,
        )
    }

    /// Gate and up as one merged matrix stack (both `gate`'s shape).
    pub fn gate_up(&mut self, name: &str, gate: &TensorInfo, up: &TensorInfo) -> Result<Matrix> {
        let f = format_of(gate)?;
        if format_of(up)? != f || gate.dims != up.dims {
            return Err(Error::Unsupported(format!(
                "{} and {} differ in type or shape; the GPU engine reads them as one matrix",
                gate.name, up.name
            )));
        }
        let rows = gate.ne(1) as usize;
        let srcs = [self.rows_of(gate, 0)?, self.rows_of(up, 0)?];
        self.build(name, f, gate, &srcs, rows, gate.ne(2) as usize, true)
    }

    /// A tensor already merged (`ffn_gate_up_exps`: 2·n_ff rows per expert).
    pub fn merged_gate_up(&mut self, t: &TensorInfo) -> Result<Matrix> {
        let rows = t.ne(1) as usize / 2;
        let srcs = [self.rows_of(t, 0)?, self.rows_of(t, rows)?];
        self.build(
            &t.name,
            format_of(t)?,
            t,
            &srcs,
            rows,
            t.ne(2) as usize,
            true,
        )
    }

    fn rows_of(&self, t: &TensorInfo, first: usize) -> Result<Rows<'a>> {
        let row_bytes = t
            .ggml_type
            .row_bytes(t.ne(0))
            .ok_or_else(|| Error::Unsupported(format!("{}: row size", t.name)))?;
        Ok(Rows {
            data: self.file.tensor_data(t),
            row_bytes: row_bytes as usize,
            slice_rows: t.ne(1) as usize,
            first,
        })
    }

    #[allow(clippy::too_many_arguments)]
    fn build(
        &mut self,
        name: &str,
        format: Format,
        t: &TensorInfo,
        srcs: &[Rows],
        rows: usize,
        n_mat: usize,
        gate_up: bool,
    ) -> Result<Matrix> {
        let cols = t.ne(0) as usize;
        if cols % 32 != 0 {
            return Err(Error::Unsupported(format!(
                "{name}: {cols} columns is not a multiple of 32"
            )));
        }
        let row_bytes = srcs[0].row_bytes;
        // Of the formats padded at load, Q6_K grows most (210 → 224 bytes a
        // super-block); budget for that on every format.
        let bytes_per_row = (row_bytes * n_mat * srcs.len()) as u64 * 224 / 210 + 1;
        let rows_per_part = ((self.limit / bytes_per_row) as usize).clamp(1, rows);
        let mut parts = Vec::new();
        let mut raw;
        for r0 in (0..rows).step_by(rows_per_part) {
            let n = rows_per_part.min(rows - r0);
            // A whole single-source tensor is already in order: no gather.
            let t0 = std::time::Instant::now();
            let blocks: &[u8] = if srcs.len() == 1 && n == srcs[0].slice_rows {
                &srcs[0].data[..n_mat * n * row_bytes]
            } else {
                let mut pieces = Vec::with_capacity(n_mat * srcs.len());
                for m in 0..n_mat {
                    for s in srcs {
                        let start = (m * s.slice_rows + s.first + r0) * s.row_bytes;
                        pieces.push(&s.data[start..start + n * s.row_bytes]);
                    }
                }
                // Fresh zeroed memory is mapped lazily: no pass to clear it.
                raw = vec![0u8; pieces.len() * n * row_bytes];
                repack::gather_parallel(&pieces, &mut raw);
                &raw
            };
            let arrays = repack(format, blocks)?;
            self.times.repack += t0.elapsed().as_secs_f64();
            let mut buffers = Vec::new();
            for (i, arr) in arrays.iter().enumerate() {
                buffers.push(self.buffer(&format!("{name}[{r0}].{i}"), arr)?);
            }
            parts.push(Part {
                row0: r0 as u32,
                rows: n as u32,
                buffers,
            });
        }
        Ok(Matrix {
            name: name.to_string(),
            format,
            units: (cols / 32) as u32,
            rows: rows as u32,
            n_mat: n_mat as u32,
            gate_up,
            parts,
        })
    }
}
