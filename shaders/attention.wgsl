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
// empty; prefill (gpu/plan/prefill.rs) dispatches (1, head blocks, tokens),
// one split per token over its causal prefix.
//
// Bindings: 0 params (uniform), 1 steps (array<Step>: n_pos, n_split, rope
// table), 2 q_abs (array<vec4<f32>>, tokens × n_head × N_KV/4), 3 q
// (array<f32>, tokens × n_head × (n_nope + n_rot), the q_b output: q_pe is
// its tail, roped here), 4 cache (array<vec2<u32>>: f16 rows of
// (N_KV + n_rot)/4 vec2s), 5 o (array<vec4<f32>>, N_KV/4 per slot),
// 6 ml (array<vec2<f32>>, one per slot); slot = (z·n_head + h)·split_stride + s.
//
// What each invocation owns in a tile:
//   scores:  positions 4u .. 4u + 4 (u = lid / 32) of heads 10c .. 10c + 10
//            (c = lid / 16 % 2) over the 4-dim chunks j, j + 16, … (j = lid
//            % 16): 10 vec4 accumulators (a head's 4 positions each), so each
//            q load feeds 16 FMAs; summed over j by seg_sum4;
//   softmax: invocation h < 20 keeps head h's m and l, turns the tile's
//            scores into probabilities and the rescale factor;
//   values:  dims 4v .. 4v + 4 (v = lid % 128) of heads 8g .. 8g + 8 and
//            16 + 2g, 17 + 2g (g = lid / 128): 10 vec4 accumulators.
// The tile's scores, probabilities and rescale factors are double-buffered,
// so a tile costs two barriers. Heads past n_head in the last block compute
// on whatever q_abs follows (bounds-checked) and are never written.

const WG: u32 = 256u;
const TILE: u32 = 32u;
// invocations sharing a score block's chunks
const J: u32 = 16u;
// heads per workgroup, five vec4s
const HB: u32 = 20u;
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
// (n_rot <= 64).
var<workgroup> qr: array<vec4<f32>, 320>;
// Per-head values, [head / 4] rows of 5 vec4s: the tile's scores, then
// probabilities ([buffer][position], from 0), the rescale of each head's
// running sums ([buffer], from CORR) and finally 1 / l (at INV_L).
var<workgroup> sp: array<vec4<f32>, 335>;
const CORR: u32 = 2u * TILE * 5u;
const INV_L: u32 = CORR + 10u;

// One value invocation's share of a per-head row: heads 8g .. 8g + 8 in a
// and b, heads 16 + 2g and 17 + 2g in e.
struct Part {
    a: vec4<f32>,
    b: vec4<f32>,
    e: vec2<f32>,
}

// Ten vec4 accumulators: a value invocation's heads in Part's order, or a
// score invocation's ten heads (4 positions each).
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

