// Groups a chunk's routed assignments by expert for the prefill matmuls:
// assignment a = token·n_used + slot selected expert sel[a] (router.wgsl);
// `order` gets the assignments sorted by expert (in any order within an
// expert: each output row is computed whole by one workgroup, so results do
// not depend on it), and `tiles` one (expert, first, count) per run of up to
// `tile` assignments of one expert, then (0, 0, 0) up to max_tiles (the
// matmul dispatch launches max_tiles; empty tiles exit at once).
//
// Bindings: 0 params (uniform), 1 sel (array<u32>), 2 order (array<u32>,
// out), 3 tiles (array<vec4<u32>>, out).
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
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> sel: array<u32>;
@group(0) @binding(2) var<storage, read_write> order: array<u32>;
@group(0) @binding(3) var<storage, read_write> tiles: array<vec4<u32>>;

var<workgroup> count: array<atomic<u32>, MAX_EXPERT>;
var<workgroup> cursor: array<atomic<u32>, MAX_EXPERT>;
var<workgroup> first: array<u32, MAX_EXPERT>;
var<workgroup> first_tile: array<u32, MAX_EXPERT>;
var<workgroup> n_tiles: u32;

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
    if lid == 0u {
        var s = 0u;
        var t = 0u;
        for (var e = 0u; e < p.n_expert; e++) {
            let c = atomicLoad(&count[e]);
            first[e] = s;
            first_tile[e] = t;
            s += c;
            t += (c + p.tile - 1u) / p.tile;
        }
        n_tiles = t;
    }
    workgroupBarrier();
    for (var a = lid; a < p.n_assign; a += WG) {
        let e = sel[a];
        order[first[e] + atomicAdd(&cursor[e], 1u)] = a;
    }
    for (var e = lid; e < p.n_expert; e += WG) {
        let c = atomicLoad(&count[e]);
        for (var i = 0u; i * p.tile < c; i++) {
            tiles[first_tile[e] + i] = vec4<u32>(e, first[e] + i * p.tile, min(p.tile, c - i * p.tile), 0u);
        }
    }
    let used = workgroupUniformLoad(&n_tiles);
    for (var i = used + lid; i < p.max_tiles; i += WG) {
        tiles[i] = vec4<u32>(0u);
    }
}
