//! The plan builder's helpers: `Builder` collects dispatches, and `Mv`
//! says what one matvec reads and writes; `Builder::matvec` turns a matrix
//! (one dispatch per part) and an `Mv` into dispatches with their params.
//! Every dispatch goes through `add`, which records the recipe steps it
//! lowers (`Lowered`).

use crate::error::{Error, Result};
use crate::gpu::context::Gpu;
use crate::gpu::kernels::{Bindings, Kernel, Pipelines};
use crate::gpu::ops::{
    self, Dispatch, MatvecBuffers, MatvecMode, MatvecParams, MatvecSide, MatvecSpec,
};
use crate::gpu::weights::Matrix;

use super::lower::{Lowered, Lowers};

pub(super) struct Builder<'a> {
    pub(super) gpu: &'a Gpu,
    pub(super) pipes: &'a Pipelines,
    pub(super) out: Vec<Dispatch>,
    pub(super) eps: f32,
    pub(super) dummy: wgpu::Buffer,
    pub(super) zero_id: wgpu::Buffer,
    pub(super) low: Lowered,
}

/// What one matvec reads and writes, besides the matrix.
pub(super) struct Mv<'a> {
    pub(super) mode: MatvecMode,
    pub(super) norm: Option<&'a wgpu::Buffer>,
    pub(super) accum: bool,
    pub(super) x: &'a wgpu::Buffer,
    pub(super) y: &'a wgpu::Buffer,
    pub(super) sel: Option<(&'a wgpu::Buffer, &'a wgpu::Buffer)>,
    pub(super) slots: u32,
    pub(super) x_stride: u32,
    pub(super) y_stride: u32,
    /// Merge attention splits into x first: (their (m, l) buffer, splits
    /// per head).
    pub(super) combine: Option<(&'a wgpu::Buffer, u32)>,
    /// WeightedSum: the vector added to every output (the shared expert's
    /// down, or zeros).
    pub(super) add: Option<&'a wgpu::Buffer>,
    /// A buffer a later dispatch reads, bound read-only at a slot this one
    /// leaves unread: wgpu records a buffer's write-to-read barrier at the
    /// first dispatch that binds it for reading, so binding it here, where a
    /// barrier is due anyway, lets that later dispatch start without one
    /// (and overlap its neighbour).
    pub(super) ahead: Option<&'a wgpu::Buffer>,
}

impl<'a> Mv<'a> {
    pub(super) fn plain(x: &'a wgpu::Buffer, y: &'a wgpu::Buffer) -> Mv<'a> {
        Mv {
            mode: MatvecMode::Plain,
            norm: None,
            accum: false,
            x,
            y,
            sel: None,
            slots: 1,
            x_stride: 0,
            y_stride: 0,
            combine: None,
            add: None,
            ahead: None,
        }
    }
}

impl Lowers for Builder<'_> {
    fn low(&mut self) -> &mut Lowered {
        &mut self.low
    }
}

impl Builder<'_> {
    pub(super) fn uniform<T: bytemuck::Pod>(&self, label: &str, p: &T) -> wgpu::Buffer {
        self.gpu.uniform(label, p)
    }

    pub(super) fn push(
        &mut self,
        label: String,
        k: Kernel,
        bufs: &dyn Bindings,
        wg: [u32; 3],
    ) -> Result<()> {
        let d = Dispatch::new(self.gpu, self.pipes, k, bufs, wg)?.named(label);
        self.add(d);
        Ok(())
    }

    /// Append `d`, lowering the steps last given to `low.lower`.
    pub(super) fn add(&mut self, d: Dispatch) {
        self.low.added(&d);
        self.out.push(d);
    }

    /// The buffers at binding g and sel, sel_w of a matvec, with `v.ahead`
    /// in whichever of them `v` leaves unread.
    fn read_slots<'b>(
        &'b self,
        v: &Mv<'b>,
    ) -> Result<(MatvecSide<'b>, &'b wgpu::Buffer, &'b wgpu::Buffer)> {
        let g = match (v.combine, v.norm, v.add) {
            (Some((ml, _)), _, _) => Some(MatvecSide::Splits(ml)),
            (None, Some(n), _) => Some(MatvecSide::Norm(n)),
            (None, None, Some(a)) => Some(MatvecSide::Add(a)),
            (None, None, None) => None,
        };
        let (sel, sel_w) = v.sel.unwrap_or((&self.zero_id, &self.dummy));
        // sel_w is read only by the weighted sum (MODE 2).
        Ok(match (v.ahead, g) {
            (None, g) => (g.unwrap_or(MatvecSide::Unread(&self.dummy)), sel, sel_w),
            (Some(a), None) => (MatvecSide::Unread(a), sel, sel_w),
            (Some(a), Some(g)) if v.mode != MatvecMode::WeightedSum => (g, sel, a),
            (Some(_), Some(_)) => {
                return Err(Error::Gpu(
                    "internal: no unread slot to bind a buffer ahead in".into(),
                ))
            }
        })
    }

    /// One dispatch per part of `m`.
    pub(super) fn matvec(&mut self, m: &Matrix, v: Mv) -> Result<()> {
        for part in &m.parts {
            let params = MatvecParams {
                rows: part.rows,
                units: m.units,
                mat_units: m.mat_units(part),
                // MODE 2 sums over the slots; COMBINE over a head's splits.
                n_slot: v.combine.map_or(v.slots, |c| c.1),
                x_stride: v.x_stride,
                y_stride: v.y_stride,
                y_off: part.row0,
                eps: self.eps,
                _pad: [0; 4],
            };
            let spec = MatvecSpec {
                format: m.format,
                mode: v.mode,
                accum: v.accum,
                params,
                slots: v.slots,
            };
            let pb = self.uniform(&m.name, &params);
            let (g, sel, sel_w) = self.read_slots(&v)?;
            let bufs = MatvecBuffers {
                params: &pb,
                x: v.x,
                g,
                y: v.y,
                sel,
                sel_w,
                weights: &part.buffers,
            };
            let d = ops::matvec(self.gpu, self.pipes, &spec, &bufs)?;
            // Routed experts read only the selected matrices.
            let frac = match v.sel {
                Some(_) => v.slots.min(m.n_mat) as f64 / m.n_mat as f64,
                None => 1.0,
            };
            let bytes: u64 = part.buffers.iter().map(|b| b.size()).sum();
            let d = d
                .named(m.name.trim_end_matches(".weight"))
                .reading((bytes as f64 * frac) as u64);
            self.add(d);
        }
        Ok(())
    }
}
