//! The prefill's matrix products: one dispatch per row part of a matrix,
//! through matmul_coop.wgsl where the adapter offers 16x16 f16 cooperative
//! matrices (`Caps::coop`, decided when the device is opened) and
//! matmul.wgsl elsewhere; both read the same params, tiles and weights.

use super::{Builder, Dim};
use crate::error::{Error, Result};
use crate::gpu::ops;
use crate::gpu::weights::{Matrix, Part};

/// One matmul's inputs and layout besides the matrix.
#[derive(Clone, Copy)]
pub(super) struct Mm<'a> {
    pub(super) x: &'a wgpu::Buffer,
    pub(super) y: &'a wgpu::Buffer,
    pub(super) gate_up: bool,
    pub(super) accum: bool,
    /// Through the expert tiles (else dense tiles over the chunk).
    pub(super) routed: bool,
    /// floats per row of x and y
    pub(super) x_row: usize,
    pub(super) y_row: usize,
    pub(super) x_div: u32,
    /// Batched heads: (count, floats between heads' x, between heads' y).
    pub(super) heads: (u32, usize, usize),
    /// The heads are parts of each row (split-K): head z multiplies the
    /// z-th run of units / parts units into a plane of y of its own.
    pub(super) split_k: bool,
    /// Floats into y where its first row (or plane) starts.
    pub(super) y_off: usize,
}

impl<'a> Mm<'a> {
    pub(super) fn new(
        x: &'a wgpu::Buffer,
        x_row: usize,
        y: &'a wgpu::Buffer,
        y_row: usize,
    ) -> Mm<'a> {
        Mm {
            x,
            y,
            gate_up: false,
            accum: false,
            routed: false,
            x_row,
            y_row,
            x_div: 1,
            heads: (1, 0, 0),
            split_k: false,
            y_off: 0,
        }
    }

    /// A dense matmul whose rows split into `parts` (`ops::matmul_k_parts`):
    /// y holds `parts` planes of partial sums, `plane` floats apart, which
    /// its consumer adds up.
    pub(super) fn split_k(
        x: &'a wgpu::Buffer,
        x_row: usize,
        (y, y_row): (&'a wgpu::Buffer, usize),
        parts: usize,
        plane: usize,
    ) -> Mm<'a> {
        Mm {
            heads: (parts as u32, x_row / parts.max(1), plane),
            split_k: parts > 1,
            ..Mm::new(x, x_row, y, y_row)
        }
    }
}

impl Builder<'_> {
    pub(super) fn matmul(&mut self, m: &Matrix, v: Mm) -> Result<()> {
        for part in &m.parts {
            self.matmul_part(m, part, v)?;
        }
        Ok(())
    }

    fn matmul_part(&mut self, m: &Matrix, part: &Part, v: Mm) -> Result<()> {
        // Split-K: head z's part starts z parts into each row, and reads
        // the z-th part of x's row.
        let parts = v.heads.0;
        let (units, mat_units) = match v.split_k {
            true if m.units % parts == 0 && v.heads.1 * parts as usize == m.units as usize * 32 => {
                (m.units / parts, m.units / parts)
            }
            true => {
                return Err(Error::Gpu(format!(
                    "internal: {} cannot split its {} units into {parts} parts of {} floats",
                    m.name, m.units, v.heads.1
                )))
            }
            false => (m.units, m.mat_units(part)),
        };
        let params = ops::MatmulParams {
            rows: part.rows,
            units,
            mat_units,
            x_div: v.x_div,
            x_tok: (v.x_row / 4) as u32,
            y_tok: v.y_row as u32,
            x_stride: (v.heads.1 / 4) as u32,
            y_stride: v.heads.2 as u32,
            y_off: part.row0 + v.y_off as u32,
            row_units: m.units,
            _pad: [0; 2],
        };
        let p = &self.gpu.uniform(&m.name, &params);
        let (tiles, order) = match v.routed {
            true => (self.routed_tiles, self.routed_order),
            false => (self.dense_tiles, self.identity),
        };
        let (x, y, weights) = (v.x, v.y, &part.buffers[..]);
        let (gate_up, accum) = (v.gate_up, v.accum);
        let (d, rows) = if self.gpu.caps.coop {
            let b = ops::MatmulCoopBindings {
                p,
                x,
                y,
                tiles,
                order,
                weights,
            };
            let wide = ops::coop_wide(self.gpu);
            let o = ops::MatmulCoopOverrides {
                gate_up,
                accum,
                wide,
                short: v.routed,
            };
            let d = ops::matmul_coop(self.gpu, self.pipes, m.format, o, &b)?;
            (d, ops::matmul_coop_rows(gate_up))
        } else {
            let b = ops::MatmulBindings {
                p,
                x,
                y,
                tiles,
                order,
                weights,
            };
            let o = ops::MatmulOverrides {
                gate_up,
                accum,
                short: v.routed,
            };
            let d = ops::matmul(self.gpu, self.pipes, m.format, o, &b)?;
            (d, ops::matmul_rows(gate_up))
        };
        let tiles = match v.routed {
            true => Dim::RoutedTiles,
            false => Dim::DenseTiles,
        };
        let d = d.named(m.name.trim_end_matches(".weight"));
        let rows = Dim::Fixed(part.rows.div_ceil(rows));
        self.add(d, [rows, tiles, Dim::Fixed(v.heads.0)]);
        Ok(())
    }
}
