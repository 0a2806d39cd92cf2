// Adds a chunk's routed expert outputs into the residual stream:
// y[t·n + r] += Σ_k sel_w[a] · part[rows[a]·n + r], a = t·n_used + k
// (part: the routed down matmul's rows, assignment a's at its tile slot
// rows[a], moe_group.wgsl's).
//
// Bindings: 0 params (uniform), 1 part (array<vec4<f32>>), 2 sel_w
// (array<f32>), 3 y (array<vec4<f32>>), 4 rows (array<u32>): n (n_embd,
// the next matrices' columns, which the upload holds to multiples of 32)
// is a multiple of 4.
// Dispatch: (ops::moe_sum_groups(n), tokens, 1); invocation i of workgroup
// (x, t) owns y's vec4 x·WG + i of row t.

/// host: gpu::ops::MOE_SUM_WG
const WG: u32 = 256u;

struct Params {
    n: u32,
    n_used: u32,
    _pad0: u32,
    _pad1: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> part: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> sel_w: array<f32>;
@group(0) @binding(3) var<storage, read_write> y: array<vec4<f32>>;
@group(0) @binding(4) var<storage, read> rows: array<u32>;

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    let n4 = p.n / 4u;
    let r = wid.x * WG + lid;
    if r >= n4 {
        return;
    }
    let t = wid.y;
    var s = vec4<f32>(0.0);
    for (var k = 0u; k < p.n_used; k++) {
        let a = t * p.n_used + k;
        s += sel_w[a] * part[rows[a] * n4 + r];
    }
    y[t * n4 + r] += s;
}
