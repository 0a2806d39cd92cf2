enable f16;
enable wgpu_cooperative_matrix;

// Prefill matmul on cooperative matrices (tensor cores): the same product,
// tiles, bindings and params as matmul.wgsl (read its header), for
// adapters that offer 16x16x16 f16 x f16 -> f32 subgroup matrices.
//
// Bindings: as matmul.wgsl (0 params, 1 x, 2 y, 3 tiles, 4 order, 6 and 7
// the weights of the format file).
// Dispatch: (ceil(rows / OUT), tiles, heads), OUT = ROWS (or ROWS / 2 with
// GATE_UP); tiles of up to TOK rows of x.
// Each workgroup owns OUT output rows of one tile. Per step of KU units
// (64 columns) every invocation dequantizes one unit of one weight row
// (unit_load) into `wa` as f16 and two vec4 of the tile's x into `xs`;
// then subgroup s multiplies weight rows 16s..16s+16 (A, row-major) by the
// tile's two 16-token halves (B: column n is token n) into its two f32
// accumulators (C). With GATE_UP `wa` holds OUT gate rows then the same
// OUT up rows. After the last step each half's accumulators go to `cs`
// (column-major: token n's row r at n·ROWS + r), from which the epilogue
// (silu(gate)·up, ACCUM) writes y. Subgroups of 4 to 64 lanes: with fewer
// than 8 subgroups each takes a second 16-row block.
//
// Inputs are rounded to f16 (11-bit significand), products accumulate in
// f32: |error| <= 2^-10 · sum |w·x| per output, before the epilogue.

const WG: u32 = 256u;
/// Rows of x per tile (two B matrices' columns; shorter tiles are padded).
/// host: gpu::ops::MATMUL_TILE
const TOK: u32 = 32u;
/// Weight rows dequantized per workgroup and step (GATE_UP: half gate, half up).
/// host: gpu::ops::MATMUL_COOP_ROWS
const ROWS: u32 = 128u;
// 32-weight units per step: WG / ROWS, one per invocation.
const KU: u32 = 2u;
// f16 per row of wa and xs: a step's 64 columns and 8 of padding, so each
// row starts 16-byte aligned and rows fall on different banks.
const KS: u32 = 72u;
// 16-row blocks of wa: one per subgroup (8 subgroups of 32 lanes).
const BLOCKS: u32 = ROWS / 16u;

alias Unit = array<vec4<f32>, 8>;
alias MatA = coop_mat16x16<f16, A>;
alias MatB = coop_mat16x16<f16, B>;
alias MatC = coop_mat16x16<f32, C>;

override GATE_UP: bool = false;
override ACCUM: bool = false;

