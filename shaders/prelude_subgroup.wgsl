// Reduction prelude, subgroup variant. Same names as prelude_shared.wgsl.
// No subgroup size is assumed (Apple/NVIDIA 32, lavapipe 8, others 16-64);
// invocations are taken to fill subgroups in local_invocation_index order.

struct Ids {
    @builtin(local_invocation_index) lid: u32,
    @builtin(subgroup_invocation_id) lane: u32,
    @builtin(subgroup_size) sg_size: u32,
}

// One slot per subgroup; subgroups have at least 4 lanes.
var<workgroup> wg_scratch: array<f32, WG / 4u>;
var<workgroup> wg_scratch_u: array<u32, WG / 4u>;

// Segments that fit in a subgroup reduce by butterfly shuffles (segments
// are runs of consecutive lanes); larger ones combine subgroup partials
// through shared memory.
fn seg_sum(x: f32, ids: Ids, seg: u32) -> f32 {
    if seg <= ids.sg_size {
        var v = x;
        for (var m = seg / 2u; m > 0u; m = m >> 1u) {
            v += subgroupShuffleXor(v, m);
        }
        return v;
    }
    let partial = subgroupAdd(x);
    if ids.lane == 0u {
        wg_scratch[ids.lid / ids.sg_size] = partial;
    }
    workgroupBarrier();
    let per = seg / ids.sg_size;
    let first = (ids.lid / seg) * per;
    var total = 0.0;
    for (var i = 0u; i < per; i++) {
        total += wg_scratch[first + i];
    }
    workgroupBarrier();
    return total;
}

// seg_sum of each component.
fn seg_sum4(x: vec4<f32>, ids: Ids, seg: u32) -> vec4<f32> {
    if seg <= ids.sg_size {
        var v = x;
        for (var m = seg / 2u; m > 0u; m = m >> 1u) {
            v += subgroupShuffleXor(v, m);
        }
        return v;
    }
    return vec4<f32>(seg_sum(x.x, ids, seg), seg_sum(x.y, ids, seg), seg_sum(x.z, ids, seg),
        seg_sum(x.w, ids, seg));
}

// Maximum of `x` over each segment of `seg` consecutive invocations, as
// seg_sum.
fn seg_max(x: f32, ids: Ids, seg: u32) -> f32 {
    if seg <= ids.sg_size {
        var v = x;
        for (var m = seg / 2u; m > 0u; m = m >> 1u) {
            v = max(v, subgroupShuffleXor(v, m));
        }
        return v;
    }
    let partial = subgroupMax(x);
    if ids.lane == 0u {
        wg_scratch[ids.lid / ids.sg_size] = partial;
    }
    workgroupBarrier();
    let per = seg / ids.sg_size;
    let first = (ids.lid / seg) * per;
    var m = wg_scratch[first];
    for (var i = 1u; i < per; i++) {
        m = max(m, wg_scratch[first + i]);
    }
    workgroupBarrier();
    return m;
}

fn wg_sum(x: f32, ids: Ids) -> f32 {
    return seg_sum(x, ids, WG);
}

fn wg_max(x: f32, ids: Ids) -> f32 {
    let partial = subgroupMax(x);
    if ids.lane == 0u {
        wg_scratch[ids.lid / ids.sg_size] = partial;
    }
    workgroupBarrier();
    var m = wg_scratch[0];
    for (var i = 1u; i < WG / ids.sg_size; i++) {
        m = max(m, wg_scratch[i]);
    }
    workgroupBarrier();
    return m;
}

fn wg_min_u32(x: u32, ids: Ids) -> u32 {
    let partial = subgroupMin(x);
    if ids.lane == 0u {
        wg_scratch_u[ids.lid / ids.sg_size] = partial;
    }
    workgroupBarrier();
    var m = wg_scratch_u[0];
    for (var i = 1u; i < WG / ids.sg_size; i++) {
        m = min(m, wg_scratch_u[i]);
    }
    workgroupBarrier();
    return m;
}
