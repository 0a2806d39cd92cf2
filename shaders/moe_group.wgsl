// Groups a chunk's routed assignments by expert for the prefill matmuls:
// assignment a = token·n_used + slot selected expert sel[a] (router.wgsl);
// `order` gets the assignments sorted by expert (in any order within an
// expert: each output row is computed whole by one workgroup, so results do
// not depend on it), and `tiles` one (expert, first, count, small) per run
// of up to `tile` assignments of one expert, then zeros up to max_tiles
// (the matmul dispatch launches max_tiles; empty tiles exit at once). An
// expert's last run, where it holds `small` or fewer assignments
// (`small` > 0), is a small tile (fourth word 1: the tile32 of
// matmul_coop.wgsl and matmul.wgsl); small tiles follow all full-size
// ones, so the long workgroups start first and the short ones fill the
// dispatch's tail. `rows` gets each assignment's row among the tiles'
// slots of `tile` rows (tile t's assignment j at t·tile + j): where the
// experts' down writes it (matmul_coop.wgsl and matmul.wgsl, routed and
// not gate+up) and moe_sum.wgsl reads it.
//
// Bindings: 0 params (uniform), 1 sel (array<u32>), 2 order (array<u32>,
// out), 3 tiles (array<vec4<u32>>, out), 4 rows (array<u32>, out).
// Dispatch: one workgroup. Invocation i counts and scatters assignments
// i, i + WG, …; invocation 0 does the prefix sums over experts.

const WG: u32 = 256u;
/// host: gpu::ops::ROUTER_MAX_EXPERT
const MAX_EXPERT: u32 = 512u;

struct Params {
    n_assign: u32,
    n_expert: u32,
    tile: u32,
    max_tiles: u32,
    small: u32,
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> sel: array<u32>;
@group(0) @binding(2) var<storage, read_write> order: array<u32>;
@group(0) @binding(3) var<storage, read_write> tiles: array<vec4<u32>>;
@group(0) @binding(4) var<storage, read_write> rows: array<u32>;

var<workgroup> count: array<atomic<u32>, MAX_EXPERT>;
var<workgroup> cursor: array<atomic<u32>, MAX_EXPERT>;
var<workgroup> first: array<u32, MAX_EXPERT>;
var<workgroup> first_tile: array<u32, MAX_EXPERT>;
// Each expert's full-size tiles (big_tiles of its count).
var<workgroup> n_big: array<u32, MAX_EXPERT>;
// Each expert's small tile among the small ones.
var<workgroup> first_small: array<u32, MAX_EXPERT>;
var<workgroup> n_tiles: u32;
var<workgroup> n_small: u32;

// Full-size tiles of `c` assignments: all of them, or all but a small last one.
fn big_tiles(c: u32) -> u32 {
    let r = c % p.tile;
    if r > 0u && r <= p.small {
        return c / p.tile;
    }
    return (c + p.tile - 1u) / p.tile;
}

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) lid: u32) {
    for (var e = lid; e < p.n_expert; e += WG) {
        atomicStore(&count[e], 0u);
        atomicStore(&cursor[e], 0u);
    }
    workgroupBarrier();
    for (var a = lid; a < p.n_assign; a += WG) {
        atomicAdd(&count[sel[a]], 1u);
    }
    workgroupBarrier();
    // Each expert's tiles of each size, counted in parallel (the divisions
    // stay out of the serial prefix sums), then summed in place.
    for (var e = lid; e < p.n_expert; e += WG) {
        let c = atomicLoad(&count[e]);
        let b = big_tiles(c);
        n_big[e] = b;
        first_tile[e] = b;
        first_small[e] = u32(b * p.tile < c);
    }
    workgroupBarrier();
    if lid == 0u {
        var s = 0u;
        var t = 0u;
        var m = 0u;
        for (var e = 0u; e < p.n_expert; e++) {
            let c = atomicLoad(&count[e]);
            let b = first_tile[e];
            let f = first_small[e];
            first[e] = s;
            first_tile[e] = t;
            first_small[e] = m;
            s += c;
            t += b;
            m += f;
        }
        n_tiles = t;
        n_small = m;
    }
    let big = workgroupUniformLoad(&n_tiles);
    for (var a = lid; a < p.n_assign; a += WG) {
        let e = sel[a];
        let k = atomicAdd(&cursor[e], 1u);
        order[first[e] + k] = a;
        // its tile: the expert's i-th full-size one, or its small one
        let i = k / p.tile;
        var t = big + first_small[e];
        if i < n_big[e] {
            t = first_tile[e] + i;
        }
        rows[a] = t * p.tile + k - i * p.tile;
    }
    let used = big + workgroupUniformLoad(&n_small);
    for (var e = lid; e < p.n_expert; e += WG) {
        let c = atomicLoad(&count[e]);
        let b = n_big[e];
        for (var i = 0u; i < b; i++) {
            tiles[first_tile[e] + i] = vec4<u32>(e, first[e] + i * p.tile, min(p.tile, c - i * p.tile), 0u);
        }
        if b * p.tile < c {
            tiles[big + first_small[e]] = vec4<u32>(e, first[e] + b * p.tile, c - b * p.tile, 1u);
        }
    }
    for (var i = used + lid; i < p.max_tiles; i += WG) {
        tiles[i] = vec4<u32>(0u);
    }
}
