enable f16;
enable wgpu_cooperative_matrix;

// Prefill matmul on cooperative matrices (tensor cores): the same product,
// bindings and params as matmul.wgsl (read its header), for adapters that
// offer 16x16x16 f16 x f16 -> f32 subgroup matrices, in tiles of TOK = 64
// tokens (matmul.wgsl's are 32).
//
// Bindings: as matmul.wgsl (0 params, 1 x, 2 y, 3 tiles, 4 order, 6 and 7
// the weights of the format file).
// Dispatch: (ceil(rows / OUT), tiles, heads), OUT = ROWS (or ROWS / 2 with
// GATE_UP); tiles of up to TOK rows of x, or with SHORT up to TOK / 2
// where the tile's fourth word is 1 (moe_group.wgsl's `small` tiles).
//
// Each workgroup owns OUT output rows of one tile. Per step of KU units (64
// columns) invocation i dequantizes unit i % 2 of weight row i / 2 into
// `wa` (the format's stage_load / stage_store: stage_raw.wgsl or
// stage_unit.wgsl) and four x vec4s of the tile into `xs`, both as f16;
// then subgroup s multiplies two 16-row blocks of weights (A: rows
// 32·(s % 4) ..+32) by two 16-token quarters of the tile (B: column n is
// token n; quarters 2·((s / 4) % 2) and the next) into its four f32
// accumulators (C), two A and two B fragments loaded a k-block for four
// products (one row block by all four quarters loaded each B fragment in
// all eight subgroups: H100 pp512 +2%, session 16). The next
// step's weights and x are loaded before this step's products and held
// through them (raw words where the format splits unit_load). With
// GATE_UP `wa` holds OUT gate rows then the same OUT up rows. After the
// last step each quarter's accumulators go to `cs` (column-major, in
// floats: token n's row r at n·ROWS + r), from which the epilogue
// (silu(gate)·up, ACCUM) writes y, a quarter at a time between two
// barriers.
//
// Direct stores: a dense tile of TOK tokens and whole row blocks, not
// GATE_UP, skips that epilogue: its accumulators are stored
// straight into y, whose rows are its consecutive tokens (H200: such
// matmuls 15-30% faster; session 32). So do the routed tiles of a
// product that is not gate+up (the experts' down, `slots()`): it writes
// tile t's rows at slots t·TOK .. (moe_group.wgsl's `rows` says which is
// whose), so each tile's rows are consecutive too, and the rows past its
// count are scratch. With ACCUM y's fragment is loaded and added to the
// finished accumulator (a component-wise f32 add, as the epilogue's):
// accumulators started from y's residual instead took the built-in
// model's GPU perplexity from +0.005% of the CPU reference's to -0.097%
// (the tensor cores' f32 sums keep fewer of a small product's bits beside
// a large addend).
//
// Subgroups of 4 to 64 lanes: with fewer than 8 subgroups (four of 64
// lanes, WIDE) each also takes quarters 2 and 3.
// A 32-token tile (tile32, with SHORT) stages two x vec4s an invocation
// and each subgroup takes one row block by both quarters: half the x
// staging, B fragments and products of a 64-token step, where a
// half-full 64-token tile pays for all of them (a 512-token chunk gives
// an expert ~32 tokens; H100: routed matmuls -5%, session 22). Two
// functions, one chosen per workgroup, rather than branches inside the
// step (session 17: those cost more than they saved).
//
// Why these layouts (H100 measurements in docs/perf-journal.md, session
// 10): the weights' loads and dequantization, not the tensor-core
// products, bounded the kernel then. (Session 22: with no weight staging
// at all a dense matmul runs only 15-25% faster, and with no x staging
// no faster; the rest is the step's fixed part: loads, two barriers,
// fragment loads, products.) So the tile is as wide as workgroup memory
// allows (each weight unit is staged once per 64 tokens; a routed
// expert's ~32 tokens of a 512-token chunk fit one tile); the two lanes
// of a row load its two adjacent units (half the lines per subgroup load
// of one unit per row); and a step holds raw words, not 32 floats,
// through its products, so more workgroups fit.
//
// `wa` and `xs` are arrays of vec4<f16>, so four weights (or x values)
// go to workgroup memory in one eight-byte store, not four two-byte ones,
// and `wa` is row-major (A loaded by coopLoadT): four consecutive weights
// of a row are consecutive there. Their cooperative loads count the
// stride in vec4s, as SPIR-V counts it in the pointee's elements
// (tests/gpu_matmul.rs checks it). H200, session 34: every coop matmul
// 3-5% faster, the chunk -3%. The column-major tile with two-byte stores
// was the layout before; in the CUDA twin (session 21) row-major with
// wide stores was -12%, but WGSL's array<f16, 8> elements, two-byte
// aligned, got no wide stores and lost.
//
// Inputs are rounded to f16 (11-bit significand), products accumulate in
// f32: |error| <= 2^-10 · sum |w·x| per output, before the epilogue.

