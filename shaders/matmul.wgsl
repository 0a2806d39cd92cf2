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
// Dispatch: (ceil(rows / (WG / TPR)), tiles, heads).
// Each workgroup owns WG / TPR weight rows of one tile. TPR invocations
// share a row and take every TPR-th unit: the unit is dequantized once into
// registers and dotted with the tile's TOK rows of x (TOK accumulators per
// invocation), then seg_sum adds the TPR partials of each.
//
// Overrides: GATE_UP: W holds gate rows then up rows of each matrix;
// y = silu(gate · x) · (up · x). ACCUM: y += result (residual adds).

const WG: u32 = 256u;
const TPR: u32 = 4u;
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

fn unit_x(w: Unit, xo: u32) -> f32 {
    var s = 0.0;
    for (var k = 0u; k < 8u; k++) {
        s += dot(w[k], x[xo + k]);
    }
    return s;
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
    let r = wid.x * (WG / TPR) + ids.lid / TPR;
    let t = ids.lid % TPR;
    let live = r < p.rows;
    let m = tile.x + wid.z;

    var xo: array<u32, TOK>;
    for (var j = 0u; j < TOK; j++) {
        // rows past the tile's count repeat its last row and are not written
        let a = order[tile.y + min(j, tile.z - 1u)];
        xo[j] = (a / p.x_div) * p.x_tok + wid.z * p.x_stride;
    }
    var acc: array<f32, TOK>;
    var acc_up: array<f32, TOK>;
    if live {
        let base = m * p.mat_units + r * p.units;
        for (var u = t; u < p.units; u += TPR) {
            let w = unit_load(base + u);
            for (var j = 0u; j < TOK; j++) {
                acc[j] += unit_x(w, xo[j] + 8u * u);
            }
            if GATE_UP {
                let w_up = unit_load(base + p.rows * p.units + u);
                for (var j = 0u; j < TOK; j++) {
                    acc_up[j] += unit_x(w_up, xo[j] + 8u * u);
                }
            }
        }
    }
    for (var j = 0u; j < TOK; j++) {
        var out = seg_sum(acc[j], ids, TPR);
        if GATE_UP {
            out = silu(out) * seg_sum(acc_up[j], ids, TPR);
        }
        if t == 0u && live && j < tile.z {
            let a = order[tile.y + j];
            let idx = a * p.y_tok + wid.z * p.y_stride + p.y_off + r;
            if ACCUM {
                y[idx] += out;
            } else {
                y[idx] = out;
            }
        }
    }
}
