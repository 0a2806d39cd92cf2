// MLA attention over the latent cache, absorbed form, split over positions
// (flash-decoding). One workgroup owns one split of one token's positions
// for a block of HB = 20 heads (GLM-4.7-Flash's heads are one block), so
// each cached row is read from memory once for all of them. Per tile of
// TILE positions the heads are the rows of two small matrix products:
//   S = Q · Cᵀ · scale   Q: the block's [q_abs ‖ rope(q_pe)], C: the tile's rows
//   O += P · C[:, :N_KV] P = exp(S − m), m and l = Σ P kept per head (online softmax)
// Split s of token z covers positions [s·len, min((s+1)·len, n_pos)),
// len = ceil(n_pos / n_split), both from z's step record. Each split is
// written normalised, as o and (m + ln l, 1), so one split is already the
// answer (prefill) and attn_v_b's matvec (matvec.wgsl, COMBINE) merges
// several. A split with no positions writes l = 0 and leaves o alone.
//
// Used by both plans: decode (gpu/plan/mod.rs) dispatches (MAX_SPLITS, head
// blocks, 1), the splits past the token's n_split only marking their slots
// empty; prefill (gpu/plan/prefill.rs) dispatches (splits, head blocks,
// tokens), each token's causal prefix in the chunk's splits (one for a
// full chunk; many for a few tokens deep in the context).
//
// Bindings: 0 params (uniform), 1 steps (array<Step>: n_pos, n_split, rope
// table), 2 q_abs (array<vec4<f32>>, tokens × n_head × N_KV/4), 3 q
// (array<f32>, tokens × n_head × (n_nope + n_rot), the q_b output: q_pe is
// its tail, roped here), 4 cache (array<vec2<u32>>: f16 rows of
// (N_KV + n_rot)/4 vec2s), 5 o (array<vec4<f32>>, N_KV/4 per slot),
// 6 ml (array<vec2<f32>>, one per slot); slot = (z·n_head + h)·split_stride + s.
//
// What each invocation owns in a tile:
//   scores:  position lid / 8 and its 4-dim chunks j, j + 8, … (j = lid % 8)
//            for all 20 heads (5 vec4 accumulators), summed over j by seg_sum4;
//   softmax: invocations 8h .. 8h + 8 keep head h's m and l and turn the
//            tile's scores into probabilities (four positions each) and
//            the rescale factor;
//   values:  dims 4v .. 4v + 4 (v = lid % 128) of heads 8g .. 8g + 8 and
//            16 + 2g, 17 + 2g (g = lid / 128): 10 vec4 accumulators.
// The tile's scores, probabilities and rescale factors are double-buffered,
// so a tile costs two barriers. Heads past n_head in the last block compute
// on whatever q_abs follows (bounds-checked) and are never written.

const WG: u32 = 256u;
/// host: gpu::ops::ATTENTION_TILE
const TILE: u32 = 32u;
// invocations per position in the scores
const J: u32 = WG / TILE;
/// Heads per workgroup, five vec4s.
/// host: gpu::ops::ATTENTION_HEADS
const HB: u32 = 20u;
/// host: gpu::ops::MAX_ROPE
const MAX_ROPE: u32 = 64u;
// Finite "minus infinity": exp(NEG - m) underflows to 0 without NaNs.
const NEG: f32 = -3.0e38;

// The latent width (n_kv, a multiple of 64 up to 512), fixed per pipeline
// so the score loop has a constant trip count (unrolled, its cache loads
// issued together) and the heads' q_abs strides are constants.
override N_KV: u32 = 512u;
override KV4: u32 = N_KV / 4u;

