// MLA decode attention for short contexts (ops::SHORT_ATTENTION_MAX
// positions or fewer): one workgroup per head and split, so even a few
// dozen positions spread over n_head × n_split workgroups. attention.wgsl,
// which reads each cached row once for all heads, wins on long contexts but
// runs one workgroup per split, too few to hide its per-tile latency when
// the context is short (journal, 2026-11-23 session 4). Both write the same
// splits: for head h and split s, positions [s·len, min((s+1)·len, n_pos)),
// len = ceil(n_pos / n_split), n_split and n_pos from the step record:
//   score_t = (q_abs_h · c_t + rope(q_pe_h) · k_pe_t) · kq_scale
//   m = max score, l = Σ exp(score − m), o = Σ exp(score − m) · c_t / l
// written as o and (m + ln l, 1); attn_v_b's matvec merges them (COMBINE).
// Workgroups with s >= n_split only mark their slot empty; each also
// marks the slots s + k·(grid width) past the grid.
//
// Bindings: 0 params (uniform), 1 steps (array<Step>), 2 q_abs (array<f32>,
// n_head × n_kv), 3 q (array<f32>, n_head × (n_nope + n_rot), the q_b
// output: q_pe is its tail, roped here), 4 cache (array<vec4<u32>>, f16,
// rows of (n_kv + n_rot) / 2 words, a multiple of 4), 5 o (array<vec2<f32>>,
// n_head × split_stride × n_kv / 2), 6 ml (array<vec2<f32>>, n_head ×
// split_stride).
// Dispatch: (S, n_head, 1), S the most splits a token can have (at most
// split_stride). Positions go TILE at a time: SEG = WG / TILE invocations
// per position for the scores, then for the values groups of n_kv / 8
// invocations, each owning 8 latent dims (one 16-byte load per position),
// take every n_groups-th position; the groups' sums are added at the end.
// A split with no positions writes l = 0 and leaves o alone.

const WG: u32 = 256u;
const TILE: u32 = 32u;
const SEG: u32 = WG / TILE;
// Finite "minus infinity": exp(NEG - m) underflows to 0 without NaNs.
const NEG: f32 = -3.0e38;

