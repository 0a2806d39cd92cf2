//! What a plan's dispatches lower: each dispatch's recipe steps
//! (`model::recipe`), checked against the recipe as the plan is built, and
//! the intermediates the plan leaves in buffers of their own, named by the
//! recipe, for tracing.

use crate::error::{Error, Result};
use crate::gpu::kernels::Kernel;
use crate::gpu::ops::Dispatch;
use crate::model::recipe::{self, Name, Step};

/// A plan builder that records its lowering.
pub(super) trait Lowers: Sized {
    fn low(&mut self) -> &mut Lowered;

    /// The dispatches `add` adds compute `steps` (fused, in order) and
    /// leave the last of them in `buf`, `len` floats per token.
    fn lowered(
        &mut self,
        steps: &'static [Name],
        buf: &wgpu::Buffer,
        len: usize,
        add: impl FnOnce(&mut Self) -> Result<()>,
    ) -> Result<()> {
        self.low().lower(steps);
        add(self)?;
        if let Some(&last) = steps.last() {
            self.low().leaves(last, buf, len);
        }
        Ok(())
    }
}

/// A recipe intermediate a plan leaves in `buf` (`len` floats per token),
/// readable once the plan's first `after` dispatches have run and until
/// the next one that writes `buf`.
#[derive(Clone, Debug)]
pub struct Traced {
    pub name: Name,
    /// The block, or none for the input and the head.
    pub layer: Option<usize>,
    pub after: usize,
    pub buf: wgpu::Buffer,
    pub len: usize,
}

impl Traced {
    /// As the reference's trace names it: `l_out-3`, `result_norm`.
    pub fn label(&self) -> String {
        match self.layer {
            Some(il) => format!("{}-{il}", self.name.name()),
            None => self.name.name().to_string(),
        }
    }
}

/// A plan's record of its lowering, kept as it is built: the steps of the
/// dispatches being added now (`lower`), each dispatch's steps, and what
/// each leaves readable.
#[derive(Default)]
pub(super) struct Lowered {
    now: &'static [Name],
    layer: Option<usize>,
    /// Per dispatch, in recording order: the recipe steps it computes.
    covers: Vec<&'static [Name]>,
    /// Per dispatch, the weight matrix it reads, if any, as its label
    /// names it (`attn_q_a`, without `blk.N.`).
    matrices: Vec<Option<String>>,
    pub(super) traced: Vec<Traced>,
}

impl Lowered {
    /// The dispatches added from now on compute `steps` (fused, in order).
    pub(super) fn lower(&mut self, steps: &'static [Name]) {
        self.now = steps;
    }

    /// The block being lowered (none: the input or the head).
    pub(super) fn block(&mut self, layer: Option<usize>) {
        self.layer = layer;
    }

    /// `d` was added to the plan.
    pub(super) fn added(&mut self, d: &Dispatch) {
        self.covers.push(self.now);
        // The kernels that read a weight matrix label their dispatch with
        // its name.
        let matrix = matches!(
            d.kernel,
            Kernel::Matvec(_) | Kernel::Matmul(_) | Kernel::Embed(_) | Kernel::Route(_)
        );
        self.matrices.push(matrix.then(|| d.op().to_string()));
    }

    /// `buf` holds `name` once the dispatches added so far have run.
    pub(super) fn leaves(&mut self, name: Name, buf: &wgpu::Buffer, len: usize) {
        self.traced.push(Traced {
            name,
            layer: self.layer,
            after: self.covers.len(),
            buf: buf.clone(),
            len,
        });
    }

    /// Check that dispatches `from..` (those added since) lower `steps` up
    /// to `wanted`; `what` names the plan and part in the error.
    pub(super) fn check(
        &self,
        what: &str,
        from: usize,
        steps: &[Step],
        wanted: &[Name],
    ) -> Result<()> {
        let err = |e| Error::Gpu(format!("internal: {what} does not lower its recipe: {e}"));
        recipe::check(steps, &self.covers[from..], wanted).map_err(err)?;
        let dispatches = self.covers.iter().zip(&self.matrices).skip(from);
        for (i, (covers, m)) in dispatches.enumerate() {
            if let Some(m) = m.as_deref().filter(|m| !recipe::reads(steps, covers, m)) {
                return Err(err(format!(
                    "dispatch {i} reads {m}, the weight of none of its steps"
                )));
            }
        }
        Ok(())
    }
}