// q · the chunk of four positions.
fn pos4(q: vec4<f32>, x0: vec4<f32>, x1: vec4<f32>, x2: vec4<f32>, x3: vec4<f32>) -> vec4<f32> {
    return vec4<f32>(dot(q, x0), dot(q, x1), dot(q, x2), dot(q, x3));
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

// acc += the ten heads' q (q_abs vec4 index qi, head stride hs) · chunk.
fn add_chunk(acc: ptr<function, Acc>, qi: u32, hs: u32, x0: vec4<f32>, x1: vec4<f32>,
    x2: vec4<f32>, x3: vec4<f32>, rope: bool) {
    (*acc).h0 += pos4(qv(qi, rope), x0, x1, x2, x3);
    (*acc).h1 += pos4(qv(qi + hs, rope), x0, x1, x2, x3);
    (*acc).h2 += pos4(qv(qi + 2u * hs, rope), x0, x1, x2, x3);
    (*acc).h3 += pos4(qv(qi + 3u * hs, rope), x0, x1, x2, x3);
    (*acc).h4 += pos4(qv(qi + 4u * hs, rope), x0, x1, x2, x3);
    (*acc).h5 += pos4(qv(qi + 5u * hs, rope), x0, x1, x2, x3);
    (*acc).h6 += pos4(qv(qi + 6u * hs, rope), x0, x1, x2, x3);
    (*acc).h7 += pos4(qv(qi + 7u * hs, rope), x0, x1, x2, x3);
    (*acc).h8 += pos4(qv(qi + 8u * hs, rope), x0, x1, x2, x3);
    (*acc).h9 += pos4(qv(qi + 9u * hs, rope), x0, x1, x2, x3);
}

// A query vec4: roped q_pe from qr, or q_abs.
fn qv(i: u32, rope: bool) -> vec4<f32> {
    if rope {
        return qr[i];
    }
    return q_abs[i];
}

// Partial scores of four rows (vec2 indices r0..r3) over their chunks j,
// j + J, … (latent, then rope) for ten heads: head 10c's q_abs at qb, its
// roped q_pe at qrb. No branches on data, so the rows' cache loads can be
// in flight at once.
fn partial_scores(r0: u32, r1: u32, r2: u32, r3: u32, j: u32, qb: u32, qrb: u32) -> Acc {
    var s = Acc(vec4<f32>(0.0), vec4<f32>(0.0), vec4<f32>(0.0), vec4<f32>(0.0), vec4<f32>(0.0),
        vec4<f32>(0.0), vec4<f32>(0.0), vec4<f32>(0.0), vec4<f32>(0.0), vec4<f32>(0.0));
    for (var i = 0u; i < KV4 / J; i++) {
        let w = j + J * i;
        add_chunk(&s, qb + w, KV4, f16x4(cache[r0 + w]), f16x4(cache[r1 + w]),
            f16x4(cache[r2 + w]), f16x4(cache[r3 + w]), false);
    }
    // n_rot <= 64: at most one rope chunk each; a chunk past n_rot reloads
    // the row's last one and counts zero.
    let rot4 = p.n_rot / 4u;
    let w = min(j, rot4 - 1u);
    let live = j < rot4;
    let z = vec4<f32>(0.0);
    add_chunk(&s, qrb + j, 16u, select(z, f16x4(cache[r0 + KV4 + w]), live),
        select(z, f16x4(cache[r1 + KV4 + w]), live), select(z, f16x4(cache[r2 + KV4 + w]), live),
        select(z, f16x4(cache[r3 + KV4 + w]), live), true);
    return s;
}

// Head h's scores of tile positions t .. t + 4 (those below n) into sp.
fn put_scores(buf: u32, h: u32, t: u32, n: u32, v: vec4<f32>) {
    for (var r = 0u; r < 4u; r++) {
        if t + r < n {
            sp[buf * TILE * 5u + (t + r) * 5u + h / 4u][h % 4u] = v[r] * p.scale;
        }
    }
}

// Head h's softmax step over the tile's n scores in buffer `buf`: the
// scores become exp(score − m_new), the rescale factor goes to sp at CORR.
// The loops run over the whole tile (constant trip count, unrolled, loads
// in flight together); slots t >= n hold stale values and count as NEG.
fn softmax_tile(h: u32, buf: u32, n: u32, m: ptr<function, f32>, l: ptr<function, f32>) {
    let base = buf * TILE * 5u + h / 4u;
    let c = h % 4u;
    var mx = NEG;
    for (var t = 0u; t < TILE; t++) {
        mx = max(mx, select(NEG, sp[base + 5u * t][c], t < n));
    }
    let m_new = max(*m, mx);
    var sum = 0.0;
    for (var t = 0u; t < TILE; t++) {
        let e = exp(select(NEG, sp[base + 5u * t][c], t < n) - m_new);
        sp[base + 5u * t][c] = e;
        sum += e;
    }
    let f = exp(*m - m_new);
    sp[CORR + buf * 5u + h / 4u][c] = f;
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
fn main(ids: Ids, @builtin(workgroup_id) wid: vec3<u32>) {
    let s = wid.x;
    let hb = wid.y * HB;
    let z = wid.z;
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
    let t = 4u * (ids.lid / 32u);
    let hc = 10u * (ids.lid / J % 2u);
    let j = ids.lid % J;
    let v = ids.lid % 128u;
    let g = ids.lid / 128u;
    var m = NEG;
    var l = 0.0;
    var acc = Acc(vec4<f32>(0.0), vec4<f32>(0.0), vec4<f32>(0.0), vec4<f32>(0.0), vec4<f32>(0.0),
        vec4<f32>(0.0), vec4<f32>(0.0), vec4<f32>(0.0), vec4<f32>(0.0), vec4<f32>(0.0));
    var buf = 0u;
    for (var tb = t0; tb < t1; tb += TILE) {
        let n = min(TILE, t1 - tb);
        var sc = Acc(vec4<f32>(0.0), vec4<f32>(0.0), vec4<f32>(0.0), vec4<f32>(0.0),
            vec4<f32>(0.0), vec4<f32>(0.0), vec4<f32>(0.0), vec4<f32>(0.0), vec4<f32>(0.0),
            vec4<f32>(0.0));
        if t < n {
            // Rows past the tile's last repeat it; their scores are not kept.
            let last = tb + n - 1u;
            sc = partial_scores(min(tb + t, last) * row4, min(tb + t + 1u, last) * row4,
                min(tb + t + 2u, last) * row4, min(tb + t + 3u, last) * row4, j,
                qb + hc * KV4, hc * 16u);
        }
        sc = Acc(seg_sum4(sc.h0, ids, J), seg_sum4(sc.h1, ids, J), seg_sum4(sc.h2, ids, J),
            seg_sum4(sc.h3, ids, J), seg_sum4(sc.h4, ids, J), seg_sum4(sc.h5, ids, J),
            seg_sum4(sc.h6, ids, J), seg_sum4(sc.h7, ids, J), seg_sum4(sc.h8, ids, J),
            seg_sum4(sc.h9, ids, J));
        if j == 0u {
            put_scores(buf, hc, t, n, sc.h0);
            put_scores(buf, hc + 1u, t, n, sc.h1);
            put_scores(buf, hc + 2u, t, n, sc.h2);
            put_scores(buf, hc + 3u, t, n, sc.h3);
            put_scores(buf, hc + 4u, t, n, sc.h4);
            put_scores(buf, hc + 5u, t, n, sc.h5);
            put_scores(buf, hc + 6u, t, n, sc.h6);
            put_scores(buf, hc + 7u, t, n, sc.h7);
            put_scores(buf, hc + 8u, t, n, sc.h8);
            put_scores(buf, hc + 9u, t, n, sc.h9);
        }
        workgroupBarrier();
        if ids.lid < HB {
            softmax_tile(ids.lid, buf, n, &m, &l);
        }
        workgroupBarrier();
        if v < KV4 {
            scale_acc(&acc, part(CORR + buf * 5u, g));
            for (var i = 0u; i < n; i++) {
                let x = f16x4(cache[(tb + i) * row4 + v]);
                add_position(&acc, x, part(buf * TILE * 5u + 5u * i, g));
            }
        }
        buf ^= 1u;
    }
    if ids.lid < HB {
        sp[INV_L + ids.lid / 4u][ids.lid % 4u] = 1.0 / l;
        if ids.lid < heads {
            ml[slot0 + ids.lid * p.split_stride] = vec2<f32>(m + log(l), 1.0);
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
