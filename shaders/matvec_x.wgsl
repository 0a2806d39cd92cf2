// What the decode's matvecs share (matvec.wgsl and route.wgsl, which
// declare `x` (binding 1, array<vec4<f32>>), `g` (binding 2: the norm
// weight when NORM), `WG`, `TPR`, `NORM` and params `p` with `units` and
// `eps`, and include a unit-dots file, unit_dots.wgsl or a format's own,
// whose unit_hold(u) loads unit u into a `Held` and held_dot(h, x) is its
// dot with its x): x staged in workgroup memory a chunk at a time
// (stage(): times g and x² summed into ss when NORM), read back by x8()
// as the format files' units are laid out; a unit's and a row's dots; the
// norm's 1/rms; and bytes4(), which some format files use.

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
// units hit eight different bank groups. (A padded layout, unit j at 9·j,
// conflict-free with constant load offsets, was no faster: session 26.)
var<workgroup> xs: array<vec4<f32>, XCHUNK * 8u>;
// NORM: Σx² of the x vec4s this invocation staged; every vec4 of x is
// staged once per workgroup, so the workgroup sum is Σx² of the row.
var<private> ss: f32;

fn xs_slot(i: u32) -> u32 {
    return i ^ ((i >> 3u) & 7u);
}

// An invocation stages at most four x vec4s of a chunk (vec4s lid + k·WG).
const_assert XCHUNK * 8u <= 4u * WG;

// x vec4 i of the chunk at `at` (zeros past n).
fn x_load(at: u32, i: u32, n: u32) -> vec4<f32> {
    var v = vec4<f32>(0.0);
    if i < n {
        v = x[at + i];
    }
    return v;
}

// NORM's weight for vec4 i of the chunk at `at` (ones past n, or without NORM).
fn g_load(at: u32, i: u32, n: u32) -> vec4<f32> {
    var v = vec4<f32>(1.0);
    if NORM && i < n {
        v = g[at + i];
    }
    return v;
}

// x vec4 i of the chunk (v, its norm weight w) into xs.
fn put_x(i: u32, n: u32, v: vec4<f32>, w: vec4<f32>) {
    if i < n {
        if NORM {
            ss += dot(v, v);
        }
        xs[xs_slot(i)] = v * w;
    }
}

// Stages units [c0, c1) of the x row that starts at vec4 `base` (NORM: times
// the norm weight, x² summed into ss). Every load of the invocation is
// issued before its first store, so the staging waits for one round of L2
// latency, not one a vec4 (the driver does not batch a loop's loads:
// session 33's stage_queries). Call from uniform control flow.
fn stage(base: u32, c0: u32, c1: u32, lid: u32) {
    // the previous chunk's readers are done with xs
    workgroupBarrier();
    let n = (c1 - c0) * 8u;
    let at = base + c0 * 8u;
    let v0 = x_load(at, lid, n);
    let v1 = x_load(at, lid + WG, n);
    let v2 = x_load(at, lid + 2u * WG, n);
    let v3 = x_load(at, lid + 3u * WG, n);
    let w0 = g_load(c0 * 8u, lid, n);
    let w1 = g_load(c0 * 8u, lid + WG, n);
    let w2 = g_load(c0 * 8u, lid + 2u * WG, n);
    let w3 = g_load(c0 * 8u, lid + 3u * WG, n);
    put_x(lid, n, v0, w0);
    put_x(lid + WG, n, v1, w1);
    put_x(lid + 2u * WG, n, v2, w2);
    put_x(lid + 3u * WG, n, v3, w3);
    workgroupBarrier();
}

// Staged unit j's x (x[32·(c0 + j) ..] of the chunk from c0) as the eight
// vec4s a unit's dot reads.
fn x8(j: u32) -> array<vec4<f32>, 8> {
    let b = 8u * j;
    let r = j & 7u;
    return array<vec4<f32>, 8>(xs[b + r], xs[b + (1u ^ r)], xs[b + (2u ^ r)], xs[b + (3u ^ r)],
        xs[b + (4u ^ r)], xs[b + (5u ^ r)], xs[b + (6u ^ r)], xs[b + (7u ^ r)]);
}

// Unit u's dot with its x in v.
fn unit_dot(u: u32, v: array<vec4<f32>, 8>) -> f32 {
    return held_dot(unit_hold(u), v);
}

// Partial dot of the row whose unit 0 is unit `b` with the staged chunk
// [c0, c1), over its units c0 + t, c0 + t + TPR, ….
fn row_dots(b: u32, t: u32, c0: u32, c1: u32) -> f32 {
    var acc = 0.0;
    if TPR <= 4u {
        // Many units a lane (the output head: 16): the next unit's loads
        // are in flight during this unit's math. H200: the head alone
        // 119.8 -> 111.5 us, tg128 +-0, @ d4096 +0.6% (two leases); every
        // TPR pipelined so lost 1% (docs/perf-journal.md, sessions 29, 30).
        var h = unit_hold(b + min(c0 + t, c1 - 1u));
        for (var u = c0 + t; u < c1; u += TPR) {
            let n = unit_hold(b + min(u + TPR, c1 - 1u));
            acc += held_dot(h, x8(u - c0));
            h = n;
        }
        return acc;
    }
    for (var u = c0 + t; u < c1; u += TPR) {
        acc += unit_dot(b + u, x8(u - c0));
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
