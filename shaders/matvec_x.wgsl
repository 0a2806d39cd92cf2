// What the decode's matvecs share (matvec.wgsl and route.wgsl, which
// declare `x` (binding 1, array<vec4<f32>>), `g` (binding 2: the norm
// weight when NORM), `WG`, `TPR`, `NORM` and params `p` with `units` and
// `eps`): x staged in workgroup memory a chunk at a time (stage(): times g
// and x² summed into ss when NORM), read back by xv(), udot() and
// row_dots() as the format files' units are laid out; the norm's 1/rms;
// and bytes4(), which some format files use.

/// Units of x staged at a time: the 64-unit rows (2048 columns) are one
/// chunk, attn_output's 160 units three. xs (8 KiB) with the kernel's own
/// arrays (matvec's split_w, route's scores) and the reduction prelude's
/// stays within the 16 KiB of workgroup memory glmw asks of an adapter. The decode matvecs are sensitive to it: on the
/// H100, 96 units lost 10% of tg128, 80 (attn_output in two chunks) was
/// 1.5% slower than 64 in the GPU-timed token (docs/perf-journal.md,
/// sessions 15 and 16).
const XCHUNK: u32 = 64u;

// The staged chunk of x: vec4 i (unit i / 8, its vec4 k = i % 8) at slot
// xs_slot(i), i.e. vec4 k of each unit rotated by the unit's index, so the
// eight lanes of a 128-byte phase reading the same k of eight consecutive
// units hit eight different bank groups.
var<workgroup> xs: array<vec4<f32>, XCHUNK * 8u>;
// NORM: Σx² of the x vec4s this invocation staged; every vec4 of x is
// staged once per workgroup, so the workgroup sum is Σx² of the row.
var<private> ss: f32;

fn xs_slot(i: u32) -> u32 {
    return i ^ ((i >> 3u) & 7u);
}

// Vec4 i of the staged chunk, as the format files' dots read x.
fn xv(i: u32) -> vec4<f32> {
    return xs[xs_slot(i)];
}

// Stages units [c0, c1) of the x row that starts at vec4 `base` (NORM: times
// the norm weight, x² summed into ss). Call from uniform control flow.
fn stage(base: u32, c0: u32, c1: u32, lid: u32) {
    // the previous chunk's readers are done with xs
    workgroupBarrier();
    let n = (c1 - c0) * 8u;
    for (var i = lid; i < n; i += WG) {
        var v = x[base + c0 * 8u + i];
        if NORM {
            ss += dot(v, v);
            v *= g[c0 * 8u + i];
        }
        xs[xs_slot(i)] = v;
    }
    workgroupBarrier();
}

// A dequantized unit's dot with the staged x[4·o .. 4·o + 32]. Written
// out with constant indices only, so nothing lands in local memory.
fn udot(a: Unit, o: u32) -> f32 {
    return dot(a[0], xv(o)) + dot(a[1], xv(o + 1u)) + dot(a[2], xv(o + 2u))
        + dot(a[3], xv(o + 3u)) + dot(a[4], xv(o + 4u)) + dot(a[5], xv(o + 5u))
        + dot(a[6], xv(o + 6u)) + dot(a[7], xv(o + 7u));
}

// Partial dot of the row whose unit 0 is unit `b` with the staged chunk
// [c0, c1), over its units c0 + t, c0 + t + TPR, ….
fn row_dots(b: u32, t: u32, c0: u32, c1: u32) -> f32 {
    var acc = 0.0;
    for (var u = c0 + t; u < c1; u += TPR) {
        acc += udot(unit_load(b + u), (u - c0) * 8u);
    }
    return acc;
}

// 1/rms of x (NORM), else 1. Call after the last chunk is staged, from
// uniform control flow.
fn norm_scale(ids: Ids) -> f32 {
    if NORM {
        return inverseSqrt(wg_sum(ss, ids) / f32(p.units * 32u) + p.eps);
    }
    return 1.0;
}

// The four bytes of `w`, low first.
fn bytes4(w: u32) -> vec4<u32> {
    return (vec4<u32>(w) >> vec4<u32>(0u, 8u, 16u, 24u)) & vec4<u32>(0xFFu);
}
