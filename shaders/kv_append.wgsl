// Appends tokens' rows to one layer's latent KV cache: for token t,
// row steps[t].pos = [RMSNorm(c[0..n_kv]) · g ‖ rope(c[n_kv..n_kv + n_rot])]
// in f16, c = ckv[off + t·(n_kv + n_rot) ..], the sum of ckv's `parts`
// planes (`plane` floats apart: a split-K matmul's partial sums,
// ops::matmul_k_parts). The prefill's kv_a planes follow q_a's in one
// buffer (`off` floats in), so that kv_append reads a buffer already in
// the read state and runs beside q_b with no barrier.
//
// Bindings: 0 params (uniform), 1 steps (array<Step>: position, rope
// table), 2 ckv (array<f32>, kv_a_mqa output), 3 g (array<f32>,
// kv_a_norm), 4 cache (array<u32>, n_ctx rows of (n_kv + n_rot) / 2 words,
// f16 pairs).
// Dispatch: one workgroup per token. Invocation i owns cache words i, i + WG, …; a
// word holds two adjacent elements, which is exactly one rope pair in the
// k_pe part (rope rotates pairs (2i, 2i+1)).

const WG: u32 = 256u;

struct Params {
    n_kv: u32,
    n_rot: u32,
    eps: f32,
    parts: u32,
    plane: u32,
    off: u32,
    _pad1: u32,
    _pad2: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> steps: array<Step>;
@group(0) @binding(2) var<storage, read> ckv: array<f32>;
@group(0) @binding(3) var<storage, read> g: array<f32>;
@group(0) @binding(4) var<storage, read_write> cache: array<u32>;

// Element i of ckv: the sum of its parts.
fn c_at(i: u32) -> f32 {
    var v = ckv[p.off + i];
    for (var s = 1u; s < p.parts; s++) {
        v += ckv[p.off + s * p.plane + i];
    }
    return v;
}

@compute @workgroup_size(WG)
fn main(ids: Ids, @builtin(workgroup_id) wid: vec3<u32>) {
    let tok = wid.x;
    let c0 = tok * (p.n_kv + p.n_rot);
    var ss = 0.0;
    for (var i = ids.lid; i < p.n_kv; i += WG) {
        let v = c_at(c0 + i);
        ss += v * v;
    }
    let scale = inverseSqrt(wg_sum(ss, ids) / f32(p.n_kv) + p.eps);
    let row_words = (p.n_kv + p.n_rot) / 2u;
    let base = steps[tok].pos * row_words;
    for (var w = ids.lid; w < row_words; w += WG) {
        let e = 2u * w;
        var v: vec2<f32>;
        if e < p.n_kv {
            v = vec2<f32>(c_at(c0 + e), c_at(c0 + e + 1u)) * scale * vec2<f32>(g[e], g[e + 1u]);
        } else {
            let a = c_at(c0 + e);
            let b = c_at(c0 + e + 1u);
            let cs = steps[tok].rope[(e - p.n_kv) / 2u].xy;
            v = vec2<f32>(a * cs.x - b * cs.y, a * cs.y + b * cs.x);
        }
        cache[base + w] = pack2x16float(v);
    }
}
