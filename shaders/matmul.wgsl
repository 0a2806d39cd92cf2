// Prefill matmul: Y = W · X over a chunk of tokens, for every weight format
// (built with the same format files as matvec.wgsl, through `unit_load`),
// in f32 on adapters without cooperative matrices (matmul_coop.wgsl has
// the same params, tiles, bindings and epilogues).
//
// Rows of X are processed in tiles of up to TOK rows (with SHORT, a tile
// whose fourth word is 1 holds up to TOK32) that share one weight matrix:
// tiles[wid.y] = (matrix, first, count, short), and the tile's rows are
// order[first .. first + count]. Row a reads x from vec4 (a / x_div)·x_tok
// + z·x_stride and writes y[a·y_tok + z·y_stride + y_off + r], or, where
// the tiles are routed (SHORT) and not gate+up (the experts' down), at the
// tile's slot: tile t's j-th row at row t·TOK + j (moe_group.wgsl's `rows`
// says which is whose; matmul_coop.wgsl stores whole slots).
// Dense matmuls use consecutive tiles over the identity order; routed
// experts use moe_group.wgsl's tiles (assignments a = token·n_used + slot
// sorted by expert, x_div = n_used so gate+up reads the token's row).
// z = wid.z is the head of batched-head matmuls (attn_k_b, attn_v_b): it
// picks matrix tile.x + z and offsets x and y. Split-K uses the same
// heads: head z is the z-th run of `units` units of each row (row_units
// apart), writing a partial sum into its own plane of y that the consumer
// adds up (ops::matmul_k_parts).
//
// Bindings: 0 params (uniform), 1 x (array<vec4<f32>>), 2 y (array<f32>),
// 3 tiles (array<vec4<u32>>), 4 order (array<u32>), 5 unused, 6 (and 7)
// the weights of the format file.
// Dispatch: (ceil(rows / OUT), tiles, heads), OUT = ROWS (ROWS / 2 with
// GATE_UP: the workgroup's weight rows are OUT gate rows then the same OUT
// up rows).
//
// A workgroup of 128 computes ROWS = 64 weight rows by a tile of tokens,
// one 32-column unit (K step) at a time. Per step invocations i < 64
// dequantize unit u of weight row i into `ws`, and every invocation copies
// x vec4s of the tile into `xs`, both as f32 and column-major (one vec4 =
// 4 rows or 4 tokens of one column); a step's unit and x are loaded
// during the previous step's products (the format's stage_load: raw words
// where it has them, stage_raw.wgsl). After a barrier each invocation
// multiplies its register tile; a 32-lane subgroup owns 16 of the tile's
// tokens, so subgroups past the tile's count skip their products. Two
// shapes, chosen per workgroup by the tile's fourth word where `SHORT` is
// on (the routed pipelines; moe_group.wgsl flags an expert's last run of
// TOK32 or fewer assignments), else tile64:
// - tile64: tiles of TOK = 64 tokens; invocation (g, t) = ((lid / 4) % 8,
//   4·(lid / 32) + lid % 4) owns rows 4g..4g+4 and 32+4g..32+4g+4 (with
//   GATE_UP: gate rows and their up rows, so the epilogue is local) by
//   tokens 4t..4t+4: eight vec4 accumulators, 32 FMAs per column from
//   three vec4 workgroup loads. Each staged weight serves 64 tokens: the
//   K-quants' and Q8_0's dequantization is paid half as often as with
//   tiles of 32 (H100, session 23: the Q5_K shared gate+up -31%, q_b -18%,
//   kv_a -29%).
// - tile32 (short tiles): tiles of TOK32 = 32 tokens; invocation (g, t) =
//   ((lid % 32) / 4 + 8·(s % 2), lid % 4 + 4·(s / 2)), s = lid / 32, owns
//   rows 4g..4g+4 by tokens 4t..4t+4: four accumulators, 16 FMAs per
//   column from two loads; with GATE_UP the up rows' results reach their
//   gate rows through `ws` after the last step. A routed expert gets ~32
//   of a 512-token chunk's assignments; in tile64 a run of 32 or fewer
//   would keep half its subgroups idle, and four subgroups of 64 products
//   each hide more of the barriers' and loads' latency than two of 128.
//   H100, the routed gate+up: all routed tiles in tile32's shape (tiles
//   of 32) 7% faster than all in tile64's (session 23); each expert's
//   runs of 33-64 in one tile64 and only its last short run in tile32, 6%
//   faster again (session 24), though the routed pipelines then hold
//   tile64's registers.
//
// Workgroup-memory traffic, per column and subgroup: tile64's `ws` loads
// read 8 distinct vec4 (128 bytes) and its `xs` loads 4 (the swizzle only
// permutes them); tile32's the same: no bank conflicts. The staging stores
// are scalar: a subgroup writes one column of 32 consecutive rows to `ws`,
// and 8 columns × 4 tokens to `xs` through its swizzle: 32 banks either
// way, so no padding. Global loads: each x vec4 is read by every row
// workgroup of the tile (mostly L1/L2 hits; eight consecutive invocations
// read one token's 128 bytes). Registers: tile64 32 accumulators + 12
// operands, tile32 16 + 8, plus the next step's loads (Q4_0: 5 raw words;
// formats without a raw form hold their 32 floats; x: 4 or 2 vec4s). The
// H100's driver gives a pipeline with tile64 in it ~100 registers
// (Q4_0; Q8_0 110, Q6_K 148, Q5_K 165), tile32 alone 68.
// Workgroup memory: ws 8 KB + xs 8 KB = 16 KB, what every adapter offers
// (neither prelude's scratch is used here).
//
// Overrides: GATE_UP: W holds gate rows then up rows of each matrix;
// y = silu(gate · x) · (up · x). ACCUM: y += result (residual adds).
// SHORT: tiles flagged short run tile32 (the routed pipelines), and
// without GATE_UP y's rows are tile slots.