const WG: u32 = 256u;
/// Rows of x per tile (four B matrices' columns; shorter tiles are padded).
/// host: gpu::ops::MATMUL_COOP_TILE
const TOK: u32 = 64u;
/// Weight rows dequantized per workgroup and step (GATE_UP: half gate, half up).
/// host: gpu::ops::MATMUL_COOP_ROWS
const ROWS: u32 = 128u;
// 32-weight units per step: WG / ROWS, one per invocation.
const KU: u32 = 2u;
// f16 per row of wa: a step's 64 columns and 8 of padding (144 bytes: a
// row starts 16-byte aligned, as a fragment's rows must).
const RS: u32 = 72u;
// f16 per row of xs: a step's 64 columns and 8 of padding (the same).
const KS: u32 = 72u;
// 16-row blocks of wa: one per subgroup (8 subgroups of 32 lanes).
const BLOCKS: u32 = ROWS / 16u;

alias Unit = array<vec4<f32>, 8>;
alias MatA = coop_mat16x16<f16, A>;
alias MatB = coop_mat16x16<f16, B>;
alias MatC = coop_mat16x16<f32, C>;

override GATE_UP: bool = false;
override ACCUM: bool = false;
// Subgroups may be wider than 32 lanes (fewer than BLOCKS subgroups): each
// then takes the other two quarters too. Off where they cannot be, so
// those accumulators take no registers.
override WIDE: bool = true;
// Tiles may be short (tile.w = 1: tile32). Off for the dense matmuls, whose
// tiles are all full but a chunk's last: that kernel then has tile64
// alone, which ran 2-4% faster than beside tile32 (H100, session 22).
override SHORT: bool = true;

// Routed and not gate+up (the experts' down): y's rows are tile slots,
// tile t's token j at row t·TOK + j, not its assignment's row.
fn slots() -> bool {
    return SHORT && !GATE_UP;
}

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
    row_units: u32,
    _pad1: u32,
    _pad2: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read_write> y: array<f32>;
@group(0) @binding(3) var<storage, read> tiles: array<vec4<u32>>;
@group(0) @binding(4) var<storage, read> order: array<u32>;

// With slots(): the workgroup's tile's first row of y (wid.y · TOK).
var<private> slot0: u32;

// Row-major, four f16 an element: row r, column group g (columns 4g ..
// 4g + 4) at r·RS/4 + g, the second unit's groups swapped in pairs
// (`swapped`).
var<workgroup> wa: array<vec4<f16>, ROWS * RS / 4u>;
// Token-major, the same: token n, column group g at n·KS/4 + swapped(g).
var<workgroup> xs: array<vec4<f16>, TOK * KS / 4u>;
// This invocation's unit of a step (0 or 1): its groups go swapped.
var<private> swz: u32;
// One 16-token quarter of the results at a time (35 KiB in all).
var<workgroup> cs: array<vec4<f32>, ROWS * 4u>;

// The four bytes of `w`, low first.
fn bytes4(w: u32) -> vec4<u32> {
    return (vec4<u32>(w) >> vec4<u32>(0u, 8u, 16u, 24u)) & vec4<u32>(0xFFu);
}

// Column group g of a step as stored: the second unit's groups (8..16)
// swapped in pairs, in wa and xs alike (so the products' k order is
// permuted the same on both sides). The two lanes of a row store its two
// units' groups at the same time: without the swap they fell on the same
// banks (rows 36 words apart); with it each half-subgroup's eight-byte
// stores cover all 32 banks.
fn swapped(g: u32) -> u32 {
    return g ^ (g >> 3u);
}

