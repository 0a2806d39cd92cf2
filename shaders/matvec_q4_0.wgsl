// Decode matvec over a repacked Q4_0 matrix: y[r] = Σ_k W[r][k] · x[k].
//
// Bindings: 0 params (uniform), 1 scales (array<u32>: two f16 block scales
// per word, see src/gpu/repack.rs), 2 nibbles (array<vec4<u32>>: one 16-byte
// block each), 3 x (array<vec4<f32>>, cols/4), 4 y (array<f32>, rows).
// Dispatch: ceil(rows / RPW) workgroups, folded into y past 65535.
// Each workgroup owns RPW rows; TPR consecutive invocations share a row and
// stride over its blocks, then seg_sum combines their partial sums.

const WG: u32 = 256u;
const TPR: u32 = 32u;
const RPW: u32 = WG / TPR;

struct Params {
    rows: u32,
    // blocks of 32 weights per row (cols / 32)
    blocks: u32,
    _pad0: u32,
    _pad1: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> scales: array<u32>;
@group(0) @binding(2) var<storage, read> nibbles: array<vec4<u32>>;
@group(0) @binding(3) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(4) var<storage, read_write> y: array<f32>;

// Byte j of a block holds weight j in its low nibble and weight j+16 in its
// high nibble; `w` carries bytes 4i..4i+3, so `lo` is x[4i..4i+4] and `hi`
// is x[16+4i..16+4i+4].
fn nibble_dot(w: u32, lo: vec4<f32>, hi: vec4<f32>) -> f32 {
    let b = vec4<u32>(w, w >> 8u, w >> 16u, w >> 24u);
    let l = vec4<f32>(b & vec4<u32>(0xFu)) - 8.0;
    let h = vec4<f32>((b >> vec4<u32>(4u)) & vec4<u32>(0xFu)) - 8.0;
    return dot(l, lo) + dot(h, hi);
}

@compute @workgroup_size(WG)
fn main(ids: Ids, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let row = (wid.y * nwg.x + wid.x) * RPW + ids.lid / TPR;
    let t = ids.lid % TPR;
    var acc = 0.0;
    if row < p.rows {
        for (var b = t; b < p.blocks; b += TPR) {
            let i = row * p.blocks + b;
            let d = unpack2x16float(scales[i >> 1u])[i & 1u];
            let q = nibbles[i];
            let xb = b * 8u;
            acc += d * (nibble_dot(q.x, x[xb], x[xb + 4u]) + nibble_dot(q.y, x[xb + 1u], x[xb + 5u])
                + nibble_dot(q.z, x[xb + 2u], x[xb + 6u]) + nibble_dot(q.w, x[xb + 3u], x[xb + 7u]));
        }
    }
    let total = seg_sum(acc, ids, TPR);
    if t == 0u && row < p.rows {
        y[row] = total;
    }
}
