//! The prefill's matrix products: one dispatch per row part of a matrix,
//! through matmul_coop.wgsl where the adapter offers 16x16 f16 cooperative
//! matrices (`Caps::coop`, decided when the device is opened) and
//! matmul.wgsl elsewhere; both read the same params, tiles and weights.

use super::{Builder, Dim};
use crate::error::Result;
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
        let params = ops::MatmulParams {
            rows: part.rows,
            units: m.units,
            mat_units: m.mat_units(part),
            x_div: v.x_div,
            x_tok: (v.x_row / 4) as u32,
            y_tok: v.y_row as u32,
            x_stride: (v.heads.1 / 4) as u32,
            y_stride: v.heads.2 as u32,
            y_off: part.row0,
            _pad: [0; 3],
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
            let o = ops::MatmulOverrides { gate_up, accum };
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