struct Params {
    n_rot: u32,
    n_nope: u32,
    scale: f32,
    // split slots per head in o and ml (the most splits there can be)
    split_stride: u32,
    n_head: u32,
    _pad1: u32,
    _pad2: u32,
    _pad3: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> steps: array<Step>;
@group(0) @binding(2) var<storage, read> q_abs: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read> q: array<f32>;
@group(0) @binding(4) var<storage, read> cache: array<vec2<u32>>;
@group(0) @binding(5) var<storage, read_write> o: array<vec4<f32>>;
@group(0) @binding(6) var<storage, read_write> ml: array<vec2<f32>>;

// Roped q_pe of the block's heads: head k's dims 4w .. 4w + 4 at 16k + w
// (n_rot <= MAX_ROPE).
var<workgroup> qr: array<vec4<f32>, HB * MAX_ROPE / 4u>;
// Per-head values, [head / 4] rows of 5 vec4s: the tile's scores, then
// probabilities ([buffer][position], from 0), the rescale of each head's
// running sums ([buffer], from CORR) and finally 1 / l (at INV_L).
var<workgroup> sp: array<vec4<f32>, 335>;
const CORR: u32 = 2u * TILE * 5u;
const INV_L: u32 = CORR + 10u;

// Per-head vec4s of the 20 heads (scores: one value per head).
struct Heads {
    a: vec4<f32>,
    b: vec4<f32>,
    c: vec4<f32>,
    d: vec4<f32>,
    e: vec4<f32>,
}

// One value invocation's share of a per-head row: heads 8g .. 8g + 8 in a
// and b, heads 16 + 2g and 17 + 2g in e.
struct Part {
    a: vec4<f32>,
    b: vec4<f32>,
    e: vec2<f32>,
}

// One value invocation's accumulators, its heads in Part's order.
struct Acc {
    h0: vec4<f32>,
    h1: vec4<f32>,
    h2: vec4<f32>,
    h3: vec4<f32>,
    h4: vec4<f32>,
    h5: vec4<f32>,
    h6: vec4<f32>,
    h7: vec4<f32>,
    h8: vec4<f32>,
    h9: vec4<f32>,
}

fn f16x4(c: vec2<u32>) -> vec4<f32> {
    return vec4<f32>(unpack2x16float(c.x), unpack2x16float(c.y));
}

// acc + q · x as four fused multiply-adds: a dot product and then an add
// would be five instructions (the add cannot be folded into the dot's
// last fma without reassociating).
fn dacc(acc: f32, q: vec4<f32>, x: vec4<f32>) -> f32 {
    return fma(q.w, x.w, fma(q.z, x.z, fma(q.y, x.y, fma(q.x, x.x, acc))));
}

// s + x · q_abs of four consecutive heads, the first at vec4 index i.
fn qacc4(s: vec4<f32>, i: u32, x: vec4<f32>) -> vec4<f32> {
    return vec4<f32>(dacc(s.x, q_abs[i], x), dacc(s.y, q_abs[i + KV4], x),
        dacc(s.z, q_abs[i + 2u * KV4], x), dacc(s.w, q_abs[i + 3u * KV4], x));
}

// s + x · roped q_pe of four consecutive heads, the first at qr index i.
fn racc4(s: vec4<f32>, i: u32, x: vec4<f32>) -> vec4<f32> {
    return vec4<f32>(dacc(s.x, qr[i], x), dacc(s.y, qr[i + 16u], x), dacc(s.z, qr[i + 32u], x),
        dacc(s.w, qr[i + 48u], x));
}

// Roped q_pe of the block's heads into qr (zeros past n_head and n_rot).
fn rope_queries(z: u32, hb: u32, heads: u32, lid: u32) {
    let n_qk = p.n_nope + p.n_rot;
    for (var i = lid; i < HB * 16u; i += WG) {
        let k = i / 16u;
        let w = i % 16u;
        var r = vec4<f32>(0.0);
        if k < heads && 4u * w < p.n_rot {
            let b = (z * p.n_head + hb + k) * n_qk + p.n_nope + 4u * w;
            let c0 = steps[z].rope[2u * w].xy;
            let c1 = steps[z].rope[2u * w + 1u].xy;
            r = vec4<f32>(q[b] * c0.x - q[b + 1u] * c0.y, q[b] * c0.y + q[b + 1u] * c0.x,
                q[b + 2u] * c1.x - q[b + 3u] * c1.y, q[b + 2u] * c1.y + q[b + 3u] * c1.x);
        }
        qr[i] = r;
    }
}

// Partial scores of the row at vec2 index `row` over its chunks j, j + J, …
// (latent, then rope) for the block's heads; q_abs of head hb at qb. No
// branches, so every cache load of the row can be in flight at once.
fn partial_scores(row: u32, j: u32, qb: u32) -> Heads {
    var s = Heads(vec4<f32>(0.0), vec4<f32>(0.0), vec4<f32>(0.0), vec4<f32>(0.0), vec4<f32>(0.0));
    for (var i = 0u; i < KV4 / J; i++) {
        let w = j + J * i;
        let x = f16x4(cache[row + w]);
        let qi = qb + w;
        s.a = qacc4(s.a, qi, x);
        s.b = qacc4(s.b, qi + 4u * KV4, x);
        s.c = qacc4(s.c, qi + 8u * KV4, x);
        s.d = qacc4(s.d, qi + 12u * KV4, x);
        s.e = qacc4(s.e, qi + 16u * KV4, x);
    }
    // n_rot <= 64: at most two rope chunks each; a chunk past n_rot reloads
    // the row's last one and counts zero.
    let rot4 = p.n_rot / 4u;
    for (var i = 0u; i < 2u; i++) {
        let w = j + J * i;
        let x = select(vec4<f32>(0.0), f16x4(cache[row + KV4 + min(w, rot4 - 1u)]), w < rot4);
        s.a = racc4(s.a, w, x);
        s.b = racc4(s.b, w + 64u, x);
        s.c = racc4(s.c, w + 128u, x);
        s.d = racc4(s.d, w + 192u, x);
        s.e = racc4(s.e, w + 256u, x);
    }
    return s;
}

// The softmax step of head h (h < HB) over the tile's n scores in buffer
// `buf`, run by the head's 8 invocations (q = lid % 8, positions 4q ..
// 4q + 4; so every head's step runs at once): the scores become
// exp(score − m_new), the rescale factor goes to sp at CORR, and each of
// the 8 keeps the head's m and l. Invocations with h >= HB (lid >= 160)
// take part in the reductions on head HB − 1 and write nothing. Contains
// barriers (seg_max, seg_sum): every invocation calls it.
fn softmax_tile(h: u32, q: u32, buf: u32, n: u32, m: ptr<function, f32>, l: ptr<function, f32>, ids: Ids) {
    let hh = min(h, HB - 1u);
    let base = buf * TILE * 5u + hh / 4u;
    let c = hh % 4u;
    let t = 4u * q;
    let valid = vec4<u32>(t) + vec4<u32>(0u, 1u, 2u, 3u) < vec4<u32>(n);
    // Slots t >= n hold stale values.
    let sc = select(vec4<f32>(NEG), vec4<f32>(sp[base + 5u * t][c], sp[base + 5u * t + 5u][c],
        sp[base + 5u * t + 10u][c], sp[base + 5u * t + 15u][c]), valid);
    let m_new = max(*m, seg_max(max(max(sc.x, sc.y), max(sc.z, sc.w)), ids, 8u));
    let e = select(vec4<f32>(0.0), exp(sc - vec4<f32>(m_new)), valid);
    let sum = seg_sum(e.x + e.y + e.z + e.w, ids, 8u);
    let f = exp(*m - m_new);
    if h < HB {
        sp[base + 5u * t][c] = e.x;
        sp[base + 5u * t + 5u][c] = e.y;
        sp[base + 5u * t + 10u][c] = e.z;
        sp[base + 5u * t + 15u][c] = e.w;
        if q == 0u {
            sp[CORR + buf * 5u + h / 4u][c] = f;
        }
    }
    *l = *l * f + sum;
    *m = m_new;
}

// Group g's share of the per-head row of sp at i.
fn part(i: u32, g: u32) -> Part {
    let e = sp[i + 4u];
    return Part(sp[i + 2u * g], sp[i + 2u * g + 1u], select(e.zw, e.xy, g == 0u));
}

// Each head's accumulator times its factor in f.
fn scale_acc(acc: ptr<function, Acc>, f: Part) {
    (*acc).h0 *= f.a.x;
    (*acc).h1 *= f.a.y;
    (*acc).h2 *= f.a.z;
    (*acc).h3 *= f.a.w;
    (*acc).h4 *= f.b.x;
    (*acc).h5 *= f.b.y;
    (*acc).h6 *= f.b.z;
    (*acc).h7 *= f.b.w;
    (*acc).h8 *= f.e.x;
    (*acc).h9 *= f.e.y;
}

// acc += P · x for one position, its probabilities in pr.
fn add_position(acc: ptr<function, Acc>, x: vec4<f32>, pr: Part) {
    (*acc).h0 += pr.a.x * x;
    (*acc).h1 += pr.a.y * x;
    (*acc).h2 += pr.a.z * x;
    (*acc).h3 += pr.a.w * x;
    (*acc).h4 += pr.b.x * x;
    (*acc).h5 += pr.b.y * x;
    (*acc).h6 += pr.b.z * x;
    (*acc).h7 += pr.b.w * x;
    (*acc).h8 += pr.e.x * x;
    (*acc).h9 += pr.e.y * x;
}

// Write head k's output (k relative to the block) if it exists.
fn store(k: u32, hb: u32, slot0: u32, v: u32, val: vec4<f32>) {
    if hb + k < p.n_head {
        o[(slot0 + k * p.split_stride) * KV4 + v] = val;
    }
}

@compute @workgroup_size(WG)
fn main(ids: Ids, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let s = wid.x;
    let hb = wid.y * HB;
    // Tokens from the last: a causal chunk's later tokens attend over more
    // positions, so the longest workgroups start first and the shortest
    // fill the tail.
    let z = nwg.z - 1u - wid.z;
    let heads = min(HB, p.n_head - hb);
    let n_split = steps[z].n_split;
    let n_pos = steps[z].n_pos;
    let len = (n_pos + n_split - 1u) / n_split;
    let t0 = s * len;
    let t1 = min(t0 + len, n_pos);
    // Head hb + k's slot is slot0 + k · split_stride.
    let slot0 = (z * p.n_head + hb) * p.split_stride + s;
    if s >= n_split || t0 >= t1 {
        // Empty slots are marked for the combine in attn_v_b's matvec,
        // which reads every slot.
        if ids.lid < heads {
            ml[slot0 + ids.lid * p.split_stride] = vec2<f32>(NEG, 0.0);
        }
        return;
    }
    rope_queries(z, hb, heads, ids.lid);
    workgroupBarrier();

    let row4 = KV4 + p.n_rot / 4u;
    let qb = (z * p.n_head + hb) * KV4;
    let t = ids.lid / J;
    let j = ids.lid % J;
    let v = ids.lid % 128u;
    let g = ids.lid / 128u;
    // Softmax: head sh, positions 4·sq .. 4·sq + 4 of a tile.
    let sh = ids.lid / 8u;
    let sq = ids.lid % 8u;
    var m = NEG;
    var l = 0.0;
    var acc = Acc(vec4<f32>(0.0), vec4<f32>(0.0), vec4<f32>(0.0), vec4<f32>(0.0), vec4<f32>(0.0),
        vec4<f32>(0.0), vec4<f32>(0.0), vec4<f32>(0.0), vec4<f32>(0.0), vec4<f32>(0.0));
    var buf = 0u;
    for (var tb = t0; tb < t1; tb += TILE) {
        let n = min(TILE, t1 - tb);
        var sc = Heads(vec4<f32>(0.0), vec4<f32>(0.0), vec4<f32>(0.0), vec4<f32>(0.0), vec4<f32>(0.0));
        if t < n {
            sc = partial_scores((tb + t) * row4, j, qb);
        }
        sc = Heads(seg_sum4(sc.a, ids, J), seg_sum4(sc.b, ids, J), seg_sum4(sc.c, ids, J),
            seg_sum4(sc.d, ids, J), seg_sum4(sc.e, ids, J));
        // Only positions t < n are read back.
        if j == 0u && t < n {
            let i = buf * TILE * 5u + 5u * t;
            sp[i] = sc.a * p.scale;
            sp[i + 1u] = sc.b * p.scale;
            sp[i + 2u] = sc.c * p.scale;
            sp[i + 3u] = sc.d * p.scale;
            sp[i + 4u] = sc.e * p.scale;
        }
        workgroupBarrier();
        softmax_tile(sh, sq, buf, n, &m, &l, ids);
        workgroupBarrier();
        if v < KV4 {
            scale_acc(&acc, part(CORR + buf * 5u, g));
            // Four positions a step, their loads issued together (the
            // driver does not overlap a loop's load-then-use iterations;
            // H200 `--no-coopmat` pp512 @ d4096 +0.8%, session 39), then the
            // tail one at a time.
            var i = 0u;
            for (; i + 4u <= n; i += 4u) {
                let r = (tb + i) * row4 + v;
                let x0 = f16x4(cache[r]);
                let x1 = f16x4(cache[r + row4]);
                let x2 = f16x4(cache[r + 2u * row4]);
                let x3 = f16x4(cache[r + 3u * row4]);
                let at = buf * TILE * 5u + 5u * i;
                add_position(&acc, x0, part(at, g));
                add_position(&acc, x1, part(at + 5u, g));
                add_position(&acc, x2, part(at + 10u, g));
                add_position(&acc, x3, part(at + 15u, g));
            }
            for (; i < n; i++) {
                let x = f16x4(cache[(tb + i) * row4 + v]);
                add_position(&acc, x, part(buf * TILE * 5u + 5u * i, g));
            }
        }
        buf ^= 1u;
    }
    if sq == 0u && sh < HB {
        sp[INV_L + sh / 4u][sh % 4u] = 1.0 / l;
        if sh < heads {
            ml[slot0 + sh * p.split_stride] = vec2<f32>(m + log(l), 1.0);
        }
    }
    workgroupBarrier();
    if v < KV4 {
        scale_acc(&acc, part(INV_L, g));
        let h = 8u * g;
        store(h, hb, slot0, v, acc.h0);
        store(h + 1u, hb, slot0, v, acc.h1);
        store(h + 2u, hb, slot0, v, acc.h2);
        store(h + 3u, hb, slot0, v, acc.h3);
        store(h + 4u, hb, slot0, v, acc.h4);
        store(h + 5u, hb, slot0, v, acc.h5);
        store(h + 6u, hb, slot0, v, acc.h6);
        store(h + 7u, hb, slot0, v, acc.h7);
        store(16u + 2u * g, hb, slot0, v, acc.h8);
        store(17u + 2u * g, hb, slot0, v, acc.h9);
    }
}