// A unit into wa at vec4 `o` (its row's first group of the unit), as f16,
// one eight-byte store per four weights. Unit element i holds weights
// 4i..4i+4; constant indices only. Group i goes to o + (i ^ swz), which is
// `swapped`'s order (o is a multiple of 8 past the row's first group),
// written as two bases, e for the even groups and d for the odd, so the
// eight stores take no per-store arithmetic.
fn store_unit(o: u32, w: Unit) {
    let e = o + swz;
    let d = o + 1u - swz;
    wa[e] = vec4<f16>(w[0]);
    wa[d] = vec4<f16>(w[1]);
    wa[e + 2u] = vec4<f16>(w[2]);
    wa[d + 2u] = vec4<f16>(w[3]);
    wa[e + 4u] = vec4<f16>(w[4]);
    wa[d + 4u] = vec4<f16>(w[5]);
    wa[e + 6u] = vec4<f16>(w[6]);
    wa[d + 6u] = vec4<f16>(w[7]);
}

// Unit `u` of the row at unit `base` as the format stages it (the format's
// `stage_load`, or stage_unit.wgsl's; zeros past the row).
fn load_unit(base: u32, u: u32) -> Staged {
    var w = Staged();
    if u < p.units {
        w = stage_load(base + u);
    }
    return w;
}

// The fragments and one product. (Calls: naga's uniformity analysis
// rejects cooperative operations written inside a branch on subgroup_id,
// and the blocks branch on it.) Offsets count f16 (multiples of 16); the
// strides count wa's and xs's vec4 elements, as SPIR-V's cooperative
// loads count the pointee's.
// A: row block blk of wa (rows 16·blk ..+16), the step's columns k ..+16.
fn load_a(k: u32, blk: u32) -> MatA {
    return coopLoadT<MatA>(&wa[(16u * blk * RS + k) / 4u], RS / 4u);
}

// B: xs from f16 offset o (token n's row is column n).
fn load_b(o: u32) -> MatB {
    return coopLoad<MatB>(&xs[o / 4u], KS / 4u);
}

fn mma(a: MatA, b: MatB, c: MatC) -> MatC {
    return coopMultiplyAdd(a, b, c);
}

// x vec4 `q` of the step at unit u0 from offset xo (zeros past the row).
fn load_x(xo: u32, q: u32, u0: u32) -> vec4<f32> {
    var xv = vec4<f32>(0.0);
    if 8u * u0 + q < 8u * p.units {
        xv = x[xo + 8u * u0];
    }
    return xv;
}

// x vec4 `q` of the tile's row j into xs.
fn store_x(j: u32, q: u32, xv: vec4<f32>) {
    xs[j * (KS / 4u) + swapped(q)] = vec4<f16>(xv);
}

// The x vec4 offset (column 0, plus q) of the tile's row j; rows past its
// count repeat its last row and are not written.
fn x_at(tile: vec4<u32>, j: u32, z: u32, q: u32) -> u32 {
    let a = order[tile.y + min(j, tile.z - 1u)];
    return (a / p.x_div) * p.x_tok + z * p.x_stride + q;
}

// Token quarter h's accumulators of row blocks at cs's float o and o + 16
// (o a multiple of 16; cs counts vec4s, as do the stores' strides) into
// cs: `c` and `c2` where `on`, or (the second set of a wide subgroup) `e`
// and `e2` where `on2`; then the epilogue.
fn finish(c: MatC, c2: MatC, on: bool, e: MatC, e2: MatC, on2: bool, o: u32, lid: u32, tile: vec4<u32>, h: u32, r0: u32, z: u32) {
    if on {
        coopStore(c, &cs[o / 4u], ROWS / 4u);
        coopStore(c2, &cs[o / 4u + 4u], ROWS / 4u);
    }
    if WIDE && on2 {
        coopStore(e, &cs[o / 4u], ROWS / 4u);
        coopStore(e2, &cs[o / 4u + 4u], ROWS / 4u);
    }
    emit(lid, tile, h, r0, z);
}

// tile32's: token quarter h's accumulator of the row block at cs's float o
// where `on`, and of the block four further where `on2` (wide).
fn finish32(c: MatC, on: bool, e: MatC, on2: bool, o: u32, lid: u32, tile: vec4<u32>, h: u32, r0: u32, z: u32) {
    if on {
        coopStore(c, &cs[o / 4u], ROWS / 4u);
    }
    if WIDE && on2 {
        coopStore(e, &cs[o / 4u + 16u], ROWS / 4u);
    }
    emit(lid, tile, h, r0, z);
}

// The epilogue of one token quarter, with barriers around it for cs.
fn emit(lid: u32, tile: vec4<u32>, h: u32, r0: u32, z: u32) {
    workgroupBarrier();
    write_out(lid, tile, h, r0, z);
    workgroupBarrier();
}

