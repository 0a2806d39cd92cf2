// RMSNorm: y = x / sqrt(mean(x²) + eps) * g, ggml's formula. x may come
// in `parts` planes of n_rows × n (a split-K matmul's partial sums,
// ops::matmul_k_parts), added up here.
//
// Bindings: 0 params (uniform), 1 x (parts × n_rows × n), 2 g (n), 3 y
// (n_rows × n), all as vec4s: n is a multiple of 4 (every normed row is
// the input of a matrix, whose columns the upload holds to multiples of
// 32). Vector loads are a quarter of the load instructions floats were:
// the prefill's norms went from ~15 to ~12 µs a block on an H100.
// Dispatch: one workgroup per row; rows past 65535 fold into y
// (row = wid.y · nwg.x + wid.x).
// Each invocation owns vec4s lid, lid + WG, lid + 2·WG, … of its row.

const WG: u32 = 256u;

struct Params {
    n: u32,
    eps: f32,
    n_rows: u32,
    parts: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> g: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read_write> y: array<vec4<f32>>;

// Vec4 i of x: the sum of its parts.
fn xv(i: u32) -> vec4<f32> {
    var v = x[i];
    for (var s = 1u; s < p.parts; s++) {
        v += x[s * p.n_rows * (p.n / 4u) + i];
    }
    return v;
}

@compute @workgroup_size(WG)
fn main(ids: Ids, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let row = wid.y * nwg.x + wid.x;
    if row >= p.n_rows {
        return;
    }
    let n4 = p.n / 4u;
    let base = row * n4;
    var ss = 0.0;
    for (var i = ids.lid; i < n4; i += WG) {
        let v = xv(base + i);
        ss += dot(v, v);
    }
    let scale = inverseSqrt(wg_sum(ss, ids) / f32(p.n) + p.eps);
    for (var i = ids.lid; i < n4; i += WG) {
        y[base + i] = xv(base + i) * scale * g[i];
    }
}
