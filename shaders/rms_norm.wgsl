// RMSNorm: y = x / sqrt(mean(x²) + eps) * g, ggml's formula.
//
// Bindings: 0 params (uniform), 1 x (n_rows × n), 2 g (n), 3 y (n_rows × n).
// Dispatch: one workgroup per row; rows past 65535 fold into y
// (row = wid.y · nwg.x + wid.x).
// Each invocation owns elements lid, lid + WG, lid + 2·WG, … of its row.

const WG: u32 = 256u;

struct Params {
    n: u32,
    eps: f32,
    n_rows: u32,
    _pad: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<f32>;
@group(0) @binding(2) var<storage, read> g: array<f32>;
@group(0) @binding(3) var<storage, read_write> y: array<f32>;

@compute @workgroup_size(WG)
fn main(ids: Ids, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let row = wid.y * nwg.x + wid.x;
    if row >= p.n_rows {
        return;
    }
    let base = row * p.n;
    var ss = 0.0;
    for (var i = ids.lid; i < p.n; i += WG) {
        let v = x[base + i];
        ss += v * v;
    }
    let scale = inverseSqrt(wg_sum(ss, ids) / f32(p.n) + p.eps);
    for (var i = ids.lid; i < p.n; i += WG) {
        y[base + i] = x[base + i] * scale * g[i];
    }
}