// The row of y of the tile's token j: its slot, or its assignment's row.
fn y_row(tile: vec4<u32>, j: u32) -> u32 {
    if slots() {
        return slot0 + j;
    }
    return order[tile.y + j];
}

// Direct: y's offset of the fragment of row block b (of the workgroup's
// rows from r0) by token quarter h of a tile whose rows of y are
// consecutive (a dense tile's tokens, or slots()).
fn y_at(tile: vec4<u32>, b: u32, h: u32, r0: u32, z: u32) -> u32 {
    var first = tile.y;
    if slots() {
        first = slot0;
    }
    return (first + 16u * h) * p.y_tok + z * p.y_stride + p.y_off + r0 + 16u * b;
}

// Direct with ACCUM: the finished fragment `c` plus y's at `o`.
fn add_y(c: MatC, o: u32) -> MatC {
    return c + coopLoad<MatC>(&y[o], p.y_tok);
}

// Whether the workgroup's accumulators go straight to y: its rows of y
// consecutive (slots(), or a full dense tile), whole row blocks, aligned.
fn direct_to_y(tile: vec4<u32>, r0: u32) -> bool {
    return !GATE_UP && (slots() || (!SHORT && tile.z == TOK)) && r0 + ROWS <= p.rows
        && ((p.y_tok | p.y_stride | p.y_off) & 3u) == 0u;
}

// Direct: a fragment into y where `on`.
fn c_to(c: MatC, on: bool, o: u32) {
    // (a stride read inline is not emitted before the store: naga 30's
    // SPIR-V writer then panics)
    let stride = p.y_tok;
    if on {
        coopStore(c, &y[o], stride);
    }
}

fn silu4(v: vec4<f32>) -> vec4<f32> {
    return v / (1.0 + exp(-v));
}

// Output row `row`'s value v into y at idx, where the row is the matrix's.
fn put_y(idx: u32, row: u32, v: f32) {
    if row < p.rows {
        if ACCUM {
            y[idx] += v;
        } else {
            y[idx] = v;
        }
    }
}

// The epilogue: y from cs for token quarter h of the tile and the
// workgroup's output rows r0..: four consecutive rows an invocation, one
// vec4 read of cs (two with GATE_UP) for four stores. H200, session 35:
// the routed gate+up -1.6%, pp512 +2.5% over three rounds, against one
// row an invocation, although each store instruction now spans four
// times the bytes of y.
fn write_out(lid: u32, tile: vec4<u32>, h: u32, r0: u32, z: u32) {
    var out_rows = ROWS;
    if GATE_UP {
        out_rows = ROWS / 2u;
    }
    let q4 = out_rows / 4u;
    for (var e = lid; e < q4 * 16u; e += WG) {
        let n = e / q4;
        let r = 4u * (e % q4);
        if h * 16u + n < tile.z {
            var v = cs[(n * ROWS + r) / 4u];
            if GATE_UP {
                v = silu4(v) * cs[(n * ROWS + out_rows + r) / 4u];
            }
            let idx = y_row(tile, h * 16u + n) * p.y_tok + z * p.y_stride + p.y_off + r0 + r;
            put_y(idx, r0 + r, v.x);
            put_y(idx + 1u, r0 + r + 1u, v.y);
            put_y(idx + 2u, r0 + r + 2u, v.z);
            put_y(idx + 3u, r0 + r + 3u, v.w);
        }
    }
}

// What every invocation stages, whichever the tile's shape: its weight
// row's first unit (`base`, clamped: rows past the matrix are computed and
// dropped), its unit of each step (`lu`) and where that goes in wa (`wo`);
// its x vec4 q of tokens j + 16m; the workgroup's first output row.
struct Lane {
    base: u32,
    lu: u32,
    wo: u32,
    j: u32,
    q: u32,
    r0: u32,
}

fn lane(lid: u32, wid: vec3<u32>, tile: vec4<u32>) -> Lane {
    var out_rows = ROWS;
    if GATE_UP {
        out_rows = ROWS / 2u;
    }
    let r0 = wid.x * out_rows;
    let lr = lid / KU;
    let lu = lid % KU;
    var row = min(r0 + lr % out_rows, p.rows - 1u);
    if GATE_UP && lr >= out_rows {
        row += p.rows;
    }
    let base = (tile.x + wid.z) * p.mat_units + row * p.row_units;
    swz = lu;
    return Lane(base, lu, lr * (RS / 4u) + 8u * lu, lid / 16u, lid % 16u, r0);
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
    let l = lane(lid, wid, tile);
    slot0 = wid.y * TOK;
    if SHORT && tile.w != 0u {
        tile32(l, lid, sg, n_sg, wid.z, tile);
    } else {
        tile64(l, lid, sg, n_sg, wid.z, tile);
    }
}

