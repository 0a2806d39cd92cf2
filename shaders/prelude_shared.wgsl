// Reduction prelude, shared-memory variant (devices without subgroups).
// The host appends exactly one prelude to every kernel; both define the same
// names: `struct Ids` (the entry point's invocation ids), `seg_sum`,
// `seg_sum4`, `seg_max`, `wg_sum`, `wg_max` and `wg_min_u32`. All contain barriers:
// call them from uniform control flow.
// Kernels declare `const WG: u32` (their workgroup size, a power of two).

struct Ids {
    @builtin(local_invocation_index) lid: u32,
}

var<workgroup> wg_scratch: array<f32, WG>;
var<workgroup> wg_scratch_u: array<u32, WG>;
var<workgroup> wg_scratch4: array<vec4<f32>, WG>;

// Sum of `x` over each segment of `seg` consecutive invocations (`seg` a
// power of two <= WG); every invocation gets its segment's sum.
fn seg_sum(x: f32, ids: Ids, seg: u32) -> f32 {
    return seg_sum4(vec4<f32>(x, 0.0, 0.0, 0.0), ids, seg).x;
}

// seg_sum of each component (the one tree both use).
fn seg_sum4(x: vec4<f32>, ids: Ids, seg: u32) -> vec4<f32> {
    wg_scratch4[ids.lid] = x;
    workgroupBarrier();
    for (var s = seg / 2u; s > 0u; s = s >> 1u) {
        if ids.lid % seg < s {
            wg_scratch4[ids.lid] += wg_scratch4[ids.lid + s];
        }
        workgroupBarrier();
    }
    let total = wg_scratch4[ids.lid - ids.lid % seg];
    workgroupBarrier();
    return total;
}

// Maximum of `x` over each segment of `seg` consecutive invocations.
fn seg_max(x: f32, ids: Ids, seg: u32) -> f32 {
    wg_scratch[ids.lid] = x;
    workgroupBarrier();
    for (var s = seg / 2u; s > 0u; s = s >> 1u) {
        if ids.lid % seg < s {
            wg_scratch[ids.lid] = max(wg_scratch[ids.lid], wg_scratch[ids.lid + s]);
        }
        workgroupBarrier();
    }
    let m = wg_scratch[ids.lid - ids.lid % seg];
    workgroupBarrier();
    return m;
}

// Sum of `x` over the whole workgroup.
fn wg_sum(x: f32, ids: Ids) -> f32 {
    return seg_sum(x, ids, WG);
}

// Maximum of `x` over the whole workgroup.
fn wg_max(x: f32, ids: Ids) -> f32 {
    wg_scratch[ids.lid] = x;
    workgroupBarrier();
    for (var s = WG / 2u; s > 0u; s = s >> 1u) {
        if ids.lid < s {
            wg_scratch[ids.lid] = max(wg_scratch[ids.lid], wg_scratch[ids.lid + s]);
        }
        workgroupBarrier();
    }
    let m = wg_scratch[0];
    workgroupBarrier();
    return m;
}

// Minimum of `x` over the whole workgroup.
fn wg_min_u32(x: u32, ids: Ids) -> u32 {
    wg_scratch_u[ids.lid] = x;
    workgroupBarrier();
    for (var s = WG / 2u; s > 0u; s = s >> 1u) {
        if ids.lid < s {
            wg_scratch_u[ids.lid] = min(wg_scratch_u[ids.lid], wg_scratch_u[ids.lid + s]);
        }
        workgroupBarrier();
    }
    let m = wg_scratch_u[0];
    workgroupBarrier();
    return m;
}
