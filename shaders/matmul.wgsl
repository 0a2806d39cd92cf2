// Prefill matmul: Y = W · X over a chunk of tokens, for every weight format
// (built with the same format files as matvec.wgsl, through `unit_load`).
//
// Rows of X are processed in tiles of up to TOK rows that share one weight
// matrix: tiles[wid.y] = (matrix, first, count), and the tile's rows are
// order[first .. first + count]. Row a reads x from vec4
// (a / x_div)·x_tok + z·x_stride and writes y[a·y_tok + z·y_stride + y_off + r].
// Dense matmuls use consecutive tiles over the identity order; routed
// experts use moe_group.wgsl's tiles (assignments a = token·n_used + slot
// sorted by expert, x_div = n_used so gate+up reads the token's row).
// z = wid.z is the head of batched-head matmuls (attn_k_b, attn_v_b): it
// picks matrix tile.x + z and offsets x and y.
//
// Bindings: 0 params (uniform), 1 x (array<vec4<f32>>), 2 y (array<f32>),
// 3 tiles (array<vec4<u32>>), 4 order (array<u32>), 5 unused, 6 (and 7)
// the weights of the format file.
// Dispatch: (ceil(rows / ROWS), tiles, heads).
// Each workgroup owns ROWS = RPI·WG/TPR weight rows of one tile: TPR
// invocations share RPI rows (WG/TPR apart) and take every TPR-th unit. The
// units are dequantized once into registers (unit_load) and each vec4 of x
// read is used for all RPI rows; every invocation keeps RPI·TOK partial
// sums, which seg_sum adds over the TPR invocations.
//
// Overrides: GATE_UP: W holds gate rows then up rows of each matrix;
// y = silu(gate · x) · (up · x) (gate first, then up: both at once would
// double the registers). ACCUM: y += result (residual adds).

const WG: u32 = 256u;
const TPR: u32 = 4u;
// Weight rows per invocation.
const RPI: u32 = 4u;
/// Rows of x per tile.
/// host: gpu::ops::MATMUL_TILE
const TOK: u32 = 8u;
/// Weight rows per workgroup.
/// host: gpu::ops::MATMUL_ROWS
const ROWS: u32 = RPI * WG / TPR;

alias Unit = array<vec4<f32>, 8>;

override GATE_UP: bool = false;
override ACCUM: bool = false;

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
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;
@group(0) @binding(3) var<storage, read> tiles: array<vec4<u32>>;
@group(0) @binding(4) var<storage, read> order: array<u32>;

// The format files' unit_dot reads x through xv (unused here).
fn xv(i: u32) -> vec4<f32> {
    return x[i];
}

// The four bytes of `w`, low first.
fn bytes4(w: u32) -> vec4<u32> {
    return (vec4<u32>(w) >> vec4<u32>(0u, 8u, 16u, 24u)) & vec4<u32>(0xFFu);
}

alias Sums = array<vec4<f32>, TOK>;

// Four rows' weights (one vec4 of each) dotted with the same x vec4.
fn rows_dot(a: vec4<f32>, b: vec4<f32>, c: vec4<f32>, d: vec4<f32>, v: vec4<f32>) -> vec4<f32> {
    return vec4<f32>(dot(a, v), dot(b, v), dot(c, v), dot(d, v));
}

// The four rows' dots of one unit with the 8 vec4 of x at xo: each x vec4
// is read once for the four rows. Constant indices only (see tile_dots).
fn quad_dot(w0: Unit, w1: Unit, w2: Unit, w3: Unit, xo: u32) -> vec4<f32> {
    var s = rows_dot(w0[0], w1[0], w2[0], w3[0], x[xo]);
    s += rows_dot(w0[1], w1[1], w2[1], w3[1], x[xo + 1u]);
    s += rows_dot(w0[2], w1[2], w2[2], w3[2], x[xo + 2u]);
    s += rows_dot(w0[3], w1[3], w2[3], w3[3], x[xo + 3u]);
    s += rows_dot(w0[4], w1[4], w2[4], w3[4], x[xo + 4u]);
    s += rows_dot(w0[5], w1[5], w2[5], w3[5], x[xo + 5u]);
    s += rows_dot(w0[6], w1[6], w2[6], w3[6], x[xo + 6u]);
    s += rows_dot(w0[7], w1[7], w2[7], w3[7], x[xo + 7u]);
    return s;
}