// A tile of up to 64 tokens.
fn tile64(l: Lane, lid: u32, sg: u32, n_sg: u32, z: u32, tile: vec4<u32>) {
    let j = l.j;
    let q = l.q;
    let xo0 = x_at(tile, j, z, q);
    let xo1 = x_at(tile, j + 16u, z, q);
    let xo2 = x_at(tile, j + 32u, z, q);
    let xo3 = x_at(tile, j + 48u, z, q);
    // Subgroup s owns row blocks rb, rb + 1 and token quarters hq, hq + 1:
    // two A and two B fragments a k-block for four products (one A and
    // four B took a quarter more fragment loads). Subgroups 8 and up idle.
    // Wide subgroups (four of 64 lanes) also own quarters 2 and 3 (`e`).
    let busy = sg < BLOCKS;
    let second = WIDE && n_sg < BLOCKS;
    let rb = 2u * (sg % 4u);
    let hq = 2u * ((sg / 4u) % 2u);
    // Straight between the accumulators and y: no `cs`, no epilogue
    // barriers. Workgroup-uniform.
    let direct = direct_to_y(tile, l.r0);
    let sec = busy && second && direct;
    let on = busy && direct;
    // c<row block><quarter>, relative to (rb, hq); e the same at quarter 2
    var c00 = MatC();
    var c01 = MatC();
    var c10 = MatC();
    var c11 = MatC();
    var e00 = MatC();
    var e01 = MatC();
    var e10 = MatC();
    var e11 = MatC();
    // The next step's weights and x are loaded before this step's products,
    // so their latency overlaps them.
    var w = load_unit(l.base, l.lu);
    var x0 = load_x(xo0, q, 0u);
    var x1 = load_x(xo1, q, 0u);
    var x2 = load_x(xo2, q, 0u);
    var x3 = load_x(xo3, q, 0u);
    for (var u0 = 0u; u0 < p.units; u0 += KU) {
        stage_store(l.wo, w);
        store_x(j, q, x0);
        store_x(j + 16u, q, x1);
        store_x(j + 32u, q, x2);
        store_x(j + 48u, q, x3);
        workgroupBarrier();
        w = load_unit(l.base, u0 + KU + l.lu);
        x0 = load_x(xo0, q, u0 + KU);
        x1 = load_x(xo1, q, u0 + KU);
        x2 = load_x(xo2, q, u0 + KU);
        x3 = load_x(xo3, q, u0 + KU);
        for (var k = 0u; k < KU * 32u; k += 16u) {
            if busy {
                let a0 = load_a(k, rb);
                let a1 = load_a(k, rb + 1u);
                let b0 = load_b(hq * 16u * KS + k);
                let b1 = load_b(hq * 16u * KS + 16u * KS + k);
                c00 = mma(a0, b0, c00);
                c01 = mma(a0, b1, c01);
                c10 = mma(a1, b0, c10);
                c11 = mma(a1, b1, c11);
                if second {
                    let b2 = load_b(32u * KS + k);
                    let b3 = load_b(48u * KS + k);
                    e00 = mma(a0, b2, e00);
                    e01 = mma(a0, b3, e01);
                    e10 = mma(a1, b2, e10);
                    e11 = mma(a1, b3, e11);
                }
            }
        }
        workgroupBarrier();
    }
    if direct {
        if ACCUM && on {
            c00 = add_y(c00, y_at(tile, rb, hq, l.r0, z));
            c01 = add_y(c01, y_at(tile, rb, hq + 1u, l.r0, z));
            c10 = add_y(c10, y_at(tile, rb + 1u, hq, l.r0, z));
            c11 = add_y(c11, y_at(tile, rb + 1u, hq + 1u, l.r0, z));
        }
        if ACCUM && sec {
            e00 = add_y(e00, y_at(tile, rb, 2u, l.r0, z));
            e01 = add_y(e01, y_at(tile, rb, 3u, l.r0, z));
            e10 = add_y(e10, y_at(tile, rb + 1u, 2u, l.r0, z));
            e11 = add_y(e11, y_at(tile, rb + 1u, 3u, l.r0, z));
        }
        c_to(c00, on, y_at(tile, rb, hq, l.r0, z));
        c_to(c01, on, y_at(tile, rb, hq + 1u, l.r0, z));
        c_to(c10, on, y_at(tile, rb + 1u, hq, l.r0, z));
        c_to(c11, on, y_at(tile, rb + 1u, hq + 1u, l.r0, z));
        c_to(e00, sec, y_at(tile, rb, 2u, l.r0, z));
        c_to(e01, sec, y_at(tile, rb, 3u, l.r0, z));
        c_to(e10, sec, y_at(tile, rb + 1u, 2u, l.r0, z));
        c_to(e11, sec, y_at(tile, rb + 1u, 3u, l.r0, z));
        return;
    }
    let lo = busy && hq == 0u;
    let hi = busy && hq == 2u;
    let o = 16u * rb;
    finish(c00, c10, lo, e00, e10, false, o, lid, tile, 0u, l.r0, z);
    finish(c01, c11, lo, e01, e11, false, o, lid, tile, 1u, l.r0, z);
    finish(c00, c10, hi, e00, e10, busy && second, o, lid, tile, 2u, l.r0, z);
    finish(c01, c11, hi, e01, e11, busy && second, o, lid, tile, 3u, l.r0, z);
}

