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
// Dispatch: one workgroup per token. Invocation i owns cache words i and
// i + WG; a word holds two adjacent elements, which is exactly one rope
// pair in the k_pe part (rope rotates pairs (2i, 2i+1)).

const WG: u32 = 256u;
/// host: gpu::ops::MAX_LATENT
const MAX_LATENT: u32 = 512u;
/// host: gpu::ops::MAX_ROPE
const MAX_ROPE: u32 = 64u;
const_assert MAX_LATENT + MAX_ROPE <= 4u * WG;

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

// Cache word w of the token whose ckv row starts at c0 (zeros past the
// row): its two elements, summed over the parts.
fn pair_at(c0: u32, w: u32, row_words: u32) -> vec2<f32> {
    var v = vec2<f32>(0.0);
    if w < row_words {
        v = vec2<f32>(c_at(c0 + 2u * w), c_at(c0 + 2u * w + 1u));
    }
    return v;
}

// kv_a_norm's pair for cache word w (ones in the rope part).
fn g_pair(w: u32) -> vec2<f32> {
    var v = vec2<f32>(1.0);
    if 2u * w < p.n_kv {
        v = vec2<f32>(g[2u * w], g[2u * w + 1u]);
    }
    return v;
}

// Word w of the row into the cache: the latent pair normed, or the rope
// pair rotated.
fn put_pair(tok: u32, base: u32, w: u32, row_words: u32, v: vec2<f32>, gw: vec2<f32>, scale: f32) {
    if w < row_words {
        let e = 2u * w;
        var o = v * scale * gw;
        if e >= p.n_kv {
            let cs = steps[tok].rope[(e - p.n_kv) / 2u].xy;
            o = vec2<f32>(v.x * cs.x - v.y * cs.y, v.x * cs.y + v.y * cs.x);
        }
        cache[base + w] = pack2x16float(o);
    }
}

@compute @workgroup_size(WG)
fn main(ids: Ids, @builtin(workgroup_id) wid: vec3<u32>) {
    let tok = wid.x;
    let c0 = tok * (p.n_kv + p.n_rot);
    let row_words = (p.n_kv + p.n_rot) / 2u;
    // An invocation's two words (rows are at most 2·WG words: plan::check),
    // every load issued before the norm's reduction, which waits for one
    // round of them, not one a word.
    let w0 = ids.lid;
    let w1 = ids.lid + WG;
    let v0 = pair_at(c0, w0, row_words);
    let v1 = pair_at(c0, w1, row_words);
    let g0 = g_pair(w0);
    let g1 = g_pair(w1);
    let base = steps[tok].pos * row_words;
    let ss = select(0.0, dot(v0, v0), 2u * w0 < p.n_kv) + select(0.0, dot(v1, v1), 2u * w1 < p.n_kv);
    let scale = inverseSqrt(wg_sum(ss, ids) / f32(p.n_kv) + p.eps);
    put_pair(tok, base, w0, row_words, v0, g0, scale);
    put_pair(tok, base, w1, row_words, v1, g1, scale);
}