const WG: u32 = 128u;
/// Rows of x per tile (tile64).
/// host: gpu::ops::MATMUL_TILE
const TOK: u32 = 64u;
/// Rows of x per short tile (tile32).
/// host: gpu::ops::MATMUL_SHORT_TILE
const TOK32: u32 = 32u;
/// Weight rows per workgroup (one per staging invocation; half gate, half
/// up with GATE_UP).
/// host: gpu::ops::MATMUL_ROWS
const ROWS: u32 = 64u;
// Half of ROWS: tile64's distance between an invocation's two row quads,
// and the gate rows of a GATE_UP workgroup.
const HALF: u32 = 32u;
// vec4s per column of ws (rows) and of xs (tokens).
const WV: u32 = ROWS / 4u;
const XV: u32 = TOK / 4u;

alias Unit = array<vec4<f32>, 8>;

// With SHORT and not GATE_UP: the workgroup's tile's first row of y
// (wid.y · TOK).
var<private> slot0: u32;

override GATE_UP: bool = false;
override ACCUM: bool = false;
override SHORT: bool = false;

struct Params {
    // rows per matrix handled by this dispatch
    rows: u32,
    // 32-weight units per row
    units: u32,
    // units between consecutive matrices (experts or heads)
    mat_units: u32,
    // x row of assignment a: a / x_div
    x_div: u32,
    // vec4s between rows of x
    x_tok: u32,
    // floats between rows of y
    y_tok: u32,
    // vec4s between heads' inputs
    x_stride: u32,
    // floats between heads' outputs
    y_stride: u32,
    // first output row (a matrix split over several buffers)
    y_off: u32,
    // units between consecutive rows of a matrix: `units`, or a multiple
    // where the heads are parts of each row (split-K)
    row_units: u32,
    _pad1: u32,
    _pad2: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;
@group(0) @binding(3) var<storage, read> tiles: array<vec4<u32>>;
@group(0) @binding(4) var<storage, read> order: array<u32>;

// One K step of weights: column k's rows 4v..4v+4 at ws[k·WV + v].
var<workgroup> ws: array<vec4<f32>, 32u * WV>;
// One K step of x: column k's tokens 4t..4t+4 at xs[k·XV + (t ^ k / 4)]
// (swizzled so that the staging stores of a subgroup, 8 columns 4 apart
// by 4 tokens, fall on 32 different banks).
var<workgroup> xs: array<vec4<f32>, 32u * XV>;

// The four bytes of `w`, low first.
fn bytes4(w: u32) -> vec4<u32> {
    return (vec4<u32>(w) >> vec4<u32>(0u, 8u, 16u, 24u)) & vec4<u32>(0xFFu);
}

// Columns k..k+4 of row quad `o`, component `c` (the row within the quad).
fn put4(o: u32, c: u32, k: u32, v: vec4<f32>) {
    ws[k * WV + o][c] = v.x;
    ws[(k + 1u) * WV + o][c] = v.y;
    ws[(k + 2u) * WV + o][c] = v.z;
    ws[(k + 3u) * WV + o][c] = v.w;
}

// Weight row `r` of the workgroup, the unit `w`, into ws (the format's
// stage_store calls it). Constant indices into the unit only.
fn store_unit(r: u32, w: Unit) {
    let o = r / 4u;
    let c = r % 4u;
    put4(o, c, 0u, w[0]);
    put4(o, c, 4u, w[1]);
    put4(o, c, 8u, w[2]);
    put4(o, c, 12u, w[3]);
    put4(o, c, 16u, w[4]);
    put4(o, c, 20u, w[5]);
    put4(o, c, 24u, w[6]);
    put4(o, c, 28u, w[7]);
}

// x vec4 q of the tile's token j (row j of the step's columns 4q..4q+4)
// into xs.
fn stage_x(j: u32, q: u32, v: vec4<f32>) {
    let o = (j / 4u) ^ q;
    let c = j % 4u;
    xs[(4u * q) * XV + o][c] = v.x;
    xs[(4u * q + 1u) * XV + o][c] = v.y;
    xs[(4u * q + 2u) * XV + o][c] = v.z;
    xs[(4u * q + 3u) * XV + o][c] = v.w;
}

// tile64's register tile: lo_n / hi_n hold token 4t+n's products with
// rows 4g..4g+4 / HALF+4g..HALF+4g+4.
struct Acc {
    lo0: vec4<f32>,
    lo1: vec4<f32>,
    lo2: vec4<f32>,
    lo3: vec4<f32>,
    hi0: vec4<f32>,
    hi1: vec4<f32>,
    hi2: vec4<f32>,
    hi3: vec4<f32>,
}

// The 32 columns of the staged step on tile64's register tile (g, t).
fn products(acc: Acc, g: u32, t: u32) -> Acc {
    var a = acc;
    for (var k = 0u; k < 32u; k++) {
        let lo = ws[k * WV + g];
        let hi = ws[k * WV + HALF / 4u + g];
        let v = xs[k * XV + (t ^ (k / 4u))];
        a.lo0 += lo * v.x;
        a.hi0 += hi * v.x;
        a.lo1 += lo * v.y;
        a.hi1 += hi * v.y;
        a.lo2 += lo * v.z;
        a.hi2 += hi * v.z;
        a.lo3 += lo * v.w;
        a.hi3 += hi * v.w;
    }
    return a;
}

// tile32's register tile: a_n holds token 4t+n's products with rows
// 4g..4g+4.
struct Acc4 {
    a0: vec4<f32>,
    a1: vec4<f32>,
    a2: vec4<f32>,
    a3: vec4<f32>,
}

// The 32 columns of the staged step on tile32's register tile (g, t).
fn products4(acc: Acc4, g: u32, t: u32) -> Acc4 {
    var a = acc;
    for (var k = 0u; k < 32u; k++) {
        let w = ws[k * WV + g];
        let v = xs[k * XV + (t ^ (k / 4u))];
        a.a0 += w * v.x;
        a.a1 += w * v.y;
        a.a2 += w * v.z;
        a.a3 += w * v.w;
    }
    return a;
}

// The x vec4 offset (column 0) of the tile's token slot j; slots past its
// count repeat its last row and are not written.
fn x_at(tile: vec4<u32>, j: u32, z: u32) -> u32 {
    let a = order[tile.y + min(j, tile.z - 1u)];
    return (a / p.x_div) * p.x_tok + z * p.x_stride;
}

// The first weight unit of the row that invocation `lid` stages
// (invocations lid < ROWS; rows past the matrix are clamped: computed and
// not written). r0: the workgroup's first output row.
fn stage_base(tile: vec4<u32>, r0: u32, lid: u32, z: u32) -> u32 {
    var row = min(r0 + lid, p.rows - 1u);
    if GATE_UP {
        row = min(r0 + lid % HALF, p.rows - 1u);
        if lid >= HALF {
            row += p.rows;
        }
    }
    return (tile.x + z) * p.mat_units + row * p.row_units;
}

fn silu(v: vec4<f32>) -> vec4<f32> {
    return v / (1.0 + exp(-v));
}

// Row r (of this dispatch's matrix) of token slot j of the tile.
fn put_y(tile: vec4<u32>, j: u32, r: u32, z: u32, v: f32) {
    if r < p.rows && j < tile.z {
        var row = order[tile.y + j];
        if SHORT && !GATE_UP {
            row = slot0 + j;
        }
        let idx = row * p.y_tok + z * p.y_stride + p.y_off + r;
        if ACCUM {
            y[idx] += v;
        } else {
            y[idx] = v;
        }
    }
}

fn put_quad(tile: vec4<u32>, j: u32, r: u32, z: u32, v: vec4<f32>) {
    put_y(tile, j, r, z, v.x);
    put_y(tile, j, r + 1u, z, v.y);
    put_y(tile, j, r + 2u, z, v.z);
    put_y(tile, j, r + 3u, z, v.w);
}

// tile64's epilogue of token slot j: rows r0+4g.. from `lo`, and with
// GATE_UP silu(lo)·hi there, else rows r0+HALF+4g.. from `hi`.
fn finish(tile: vec4<u32>, j: u32, r: u32, z: u32, lo: vec4<f32>, hi: vec4<f32>) {
    if GATE_UP {
        put_quad(tile, j, r, z, silu(lo) * hi);
    } else {
        put_quad(tile, j, r, z, lo);
        put_quad(tile, j, r + HALF, z, hi);
    }
}

// A dense tile of up to TOK tokens: x vec4 q of tokens j + 16m (m < 4)
// staged per invocation.
fn tile64(tile: vec4<u32>, wid: vec3<u32>, lid: u32, r0: u32) {
    let stager = lid < ROWS;
    let base = stage_base(tile, r0, lid % ROWS, wid.z);
    let q = lid % 8u;
    let j = lid / 8u;
    let xo = vec4<u32>(x_at(tile, j, wid.z), x_at(tile, j + 16u, wid.z),
        x_at(tile, j + 32u, wid.z), x_at(tile, j + 48u, wid.z)) + q;
    let g = (lid / 4u) % 8u;
    let t = 4u * (lid / 32u) + lid % 4u;
    let busy = 4u * t < tile.z;
    var acc = Acc();
    // Step u's weights and x are loaded during step u - 1's products.
    var w: Staged;
    if stager {
        w = stage_load(base);
    }
    var x0 = x[xo.x];
    var x1 = x[xo.y];
    var x2 = x[xo.z];
    var x3 = x[xo.w];
    for (var u = 0u; u < p.units; u++) {
        if stager {
            stage_store(lid, w);
        }
        stage_x(j, q, x0);
        stage_x(j + 16u, q, x1);
        stage_x(j + 32u, q, x2);
        stage_x(j + 48u, q, x3);
        workgroupBarrier();
        if u + 1u < p.units {
            if stager {
                w = stage_load(base + u + 1u);
            }
            let xu = xo + 8u * (u + 1u);
            x0 = x[xu.x];
            x1 = x[xu.y];
            x2 = x[xu.z];
            x3 = x[xu.w];
        }
        if busy {
            acc = products(acc, g, t);
        }
        workgroupBarrier();
    }
    let r = r0 + 4u * g;
    finish(tile, 4u * t, r, wid.z, acc.lo0, acc.hi0);
    finish(tile, 4u * t + 1u, r, wid.z, acc.lo1, acc.hi1);
    finish(tile, 4u * t + 2u, r, wid.z, acc.lo2, acc.hi2);
    finish(tile, 4u * t + 3u, r, wid.z, acc.lo3, acc.hi3);
}

// A short tile of up to TOK32 tokens: x vec4 q of tokens j and j + 16
// staged per invocation.
fn tile32(tile: vec4<u32>, wid: vec3<u32>, lid: u32, r0: u32) {
    let stager = lid < ROWS;
    let base = stage_base(tile, r0, lid % ROWS, wid.z);
    let q = lid % 8u;
    let j = lid / 8u;
    let xo = vec2<u32>(x_at(tile, j, wid.z), x_at(tile, j + 16u, wid.z)) + q;
    let s = lid / 32u;
    let g = (lid % 32u) / 4u + 8u * (s % 2u);
    let t = lid % 4u + 4u * (s / 2u);
    let busy = 4u * t < tile.z;
    var acc = Acc4();
    var w: Staged;
    if stager {
        w = stage_load(base);
    }
    var x0 = x[xo.x];
    var x1 = x[xo.y];
    for (var u = 0u; u < p.units; u++) {
        if stager {
            stage_store(lid, w);
        }
        stage_x(j, q, x0);
        stage_x(j + 16u, q, x1);
        workgroupBarrier();
        if u + 1u < p.units {
            if stager {
                w = stage_load(base + u + 1u);
            }
            let xu = xo + 8u * (u + 1u);
            x0 = x[xu.x];
            x1 = x[xu.y];
        }
        if busy {
            acc = products4(acc, g, t);
        }
        workgroupBarrier();
    }
    let r = r0 + 4u * g;
    if GATE_UP {
        // The up rows' quads (g >= 8) pass through ws to their gate rows'
        // invocations: token n's up quad o at ws[n·8 + o] (the last
        // step's barrier has freed ws).
        let o = g % 8u;
        if g >= 8u {
            ws[(4u * t) * 8u + o] = acc.a0;
            ws[(4u * t + 1u) * 8u + o] = acc.a1;
            ws[(4u * t + 2u) * 8u + o] = acc.a2;
            ws[(4u * t + 3u) * 8u + o] = acc.a3;
        }
        workgroupBarrier();
        if g < 8u {
            put_quad(tile, 4u * t, r, wid.z, silu(acc.a0) * ws[(4u * t) * 8u + o]);
            put_quad(tile, 4u * t + 1u, r, wid.z, silu(acc.a1) * ws[(4u * t + 1u) * 8u + o]);
            put_quad(tile, 4u * t + 2u, r, wid.z, silu(acc.a2) * ws[(4u * t + 2u) * 8u + o]);
            put_quad(tile, 4u * t + 3u, r, wid.z, silu(acc.a3) * ws[(4u * t + 3u) * 8u + o]);
        }
    } else {
        put_quad(tile, 4u * t, r, wid.z, acc.a0);
        put_quad(tile, 4u * t + 1u, r, wid.z, acc.a1);
        put_quad(tile, 4u * t + 2u, r, wid.z, acc.a2);
        put_quad(tile, 4u * t + 3u, r, wid.z, acc.a3);
    }
}

@compute @workgroup_size(WG)
fn main(ids: Ids, @builtin(workgroup_id) wid: vec3<u32>) {
    let tile = tiles[wid.y];
    // Workgroup-uniform: routed dispatches launch the most tiles there can be.
    if tile.z == 0u {
        return;
    }
    var r0 = wid.x * ROWS;
    if GATE_UP {
        r0 = wid.x * HALF;
    }
    slot0 = wid.y * TOK;
    if SHORT && tile.w == 1u {
        tile32(tile, wid, ids.lid, r0);
    } else {
        tile64(tile, wid, ids.lid, r0);
    }
}
