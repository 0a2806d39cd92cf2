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
const RPI: u32 = 2u;
// Rows of x per tile; ops::MATMUL_TILE on the host.
const TOK: u32 = 8u;

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

alias Sums = array<array<f32, TOK>, RPI>;

// Partial dots of rows r + i·WG/TPR (i < RPI; clamped to the matrix, the
// caller drops rows past it) of the matrix at unit `mat` with the tile's x
// rows at vec4 offsets xo, over units t, t + TPR, …
fn tile_dots(mat: u32, r: u32, t: u32, xo: array<u32, TOK>) -> Sums {
    var acc: Sums;
    var base: array<u32, RPI>;
    for (var i = 0u; i < RPI; i++) {
        base[i] = mat + min(r + i * (WG / TPR), p.rows - 1u) * p.units;
    }
    for (var u = t; u < p.units; u += TPR) {
        var w: array<Unit, RPI>;
        for (var i = 0u; i < RPI; i++) {
            w[i] = unit_load(base[i] + u);
        }
        for (var j = 0u; j < TOK; j++) {
            for (var k = 0u; k < 8u; k++) {
                let xk = x[xo[j] + 8u * u + k];
                for (var i = 0u; i < RPI; i++) {
                    acc[i][j] += dot(w[i][k], xk);
                }
            }
        }
    }
    return acc;
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
    let r = wid.x * (RPI * WG / TPR) + ids.lid / TPR;
    let t = ids.lid % TPR;
    let m = tile.x + wid.z;

    var xo: array<u32, TOK>;
    for (var j = 0u; j < TOK; j++) {
        // rows past the tile's count repeat its last row and are not written
        let a = order[tile.y + min(j, tile.z - 1u)];
        xo[j] = (a / p.x_div) * p.x_tok + wid.z * p.x_stride;
    }
    let mat = m * p.mat_units;
    let gate = tile_dots(mat, r, t, xo);
    var up: Sums;
    if GATE_UP {
        up = tile_dots(mat + p.rows * p.units, r, t, xo);
    }
    for (var i = 0u; i < RPI; i++) {
        let ri = r + i * (WG / TPR);
        for (var j = 0u; j < TOK; j++) {
            var out = seg_sum(gate[i][j], ids, TPR);
            if GATE_UP {
                out = silu(out) * seg_sum(up[i][j], ids, TPR);
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
