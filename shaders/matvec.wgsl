// Decode matvec entry point, shared by every weight format. The host builds
// it together with one format file (f32.wgsl, q4_0.wgsl, q8_0.wgsl,
// q5_k.wgsl, q6_k.wgsl, …), which binds the weights at 6 (and 7) and
// defines `unit_load(u)`: weight unit `u` (32 consecutive weights of a row;
// units are numbered row-major over the whole buffer) dequantized into
// registers; and one unit-dots file (unit_dots.wgsl, or the format's own
// q4_0_dots.wgsl, q8_0_dots.wgsl, q6_k_dots.wgsl) with unit_hold(u) (the
// unit's loads) and held_dot(h, x) (its dot with its staged x), apart so
// that the gate+up loop can load the next unit pair before this one's
// math, and the weighted sum a slot's units before its x is staged
// (matvec_x.wgsl's unit_dot is the two together).
// x is staged in workgroup memory a chunk of XCHUNK units at a time (the
// norm weight folded in; matvec_x.wgsl): every lane then reads its units'
// x vec4s from there with no bank conflicts, where reading them from the
// storage buffer put each lane of a warp on its own 128-byte line (lane t
// owns unit t, 32 floats of x), so one x load cost 32 L1 wavefronts.
//
// Bindings: 0 params (uniform), 1 x (array<vec4<f32>>), 2 g (array<vec4<f32>>:
// the norm weight when NORM, the splits' (m, l) when COMBINE, the vector
// MODE 2 adds; unread otherwise), 3 y (array<f32>), 4 sel (selected expert
// ids, array<u32>), 5 sel_w (their weights, array<f32>); both only read when
// MODE > 0. The host may bind a buffer that the next dispatch reads at an
// unread slot, so that its write-to-read transition (a barrier in wgpu)
// happens here, where a barrier is due anyway (src/gpu/plan/builder.rs).
// Dispatch: (ceil(rows / rows per workgroup) folded into x·y past 65535, 1,
// slots) for MODE 0 and 1; z = 1 for MODE 2.
// TPR consecutive invocations form a group that strides over the units of
// its row, then seg_sum combines their partial sums. A group owns one row
// (MODE 1: one gate row and its up row), a workgroup WG / TPR rows
// (ops::matvec_rows_per_workgroup). One row per group, not two sharing each
// x load: the loop body then dequantizes one unit, not two, and the
// smaller kernels ran an H100 token 9% faster although several were
// slower alone (docs/perf-journal.md, session 9: a token cycles through
// ~14 kernels a block, and the time it adds per kernel grows with their
// code).
//
// Overrides select the mode at pipeline creation:
//   MODE 0: y[y_off + z·y_stride + r] = W_z[r] · x[z·x_stride ..]   (z = batch slot)
//   MODE 1: W holds gate rows then up rows of each matrix (expert);
//           y[z·y_stride + y_off + r] = silu(W_e[r]·x) · (W_e[rows + r]·x), e = sel[z]
//   MODE 2: y[y_off + r] = Σ_k sel_w[k] · W_{sel[k]}[r] · x[k·x_stride ..] + g[y_off + r]
//           (g: the shared expert's output, computed beside the routed
//           gate+up, or zeros)
//   NORM:   x is replaced by RMSNorm(x) · g (MODE 0 and 1, one slot; the
//           staging sums x² and multiplies by g, the 1/rms factor scales
//           each row's total)
//   ACCUM:  y += result instead of y = result (residual adds)
//   COMBINE (MODE 0, attn_v_b): x is attention.wgsl's per-split partials
//           (binding 1: slot z's n_slot splits, each units·8 vec4s) and
//           binding 2 their (m, l) pairs; each workgroup merges its head's
//           splits (flash-decoding combine) into xs first instead of
//           staging (n_kv / 4 <= 128 vec4s, n_slot <= MAX_SPLITS = 2·WG
//           splits).

