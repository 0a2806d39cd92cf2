// Memory-read probe for `glmw bench --tier micro`: the workgroups together
// read a large buffer once, so time / bytes is the device's attainable read
// bandwidth, the yardstick the decode kernels are compared with.
//
// Bindings: 0 params (uniform), 1 src (array<vec4<f32>>), 2 out (array<f32>,
// one sum per workgroup, so the reads cannot be optimised away).
// Dispatch: (n_wg, 1, 1); invocation i of workgroup w reads vec4s
// w·WG + i + k·n_wg·WG (grid stride, coalesced).

const WG: u32 = 256u;

struct Params {
    n_vec4: u32,
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> src: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read_write> out: array<f32>;

@compute @workgroup_size(WG)
fn main(ids: Ids, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let stride = nwg.x * WG;
    var acc = vec4<f32>(0.0);
    for (var i = wid.x * WG + ids.lid; i < p.n_vec4; i += stride) {
        acc += src[i];
    }
    let s = wg_sum(acc.x + acc.y + acc.z + acc.w, ids);
    if ids.lid == 0u {
        out[wid.x] = s;
    }
}