// A tile of up to 32 tokens (tile.w = 1: an expert's last 32 or fewer
// assignments, a chunk's last 32 or fewer tokens): half the x staging, B
// fragments and products of a 64-token step. Subgroup s owns row block s
// (and s + 4 where wide) by both token quarters: one A and two B
// fragments a k-block for two products.
fn tile32(l: Lane, lid: u32, sg: u32, n_sg: u32, z: u32, tile: vec4<u32>) {
    let j = l.j;
    let q = l.q;
    let xo0 = x_at(tile, j, z, q);
    let xo1 = x_at(tile, j + 16u, z, q);
    let busy = sg < BLOCKS;
    let second = WIDE && n_sg < BLOCKS;
    let rb = sg % BLOCKS;
    // c<quarter> of row block rb; e the same of rb + 4
    var c0 = MatC();
    var c1 = MatC();
    var e0 = MatC();
    var e1 = MatC();
    let direct = direct_to_y(tile, l.r0);
    let on = busy && direct;
    let sec = busy && second && direct;
    var w = load_unit(l.base, l.lu);
    var x0 = load_x(xo0, q, 0u);
    var x1 = load_x(xo1, q, 0u);
    for (var u0 = 0u; u0 < p.units; u0 += KU) {
        stage_store(l.wo, w);
        store_x(j, q, x0);
        store_x(j + 16u, q, x1);
        workgroupBarrier();
        w = load_unit(l.base, u0 + KU + l.lu);
        x0 = load_x(xo0, q, u0 + KU);
        x1 = load_x(xo1, q, u0 + KU);
        for (var k = 0u; k < KU * 32u; k += 16u) {
            if busy {
                let a0 = load_a(k, rb);
                let b0 = load_b(k);
                let b1 = load_b(16u * KS + k);
                c0 = mma(a0, b0, c0);
                c1 = mma(a0, b1, c1);
                if second {
                    let a1 = load_a(k, rb + 4u);
                    e0 = mma(a1, b0, e0);
                    e1 = mma(a1, b1, e1);
                }
            }
        }
        workgroupBarrier();
    }
    if direct {
        if ACCUM && on {
            c0 = add_y(c0, y_at(tile, rb, 0u, l.r0, z));
            c1 = add_y(c1, y_at(tile, rb, 1u, l.r0, z));
        }
        if ACCUM && sec {
            e0 = add_y(e0, y_at(tile, rb + 4u, 0u, l.r0, z));
            e1 = add_y(e1, y_at(tile, rb + 4u, 1u, l.r0, z));
        }
        c_to(c0, on, y_at(tile, rb, 0u, l.r0, z));
        c_to(c1, on, y_at(tile, rb, 1u, l.r0, z));
        c_to(e0, sec, y_at(tile, rb + 4u, 0u, l.r0, z));
        c_to(e1, sec, y_at(tile, rb + 4u, 1u, l.r0, z));
        return;
    }
    let o = 16u * rb;
    finish32(c0, busy, e0, busy && second, o, lid, tile, 0u, l.r0, z);
    finish32(c1, busy, e1, busy && second, o, lid, tile, 1u, l.r0, z);
}