/// host: gpu::ops::MATVEC_WG
const WG: u32 = 128u;
/// host: gpu::ops::MAX_LATENT
const MAX_LATENT: u32 = 512u;
/// host: gpu::ops::MAX_SPLITS
const MAX_SPLITS: u32 = 256u;

// A dequantized weight unit: weights 4i .. 4i + 4 in element i.
alias Unit = array<vec4<f32>, 8>;

override MODE: u32 = 0u;
override NORM: bool = false;
override ACCUM: bool = false;
override TPR: u32 = 32u;
override COMBINE: bool = false;

struct Params {
    // rows per matrix handled by this dispatch
    rows: u32,
    // 32-weight units per row
    units: u32,
    // units between consecutive matrices (experts or batch heads)
    mat_units: u32,
    // slots (MODE 2: selected experts summed per row)
    n_slot: u32,
    // vec4s between slots' inputs
    x_stride: u32,
    // floats between slots' outputs
    y_stride: u32,
    // first output row (a tensor split over several buffers)
    y_off: u32,
    eps: f32,
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
    _pad3: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> g: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read_write> y: array<f32>;
@group(0) @binding(4) var<storage, read> sel: array<u32>;
@group(0) @binding(5) var<storage, read> sel_w: array<f32>;

// COMBINE: the splits' weights. The merge writes its head's row into the
// first n_kv / 4 slots of xs and keeps the invocations' partial sums in the
// last WG (XCHUNK · 8 >= MAX_LATENT / 4 + WG, so the two never meet).
var<workgroup> split_w: array<f32, MAX_SPLITS>;
const MERGE_PART: u32 = XCHUNK * 8u - WG;

// Partial dot of row r of matrix m (MODE 0 and 2) with the staged chunk
// [c0, c1) over its units c0 + t, c0 + t + TPR, ….
fn row_part(m: u32, r: u32, t: u32, c0: u32, c1: u32) -> f32 {
    return row_dots(m * p.mat_units + r * p.units, t, c0, c1);
}

// Partial dots of gate row r and up row r + rows of matrix m (MODE 1) with
// the staged chunk [c0, c1): each x vec4 is read once for the two rows.
fn gate_up_part(m: u32, r: u32, t: u32, c0: u32, c1: u32) -> vec2<f32> {
    let bg = m * p.mat_units + r * p.units;
    let bu = bg + p.rows * p.units;
    var acc = vec2<f32>(0.0);
    let j = min(c0 + t, c1 - 1u);
    var hg = unit_hold(bg + j);
    var hu = unit_hold(bu + j);
    for (var u = c0 + t; u < c1; u += TPR) {
        // The next pair's loads are in flight during this pair's math (the
        // last step reloads its own pair: cache hits). H200: routed
        // gate+up 12.38 -> 12.02 us, tg128 +0.8%, @ d4096 -0.25%; two
        // pairs a step with a one-pair tail instead (more code) lost 3%
        // (docs/perf-journal.md, session 29).
        let n = min(u + TPR, c1 - 1u);
        let ng = unit_hold(bg + n);
        let nu = unit_hold(bu + n);
        // each x vec4 read once for the two rows
        let v = x8(u - c0);
        acc += vec2<f32>(held_dot(hg, v), held_dot(hu, v));
        hg = ng;
        hu = nu;
    }
    return acc;
}

// (m, l) of split slot k: two pairs per vec4 of binding 2.
fn split_ml(k: u32) -> vec2<f32> {
    let v = g[k / 2u];
    return select(v.zw, v.xy, (k & 1u) == 0u);
}

// Split s's vec4 i of head h times its weight; zero past the used splits
// (the load clamped into the head's slots, so it never leaves them).
fn weighted_split(h: u32, s: u32, i: u32, n4: u32, n_used: u32) -> vec4<f32> {
    let k = min(s, p.n_slot - 1u);
    return select(vec4<f32>(0.0), split_w[k] * x[(h * p.n_slot + k) * n4 + i], s < n_used);
}

// Eight weighted splits s, s + groups, … summed.
fn merge8(h: u32, s: u32, groups: u32, i: u32, n4: u32, n_used: u32) -> vec4<f32> {
    return (weighted_split(h, s, i, n4, n_used) + weighted_split(h, s + groups, i, n4, n_used))
        + (weighted_split(h, s + 2u * groups, i, n4, n_used) + weighted_split(h, s + 3u * groups, i, n4, n_used))
        + (weighted_split(h, s + 4u * groups, i, n4, n_used) + weighted_split(h, s + 5u * groups, i, n4, n_used))
        + (weighted_split(h, s + 6u * groups, i, n4, n_used) + weighted_split(h, s + 7u * groups, i, n4, n_used));
}

// Split s's (m, l), or an empty split's past n_slot.
fn split_or_empty(h: u32, s: u32) -> vec2<f32> {
    if s < p.n_slot {
        return split_ml(h * p.n_slot + s);
    }
    return vec2<f32>(-3.0e38, 0.0);
}

// xs = Σ_s e^(m_s − M) · o_s / Σ_s e^(m_s − M) · l_s over head h's splits
// with l_s > 0 (attention marks the others empty; the used ones come
// first). Invocation i reads splits i and i + WG (n_slot <= MAX_SPLITS =
// 2·WG); the weights go through shared memory. The WG / n4 groups of n4
// invocations each sum every groups-th split, so all invocations have
// loads in flight.
fn merge_splits(h: u32, ids: Ids) {
    let n4 = p.units * 8u;
    let e0 = split_or_empty(h, ids.lid);
    let e1 = split_or_empty(h, ids.lid + WG);
    let u0 = e0.y > 0.0;
    let u1 = e1.y > 0.0;
    let mx = wg_max(max(select(-3.0e38, e0.x, u0), select(-3.0e38, e1.x, u1)), ids);
    let f0 = select(0.0, exp(e0.x - mx), u0);
    let f1 = select(0.0, exp(e1.x - mx), u1);
    let den = wg_sum(f0 * e0.y + f1 * e1.y, ids);
    let n_used = u32(wg_sum(select(0.0, 1.0, u0) + select(0.0, 1.0, u1), ids));
    if ids.lid < p.n_slot {
        split_w[ids.lid] = f0 / den;
    }
    if ids.lid + WG < p.n_slot {
        split_w[ids.lid + WG] = f1 / den;
    }
    workgroupBarrier();
    let groups = WG / n4;
    let i = ids.lid % n4;
    var acc = vec4<f32>(0.0);
    // Sixteen splits per iteration, their loads issued together: one split
    // per iteration left a single L2 load in flight per invocation, and
    // 128 splits of latency cost attn_v_b ~22 µs at 4K positions (H100).
    let step = 16u * groups;
    for (var s = ids.lid / n4; s < n_used && ids.lid < groups * n4; s += step) {
        acc += merge8(h, s, groups, i, n4, n_used) + merge8(h, s + 8u * groups, groups, i, n4, n_used);
    }
    xs[MERGE_PART + ids.lid] = acc;
    workgroupBarrier();
    if ids.lid < n4 {
        var sum = vec4<f32>(0.0);
        for (var k = 0u; k < groups; k++) {
            sum += xs[MERGE_PART + k * n4 + ids.lid];
        }
        xs[xs_slot(ids.lid)] = sum;
    }
    workgroupBarrier();
}

fn silu(v: f32) -> f32 {
    return v / (1.0 + exp(-v));
}

@compute @workgroup_size(WG)
fn main(ids: Ids, @builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
    let group = (wid.y * nwg.x + wid.x) * (WG / TPR) + ids.lid / TPR;
    let t = ids.lid % TPR;
    let z = wid.z;

    if COMBINE {
        merge_splits(z, ids);
    }

    if MODE == 1u {
        // A group owns gate row r and its up row; x is shared by the slots.
        let r = group;
        let live = r < p.rows;
        var a = vec2<f32>(0.0);
        for (var c0 = 0u; c0 < p.units; c0 += XCHUNK) {
            let c1 = min(c0 + XCHUNK, p.units);
            stage(0u, c0, c1, ids.lid);
            if live {
                a += gate_up_part(sel[z], r, t, c0, c1);
            }
        }
        a = vec2<f32>(seg_sum(a.x, ids, TPR), seg_sum(a.y, ids, TPR)) * norm_scale(ids);
        if t == 0u && live {
            store(z * p.y_stride + p.y_off + r, silu(a.x) * a.y);
        }
        return;
    }
    // MODE 0 and 2: each group of TPR invocations owns row r.
    let r = group;
    let live = r < p.rows;
    var a = 0.0;
    var idx = 0u;
    if MODE == 0u {
        if COMBINE {
            // xs holds the merged row (units <= MAX_LATENT / 32 < XCHUNK)
            if live {
                a = row_part(z, r, t, 0u, p.units);
            }
        } else {
            for (var c0 = 0u; c0 < p.units; c0 += XCHUNK) {
                let c1 = min(c0 + XCHUNK, p.units);
                stage(z * p.x_stride, c0, c1, ids.lid);
                if live {
                    a += row_part(z, r, t, c0, c1);
                }
            }
        }
        let scale = norm_scale(ids);
        a = seg_sum(a, ids, TPR) * scale;
        idx = p.y_off + z * p.y_stride + r;
    } else {
        if p.units <= XCHUNK && p.units <= 2u * TPR {
            // Each lane has at most two units of a slot (the routed down:
            // 48 units, TPR 32). It holds the next slot's (unit_hold: the
            // raw words where the format has its own dots file) while it
            // does this slot's math and stages the next x, so their DRAM
            // latency overlaps that work instead of following each
            // staging barrier: H200 routed down 11.07 -> 9.55 us, tg128
            // +0.4-0.5% (docs/perf-journal.md, session 29). The last slot
            // reloads its own units (cache hits). Holding the first units
            // across the staging in MODE 0 and 1 made the token 3-9%
            // slower although their micro rows did not move, so only this
            // loop does it.
            let rr = min(r, p.rows - 1u);
            let j0 = min(t, p.units - 1u);
            let j1 = min(t + TPR, p.units - 1u);
            let n0 = t < p.units;
            let n1 = t + TPR < p.units;
            var b = sel[0] * p.mat_units + rr * p.units;
            var h0 = unit_hold(b + j0);
            var h1 = unit_hold(b + j1);
            for (var k = 0u; k < p.n_slot; k++) {
                stage(k * p.x_stride, 0u, p.units, ids.lid);
                b = sel[min(k + 1u, p.n_slot - 1u)] * p.mat_units + rr * p.units;
                let g0 = unit_hold(b + j0);
                let g1 = unit_hold(b + j1);
                let s = select(0.0, held_dot(h0, x8(j0)), n0) + select(0.0, held_dot(h1, x8(j1)), n1);
                a += sel_w[k] * s;
                h0 = g0;
                h1 = g1;
            }
        } else {
            for (var k = 0u; k < p.n_slot; k++) {
                for (var c0 = 0u; c0 < p.units; c0 += XCHUNK) {
                    let c1 = min(c0 + XCHUNK, p.units);
                    stage(k * p.x_stride, c0, c1, ids.lid);
                    if live {
                        a += sel_w[k] * row_part(sel[k], r, t, c0, c1);
                    }
                }
            }
        }
        idx = p.y_off + r;
        a = seg_sum(a, ids, TPR);
        if live {
            a += g[idx / 4u][idx % 4u];
        }
    }
    if t == 0u && live {
        store(idx, a);
    }
}

fn store(idx: u32, v: f32) {
    if ACCUM {
        y[idx] += v;
    } else {
        y[idx] = v;
    }
}