// Partial dots of rows r + i·WG/TPR, i < 4 (clamped to the matrix, the
// caller drops rows past it) of the matrix at unit `mat` with the tile's x
// rows at vec4 offsets xa, xb (rows 0-3, 4-7), over units t, t + TPR, …
// Written out per token: the accumulators are named values, never an
// array indexed in the loop, which drivers may place in local memory.
fn tile_dots(mat: u32, r: u32, t: u32, xa: vec4<u32>, xb: vec4<u32>) -> Sums {
    let b0 = mat + min(r, p.rows - 1u) * p.units;
    let b1 = mat + min(r + WG / TPR, p.rows - 1u) * p.units;
    let b2 = mat + min(r + 2u * WG / TPR, p.rows - 1u) * p.units;
    let b3 = mat + min(r + 3u * WG / TPR, p.rows - 1u) * p.units;
    var a0 = vec4<f32>(0.0);
    var a1 = vec4<f32>(0.0);
    var a2 = vec4<f32>(0.0);
    var a3 = vec4<f32>(0.0);
    var a4 = vec4<f32>(0.0);
    var a5 = vec4<f32>(0.0);
    var a6 = vec4<f32>(0.0);
    var a7 = vec4<f32>(0.0);
    for (var u = t; u < p.units; u += TPR) {
        let w0 = unit_load(b0 + u);
        let w1 = unit_load(b1 + u);
        let w2 = unit_load(b2 + u);
        let w3 = unit_load(b3 + u);
        let o = 8u * u;
        a0 += quad_dot(w0, w1, w2, w3, xa.x + o);
        a1 += quad_dot(w0, w1, w2, w3, xa.y + o);
        a2 += quad_dot(w0, w1, w2, w3, xa.z + o);
        a3 += quad_dot(w0, w1, w2, w3, xa.w + o);
        a4 += quad_dot(w0, w1, w2, w3, xb.x + o);
        a5 += quad_dot(w0, w1, w2, w3, xb.y + o);
        a6 += quad_dot(w0, w1, w2, w3, xb.z + o);
        a7 += quad_dot(w0, w1, w2, w3, xb.w + o);
    }
    return Sums(a0, a1, a2, a3, a4, a5, a6, a7);
}

fn silu(v: f32) -> f32 {
    return v / (1.0 + exp(-v));
}

@compute @workgroup_size(WG)
fn main(ids: Ids, @builtin(workgroup_id) wid: vec3<u32>) {
    let tile = tiles[wid.y];
    // Workgroup-uniform: routed dispatches launch the most tiles there can be.
    if tile.z == 0u {
        return;
    }
    let r = wid.x * ROWS + ids.lid / TPR;
    let t = ids.lid % TPR;
    let m = tile.x + wid.z;

    // x offsets of the tile's rows; rows past its count repeat its last
    // row and are not written.
    var xo: array<u32, TOK>;
    for (var j = 0u; j < TOK; j++) {
        let a = order[tile.y + min(j, tile.z - 1u)];
        xo[j] = (a / p.x_div) * p.x_tok + wid.z * p.x_stride;
    }
    let xa = vec4<u32>(xo[0], xo[1], xo[2], xo[3]);
    let xb = vec4<u32>(xo[4], xo[5], xo[6], xo[7]);
    let mat = m * p.mat_units;
    let gate = tile_dots(mat, r, t, xa, xb);
    var up: Sums;
    if GATE_UP {
        up = tile_dots(mat + p.rows * p.units, r, t, xa, xb);
    }
    for (var i = 0u; i < RPI; i++) {
        let ri = r + i * (WG / TPR);
        for (var j = 0u; j < TOK; j++) {
            var out = seg_sum(gate[j][i], ids, TPR);
            if GATE_UP {
                out = silu(out) * seg_sum(up[j][i], ids, TPR);
            }
            if t == 0u && ri < p.rows && j < tile.z {
                let a = order[tile.y + j];
                let idx = a * p.y_tok + wid.z * p.y_stride + p.y_off + ri;
                if ACCUM {
                    y[idx] += out;
                } else {
                    y[idx] = out;
                }
            }
        }
    }
}
