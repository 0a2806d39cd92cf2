// Reduction prelude, shared-memory variant (devices without subgroups).
// The host prepends exactly one prelude to every kernel; both define the same
// names: `struct Ids` (the entry point's invocation ids) and `wg_sum`.
// Kernels declare `const WG: u32` (their workgroup size, a power of two).

struct Ids {
    @builtin(local_invocation_index) lid: u32,
}

var<workgroup> wg_scratch: array<f32, WG>;

// Sum of `x` over the workgroup, returned to every invocation. Call from
// uniform control flow (it contains barriers).
fn wg_sum(x: f32, ids: Ids) -> f32 {
    wg_scratch[ids.lid] = x;
    workgroupBarrier();
    for (var s = WG / 2u; s > 0u; s = s >> 1u) {
        if ids.lid < s {
            wg_scratch[ids.lid] += wg_scratch[ids.lid + s];
        }
        workgroupBarrier();
    }
    let total = wg_scratch[0];
    workgroupBarrier();
    return total;
}
