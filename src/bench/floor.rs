//! What a decode step costs before it does any work: the same trivial
//! dispatch chained with and without the barrier wgpu puts between two
//! writes of one buffer, and chains that each read a matvec-sized buffer.
//! A token is ~470 dependent dispatches, so these floors say how much of
//! the token any kernel change can win and how much only fewer levels can.

use crate::error::Result;
use crate::gpu::ops::{Dispatch, ReadBandwidthBindings};
use crate::gpu::profile::Timer;
use crate::gpu::{Gpu, Kernel, Pipelines};

use super::{stats, ReadParams};

/// Dispatches per timed chain: long enough that the pass's own start and
/// end are noise.
const CHAIN: usize = 256;

/// One chain's cost per dispatch.
#[derive(Clone, Debug)]
pub struct FloorRow {
    pub what: String,
    pub workgroups: u32,
    /// Bytes each dispatch reads.
    pub bytes: u64,
    /// Whether consecutive dispatches write the same buffer (a barrier
    /// before each) or each its own (none).
    pub barrier: bool,
    pub us_per_dispatch: f64,
}

/// Each chain timed 5 times in one pass; median µs per dispatch. None
/// without GPU timestamps (wall time would measure the submit).
pub fn dispatch_floor(gpu: &Gpu) -> Result<Option<Vec<FloorRow>>> {
    let Some(timer) = Timer::new(gpu) else {
        return Ok(None);
    };
    let pipes = Pipelines::new(gpu, &gpu.caps)?;
    let src = gpu.scratch("floor.src", 16 << 20)?;
    let mut rows = Vec::new();
    // (what, workgroups, vec4s read, barrier)
    let cases = [
        ("empty", 1u32, 0u32, true),
        ("empty", 1, 0, false),
        ("empty", 264, 0, true),
        ("empty", 264, 0, false),
        ("read 1 MB", 264, 1 << 16, true),
        ("read 1 MB", 264, 1 << 16, false),
        ("read 4 MB", 528, 1 << 18, true),
        ("read 16 MB", 1056, 1 << 20, true),
    ];
    for (what, n_wg, n_vec4, barrier) in cases {
        let chain = chain(gpu, &pipes, &src, n_wg, n_vec4, barrier)?;
        let seg = chain.as_slice();
        timer.time(gpu, &[seg])?;
        let ns = timer.time(gpu, &[seg; 5])?;
        rows.push(FloorRow {
            what: what.to_string(),
            workgroups: n_wg,
            bytes: 16 * n_vec4 as u64,
            barrier,
            us_per_dispatch: stats(&ns).median / 1e3 / CHAIN as f64,
        });
    }
    Ok(Some(rows))
}

/// CHAIN read_bandwidth dispatches over the first `n_vec4` vec4s of `src`,
/// all writing one output buffer (`barrier`) or each its own.
fn chain(
    gpu: &Gpu,
    pipes: &Pipelines,
    src: &wgpu::Buffer,
    n_wg: u32,
    n_vec4: u32,
    barrier: bool,
) -> Result<Vec<Dispatch>> {
    let params = gpu.uniform(
        "floor",
        &ReadParams {
            n_vec4,
            _pad: [0; 3],
        },
    );
    let n_out = if barrier { 1 } else { CHAIN };
    let outs = (0..n_out)
        .map(|_| gpu.scratch("floor.out", 4 * n_wg as u64))
        .collect::<Result<Vec<_>>>()?;
    (0..CHAIN)
        .map(|i| {
            let out = &outs[i % n_out];
            let b = ReadBandwidthBindings {
                p: &params,
                src,
                out,
            };
            Dispatch::new(gpu, pipes, Kernel::ReadBandwidth, &b, [n_wg, 1, 1])
        })
        .collect()
}