struct Params {
    rows: u32,
    units: u32,
    mat_units: u32,
    x_div: u32,
    x_tok: u32,
    y_tok: u32,
    x_stride: u32,
    y_stride: u32,
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

var<workgroup> wa: array<f16, ROWS * KS>;
var<workgroup> xs: array<f16, TOK * KS>;
// One 16-token half of the results at a time (32 KiB in all).
var<workgroup> cs: array<f32, ROWS * 16u>;

// The four bytes of `w`, low first.
fn bytes4(w: u32) -> vec4<u32> {
    return (vec4<u32>(w) >> vec4<u32>(0u, 8u, 16u, 24u)) & vec4<u32>(0xFFu);
}

fn put4(o: u32, v: vec4<f32>) {
    wa[o] = f16(v.x);
    wa[o + 1u] = f16(v.y);
    wa[o + 2u] = f16(v.z);
    wa[o + 3u] = f16(v.w);
}

// Unit `u` of the row at unit `base` into wa at `o` (zeros past the row).
// Unit element i holds weights 4i..4i+4; constant indices only.
fn stage_unit(o: u32, base: u32, u: u32) {
    var w = Unit();
    if u < p.units {
        w = unit_load(base + u);
    }
    put4(o, w[0]);
    put4(o + 4u, w[1]);
    put4(o + 8u, w[2]);
    put4(o + 12u, w[3]);
    put4(o + 16u, w[4]);
    put4(o + 20u, w[5]);
    put4(o + 24u, w[6]);
    put4(o + 28u, w[7]);
}

// One step's four 16-column products of wa's block `b` with token half
// `h` of xs.
fn block_step(acc: MatC, b: u32, h: u32) -> MatC {
    let o = b * 16u * KS;
    let t = h * 16u * KS;
    var c = coopMultiplyAdd(coopLoadT<MatA>(&wa[o], KS), coopLoad<MatB>(&xs[t], KS), acc);
    c = coopMultiplyAdd(coopLoadT<MatA>(&wa[o + 16u], KS), coopLoad<MatB>(&xs[t + 16u], KS), c);
    c = coopMultiplyAdd(coopLoadT<MatA>(&wa[o + 32u], KS), coopLoad<MatB>(&xs[t + 32u], KS), c);
    return coopMultiplyAdd(coopLoadT<MatA>(&wa[o + 48u], KS), coopLoad<MatB>(&xs[t + 48u], KS), c);
}

// x vec4 `q` of the step at unit u0 for the tile's row j (zeros past the
// row) into xs.
fn stage_x(xo: u32, j: u32, q: u32, u0: u32) {
    var xv = vec4<f32>(0.0);
    if 8u * u0 + q < 8u * p.units {
        xv = x[xo + 8u * u0];
    }
    xs[j * KS + 4u * q] = f16(xv.x);
    xs[j * KS + 4u * q + 1u] = f16(xv.y);
    xs[j * KS + 4u * q + 2u] = f16(xv.z);
    xs[j * KS + 4u * q + 3u] = f16(xv.w);
}

// The x vec4 offset (column 0, plus q) of the tile's row j; rows past its
// count repeat its last row and are not written.
fn x_at(tile: vec4<u32>, j: u32, z: u32, q: u32) -> u32 {
    let a = order[tile.y + min(j, tile.z - 1u)];
    return (a / p.x_div) * p.x_tok + z * p.x_stride + q;
}

// Accumulators `c` (row block b) and `c2` (row block b2, where it exists)
// of token half h into cs, then the epilogue; barriers around it for cs.
fn finish_half(c: MatC, c2: MatC, b: u32, b2: u32, lid: u32, tile: vec4<u32>, h: u32, r0: u32, z: u32) {
    if b < BLOCKS {
        coopStore(c, &cs[b * 16u], ROWS);
    }
    if b2 < BLOCKS {
        coopStore(c2, &cs[b2 * 16u], ROWS);
    }
    workgroupBarrier();
    write_out(lid, tile, h, r0, z);
    workgroupBarrier();
}

fn silu(v: f32) -> f32 {
    return v / (1.0 + exp(-v));
}

// The epilogue: y from cs for token half h of the tile and the
// workgroup's output rows r0.. (consecutive invocations write consecutive
// rows).
fn write_out(lid: u32, tile: vec4<u32>, h: u32, r0: u32, z: u32) {
    var out_rows = ROWS;
    if GATE_UP {
        out_rows = ROWS / 2u;
    }
    for (var e = lid; e < out_rows * 16u; e += WG) {
        let n = e / out_rows;
        let r = e % out_rows;
        if r0 + r < p.rows && h * 16u + n < tile.z {
            var v = cs[n * ROWS + r];
            if GATE_UP {
                v = silu(v) * cs[n * ROWS + out_rows + r];
            }
            let idx = order[tile.y + h * 16u + n] * p.y_tok + z * p.y_stride + p.y_off + r0 + r;
            if ACCUM {
                y[idx] += v;
            } else {
                y[idx] = v;
            }
        }
    }
}

@compute @workgroup_size(WG)
fn main(
    @builtin(local_invocation_index) lid: u32,
    @builtin(subgroup_id) sg: u32,
    @builtin(num_subgroups) n_sg: u32,
    @builtin(workgroup_id) wid: vec3<u32>,
) {
    let tile = tiles[wid.y];
    // Workgroup-uniform: routed dispatches launch the most tiles there can be.
    if tile.z == 0u {
        return;
    }
    var out_rows = ROWS;
    if GATE_UP {
        out_rows = ROWS / 2u;
    }
    let r0 = wid.x * out_rows;
    let mat = (tile.x + wid.z) * p.mat_units;
    // This invocation's weight row (clamped: rows past the matrix are
    // computed and dropped) and unit of each step.
    let lr = lid / KU;
    var row = min(r0 + lr % out_rows, p.rows - 1u);
    if GATE_UP && lr >= out_rows {
        row += p.rows;
    }
    let base = mat + row * p.units;
    let wo = lr * KS + (lid % KU) * 32u;
    // This invocation's x vec4s of each step: vec4 q of tokens j, j + 16.
    let j = lid / 16u;
    let q = lid % 16u;
    let xo0 = x_at(tile, j, wid.z, q);
    let xo1 = x_at(tile, j + 16u, wid.z, q);
    // A second block per subgroup only where subgroups are wider than 32.
    let b2 = sg + n_sg;
    // (row block, token half): sg 0, sg 1, b2 0, b2 1
    var c00 = MatC();
    var c01 = MatC();
    var c10 = MatC();
    var c11 = MatC();
    for (var u0 = 0u; u0 < p.units; u0 += KU) {
        stage_unit(wo, base, u0 + lid % KU);
        stage_x(xo0, j, q, u0);
        stage_x(xo1, j + 16u, q, u0);
        workgroupBarrier();
        if sg < BLOCKS {
            c00 = block_step(c00, sg, 0u);
            c01 = block_step(c01, sg, 1u);
        }
        if b2 < BLOCKS {
            c10 = block_step(c10, b2, 0u);
            c11 = block_step(c11, b2, 1u);
        }
        workgroupBarrier();
    }
    finish_half(c00, c10, sg, b2, lid, tile, 0u, r0, wid.z);
    finish_half(c01, c11, sg, b2, lid, tile, 1u, r0, wid.z);
}
