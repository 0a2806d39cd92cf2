// The k largest values of a vector with their indices, in order (value
// descending, index ascending on ties), in two passes of this kernel: pass 1
// (FIRST) gives each workgroup a slice of the logits and writes its top k;
// pass 2 runs one workgroup over all those candidates.
//
// Bindings: 0 params (uniform), 1 in_v (array<f32>), 2 in_i (array<u32>;
// only read when !FIRST, where the index of element i is in_i[i]),
// 3 out_v (array<f32>, k per workgroup), 4 out_i (array<u32>).
// Dispatch: (n_wg, 1, 1); workgroup w owns elements [w·len, (w+1)·len).
// Each round every invocation scans its strided elements for the best one
// after the previous round's pick, then wg_max / wg_min_u32 agree on it.

const WG: u32 = 256u;

override FIRST: bool = true;

struct Params {
    n: u32,
    len: u32,
    k: u32,
    _pad: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> in_v: array<f32>;
@group(0) @binding(2) var<storage, read> in_i: array<u32>;
@group(0) @binding(3) var<storage, read_write> out_v: array<f32>;
@group(0) @binding(4) var<storage, read_write> out_i: array<u32>;

fn index_of(i: u32) -> u32 {
    if FIRST {
        return i;
    }
    return in_i[i];
}

@compute @workgroup_size(WG)
fn main(ids: Ids, @builtin(workgroup_id) wid: vec3<u32>) {
    let start = wid.x * p.len;
    let end = min(start + p.len, p.n);
    var prev_v = 3.0e38;
    var prev_i = 0u;
    for (var k = 0u; k < p.k; k++) {
        var best_v = -3.0e38;
        var best_i = 0xFFFFFFFFu;
        for (var i = start + ids.lid; i < end; i += WG) {
            let v = in_v[i];
            let ix = index_of(i);
            let after = v < prev_v || (v == prev_v && ix > prev_i && k > 0u);
            if after && (v > best_v || (v == best_v && ix < best_i)) {
                best_v = v;
                best_i = ix;
            }
        }
        let mv = wg_max(best_v, ids);
        let mi = wg_min_u32(select(0xFFFFFFFFu, best_i, best_v == mv), ids);
        if ids.lid == 0u {
            out_v[wid.x * p.k + k] = mv;
            out_i[wid.x * p.k + k] = mi;
        }
        prev_v = mv;
        prev_i = mi;
    }
}
