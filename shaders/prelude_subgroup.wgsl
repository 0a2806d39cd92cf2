// Reduction prelude, subgroup variant. Same names as prelude_shared.wgsl.
// No subgroup size is assumed (Apple/NVIDIA 32, lavapipe 8, others 16-64):
// each subgroup reduces with subgroupAdd, its first lane parks the partial
// in shared memory, and the first subgroup adds the partials.

struct Ids {
    @builtin(local_invocation_index) lid: u32,
    @builtin(subgroup_invocation_id) lane: u32,
    @builtin(subgroup_size) sg_size: u32,
}

// One slot per subgroup; subgroups have at least 4 lanes.
var<workgroup> wg_scratch: array<f32, WG / 4u>;

fn wg_sum(x: f32, ids: Ids) -> f32 {
    let partial = subgroupAdd(x);
    let n_sg = (WG + ids.sg_size - 1u) / ids.sg_size;
    let sg = ids.lid / ids.sg_size;
    if ids.lane == 0u {
        wg_scratch[sg] = partial;
    }
    workgroupBarrier();
    var total = 0.0;
    for (var i = 0u; i < n_sg; i++) {
        total += wg_scratch[i];
    }
    workgroupBarrier();
    return total;
}