struct Params {
    n_kv: u32,
    n_rot: u32,
    n_nope: u32,
    scale: f32,
    // split slots per head in o and ml (the most splits there can be)
    split_stride: u32,
    n_head: u32,
    _pad1: u32,
    _pad2: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> steps: array<Step>;
@group(0) @binding(2) var<storage, read> q_abs: array<f32>;
@group(0) @binding(3) var<storage, read> q: array<f32>;
@group(0) @binding(4) var<storage, read> cache: array<vec4<u32>>;
@group(0) @binding(5) var<storage, read_write> o: array<vec2<f32>>;
@group(0) @binding(6) var<storage, read_write> ml: array<vec2<f32>>;

/// host: gpu::ops::MAX_LATENT
const MAX_LATENT: u32 = 512u;
/// host: gpu::ops::MAX_ROPE
const MAX_ROPE: u32 = 64u;
const_assert MAX_LATENT + MAX_ROPE <= 4u * WG;

// The head's full query, [q_abs ‖ roped q_pe], as pairs matching cache
// words: room for the host's widest row with rope up to twice MAX_ROPE.
var<workgroup> qs: array<vec2<f32>, (MAX_LATENT + 2u * MAX_ROPE) / 2u>;
// A tile's scores, then (apart, so no barrier separates reading the one
// and writing the other) its probabilities.
var<workgroup> scores: array<f32, TILE>;
var<workgroup> probs: array<f32, TILE>;
// Value partials of every invocation (two vec4 each), summed over groups.
var<workgroup> partial: array<vec4<f32>, 2u * WG>;

// Query word w of head h (token z): a q_abs pair, or a q_pe pair roped;
// zeros past the row.
fn query_pair(h: u32, z: u32, w: u32, words: u32, kv_words: u32) -> vec2<f32> {
    var v = vec2<f32>(0.0);
    if w < kv_words {
        let b = h * p.n_kv + 2u * w;
        v = vec2<f32>(q_abs[b], q_abs[b + 1u]);
    } else if w < words {
        let i = w - kv_words;
        let b = h * (p.n_nope + p.n_rot) + p.n_nope + 2u * i;
        let a = q[b];
        let c = q[b + 1u];
        let cs = steps[z].rope[i].xy;
        v = vec2<f32>(a * cs.x - c * cs.y, a * cs.y + c * cs.x);
    }
    return v;
}

@compute @workgroup_size(WG)
fn main(ids: Ids, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let s = wid.x;
    let z = wid.z;
    let h = z * p.n_head + wid.y;
    let n_split = steps[z].n_split;
    let n_pos = steps[z].n_pos;
    // Slots past the grid (the decode launches only the splits a short
    // context can have, not split_stride) are marked empty here.
    if ids.lid == 0u {
        for (var e = s + nwg.x; e < p.split_stride; e += nwg.x) {
            ml[h * p.split_stride + e] = vec2<f32>(NEG, 0.0);
        }
    }
    if s >= n_split {
        // Slots past this token's splits are marked empty for the combine
        // in attn_v_b's matvec, which reads every slot.
        if ids.lid == 0u {
            ml[h * p.split_stride + s] = vec2<f32>(NEG, 0.0);
        }
        return;
    }
    let words = (p.n_kv + p.n_rot) / 2u;
    let kv_words = p.n_kv / 2u;
    let len = (n_pos + n_split - 1u) / n_split;
    let t0 = s * len;
    let t1 = min(t0 + len, n_pos);
    let slot = h * p.split_stride + s;
    if t0 >= t1 {
        if ids.lid == 0u {
            ml[slot] = vec2<f32>(NEG, 0.0);
        }
        return;
    }
    // An invocation's two query words (rows are at most 2·WG words:
    // plan::check), both loaded before either is stored.
    let q0 = query_pair(h, z, ids.lid, words, kv_words);
    let q1 = query_pair(h, z, ids.lid + WG, words, kv_words);
    if ids.lid < words {
        qs[ids.lid] = q0;
    }
    if ids.lid + WG < words {
        qs[ids.lid + WG] = q1;
    }
    workgroupBarrier();

    var m = NEG;
    var l = 0.0;
    // Values: invocation i owns latent words 4v .. 4v + 4 (8 dims, one
    // 16-byte load) of every n_groups-th position of a tile, v = i % kv_vec4.
    let kv_vec4 = kv_words / 4u;
    let v = ids.lid % kv_vec4;
    let group = ids.lid / kv_vec4;
    let n_groups = WG / kv_vec4;
    var acc_lo = vec4<f32>(0.0);
    var acc_hi = vec4<f32>(0.0);
    for (var tb = t0; tb < t1; tb += TILE) {
        // scores of positions tb .. tb + TILE, SEG invocations each
        let t = tb + ids.lid / SEG;
        var part = 0.0;
        if t < t1 {
            let row4 = t * words / 4u;
            for (var w = ids.lid % SEG; w < words / 4u; w += SEG) {
                let c = cache[row4 + w];
                part += dot(unpack2x16float(c.x), qs[4u * w]) + dot(unpack2x16float(c.y), qs[4u * w + 1u])
                    + dot(unpack2x16float(c.z), qs[4u * w + 2u]) + dot(unpack2x16float(c.w), qs[4u * w + 3u]);
            }
        }
        let score = seg_sum(part, ids, SEG) * p.scale;
        if ids.lid % SEG == 0u {
            scores[ids.lid / SEG] = select(NEG, score, t < t1);
        }
        workgroupBarrier();
        // Invocation i takes position i % TILE: each TILE-wide segment
        // reduces the tile's max and sum itself (shuffles where a
        // subgroup is TILE lanes). Two loops of TILE serial loads and two
        // barriers more did it before: H200, session 38, the kernel at 64
        // positions 7.11 -> 6.65 us, tg128 +2.4%, @ d512 +2.5%.
        let sc = scores[ids.lid % TILE];
        let m_new = max(m, seg_max(sc, ids, TILE));
        let corr = exp(m - m_new);
        let pr = exp(sc - m_new);
        let psum = seg_sum(pr, ids, TILE);
        if ids.lid < TILE {
            probs[ids.lid] = pr;
        }
        workgroupBarrier();
        acc_lo *= corr;
        acc_hi *= corr;
        let n = min(TILE, t1 - tb);
        if group < n_groups {
            for (var i = group; i < n; i += n_groups) {
                let pr = probs[i];
                let c = cache[(tb + i) * words / 4u + v];
                acc_lo += pr * vec4<f32>(unpack2x16float(c.x), unpack2x16float(c.y));
                acc_hi += pr * vec4<f32>(unpack2x16float(c.z), unpack2x16float(c.w));
            }
        }
        l = l * corr + psum;
        m = m_new;
        workgroupBarrier();
    }
    // Sum the groups' partial values (same m for all groups).
    partial[2u * ids.lid] = acc_lo;
    partial[2u * ids.lid + 1u] = acc_hi;
    workgroupBarrier();
    if group == 0u {
        var lo = vec4<f32>(0.0);
        var hi = vec4<f32>(0.0);
        for (var gi = 0u; gi < n_groups; gi++) {
            lo += partial[2u * (gi * kv_vec4 + v)];
            hi += partial[2u * (gi * kv_vec4 + v) + 1u];
        }
        let base = slot * kv_words + 4u * v;
        let inv = 1.0 / l;
        o[base] = lo.xy * inv;
        o[base + 1u] = lo.zw * inv;
        o[base + 2u] = hi.xy * inv;
        o[base + 3u] = hi.zw * inv;
    }
    if ids.lid == 0u {
        ml[slot] = vec2<f32>(m + log(l), 1.0);
    }
}
