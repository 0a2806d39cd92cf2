enable f16;
enable wgpu_cooperative_matrix;

// Prefill attention on cooperative matrices (tensor cores): MLA over the
// latent cache in absorbed form, for adapters that offer 16x16x16
// f16 x f16 -> f32 subgroup matrices and run it in at least 8 subgroups
// (`ops::attention_coop_fits`). The rows of the products are a chunk's
// (token, head) pairs, row = token · n_head + head, so every cached row
// read by a workgroup serves M of them at once, and the positions are the
// columns:
//   S = Q · Cᵀ        Q: [q_abs ‖ rope(q_pe)] · scale · log2 e, C: cache rows
//   O += P · C[:, :N_KV]   P = 2^(S − m), m and l = Σ P per row
// Each token attends over its causal prefix, positions [0, n_pos).
//
// Bindings: 0 params (uniform; n_tok is the chunk's, written per chunk),
// 1 steps (array<Step>: n_pos, rope table), 2 q_abs (array<vec4<f32>>,
// rows × N_KV/4), 3 q (array<f32>, rows × (n_nope + n_rot), the q_b
// output: q_pe is its tail, roped here), 4 cache (array<f16>: rows of
// N_KV + n_rot), 5 o (array<f32>, rows × N_KV, written normalised),
// 6 ml (array<vec2<f32>>, (m + ln l, 1) per row, as attention.wgsl writes).
// Dispatch: (ceil(n_tok · n_head / M), 1, 1).
//
// Each workgroup owns M = 32 rows. Their queries go to `qs` once, as f16.
// Per tile of T = 32 positions:
//   scores:  subgroup s (< 8) multiplies position block s % 2 by row
//            block (s % 4) / 2 over half s / 4 of the row's 16-wide k
//            steps (Sᵀ = C · Qᵀ: the cache rows an A matrix loaded
//            row-major straight from the cache, Q a B matrix from `qs`),
//            into `ss`;
//   softmax: invocations 8r .. 8r + 8 own row r, four positions each: the
//            two halves summed, masked, the row's max and sum reduced over
//            the 8 lanes by shuffles, P written to `ps` as f16;
//   values:  subgroup s (< N_KV / 64) adds P · C[:, 64s .. 64s + 64] into
//            its 2 × 4 accumulators, C loaded row-major from the cache.
// Three barriers a tile (workgroupUniformLoad is two). The accumulators
// are opaque, so the running max is lazy: it moves only when a tile's max exceeds it by more than TH (P then
// stays below 2^TH, well inside f16), and only then are the rows rescaled,
// through `ss`, in a workgroup-uniform branch. The last tile is moved back
// to end at the workgroup's last position (positions already done masked)
// so no row past the filled cache is read where there are at least T.
//
// Inputs are rounded to f16 (the cache already is): a score's error is
// about 2^-11 · Σ|q·c| (in log2 units, after the scale), P's relative
// error 2^-11; sums and the softmax are f32.

const WG: u32 = 256u;
/// (token, head) rows per workgroup.
/// host: gpu::ops::ATTENTION_COOP_ROWS
const M: u32 = 32u;
/// Positions per tile.
/// host: gpu::ops::ATTENTION_COOP_TILE
const T: u32 = 32u;
/// The widest row: MAX_LATENT + MAX_ROPE.
/// host: gpu::ops::ATTENTION_COOP_ROW
const MAX_ROW: u32 = 576u;
// f16 per row of qs: 8 of padding, so a fragment's 16 rows start on
// different banks.
const QS: u32 = MAX_ROW + 8u;
// f16 per row of ps, the same.
const PS: u32 = T + 8u;
// The running max moves when a tile's exceeds it by more than this
// (log2 units).
const TH: f32 = 8.0;
// Finite "minus infinity": exp2(NEG - m) underflows to 0 without NaNs.
const NEG: f32 = -3.0e38;
const LOG2E: f32 = 1.4426950408889634;
const LN2: f32 = 0.6931471805599453;

// The latent width (a multiple of 64 up to 512): subgroups past N_KV / 64
// own no columns.
override N_KV: u32 = 512u;

alias MatA = coop_mat16x16<f16, A>;
alias MatB = coop_mat16x16<f16, B>;
alias MatC = coop_mat16x16<f32, C>;

struct Params {
    n_rot: u32,
    n_nope: u32,
    scale: f32,
    n_head: u32,
    // tokens in the chunk
    n_tok: u32,
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> steps: array<Step>;
@group(0) @binding(2) var<storage, read> q_abs: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read> q: array<f32>;
@group(0) @binding(4) var<storage, read> cache: array<f16>;
@group(0) @binding(5) var<storage, read_write> o: array<f32>;
@group(0) @binding(6) var<storage, read_write> ml: array<vec2<f32>>;

// The rows' queries, row-major: row r, dim k at r·QS + k.
var<workgroup> qs: array<f16, M * QS>;
// The scores' two halves, row-major ([half][row][position]); also each
// subgroup's 16 × 16 staging area (256 floats at 256·s) when the
// accumulators are rescaled or written.
var<workgroup> ss: array<f32, 2u * M * T>;
// The tile's probabilities, row-major: row r, position t at r·PS + t.
var<workgroup> ps: array<f16, M * PS>;
// Per row: the rescale factor of a tile, then 1 / l.
var<workgroup> rowf: array<f32, M>;
// .x set when some row's running max moved. 16 bytes: on the H100 a 4-byte
// workgroup variable shifted the others' cooperative loads and stores by
// 4 bytes (they assume 16-byte aligned arrays).
var<workgroup> moved: vec4<u32>;

// The cooperative operations are called through functions: naga's
// uniformity analysis rejects them written inside a branch on
// subgroup_id.
fn mma(a: MatA, b: MatB, c: MatC) -> MatC {
    return coopMultiplyAdd(a, b, c);
}

fn stage(c: MatC, s: u32) {
    coopStoreT(c, &ss[256u * s], 16u);
}

fn unstage(s: u32) -> MatC {
    return coopLoadT<MatC>(&ss[256u * s], 16u);
}

// Subgroup s's partial scores of the tile at position tb: k steps
// [k0, k1) of its position block and row block, into its half of ss.
// Computed transposed, Sᵀ = C · Qᵀ: the cache rows are the A matrix,
// loaded row-major, and the queries the B matrix, column-major from qs
// (the H100 ran S = Q · Cᵀ, the cache a column-major B, at the same
// speed). Six steps' fragments are loaded before their products.
fn scores(s: u32, tb: u32, kvr: u32, k0: u32, k1: u32) {
    let f = s % 4u;
    let rb = f / 2u;
    let pb = f % 2u;
    let cb = (tb + 16u * pb) * kvr;
    let qb = rb * 16u * QS;
    var acc = MatC();
    var k = k0;
    for (; k + 6u <= k1; k += 6u) {
        let a0 = coopLoadT<MatA>(&cache[cb + 16u * k], kvr);
        let a1 = coopLoadT<MatA>(&cache[cb + 16u * k + 16u], kvr);
        let a2 = coopLoadT<MatA>(&cache[cb + 16u * k + 32u], kvr);
        let a3 = coopLoadT<MatA>(&cache[cb + 16u * k + 48u], kvr);
        let a4 = coopLoadT<MatA>(&cache[cb + 16u * k + 64u], kvr);
        let a5 = coopLoadT<MatA>(&cache[cb + 16u * k + 80u], kvr);
        acc = coopMultiplyAdd(a0, coopLoad<MatB>(&qs[qb + 16u * k], QS), acc);
        acc = coopMultiplyAdd(a1, coopLoad<MatB>(&qs[qb + 16u * k + 16u], QS), acc);
        acc = coopMultiplyAdd(a2, coopLoad<MatB>(&qs[qb + 16u * k + 32u], QS), acc);
        acc = coopMultiplyAdd(a3, coopLoad<MatB>(&qs[qb + 16u * k + 48u], QS), acc);
        acc = coopMultiplyAdd(a4, coopLoad<MatB>(&qs[qb + 16u * k + 64u], QS), acc);
        acc = coopMultiplyAdd(a5, coopLoad<MatB>(&qs[qb + 16u * k + 80u], QS), acc);
    }
    for (; k < k1; k++) {
        let a = coopLoadT<MatA>(&cache[cb + 16u * k], kvr);
        acc = coopMultiplyAdd(a, coopLoad<MatB>(&qs[qb + 16u * k], QS), acc);
    }
    // Sᵀ column-major is S row-major.
    let at = (s / 4u) * M * T + rb * 16u * T + pb * 16u;
    coopStore(acc, &ss[at], T);
}

// A of P: rows 16·rb.., positions 16·kk.. of the tile.
fn load_p(rb: u32, kk: u32) -> MatA {
    let at = rb * 16u * PS + 16u * kk;
    return coopLoadT<MatA>(&ps[at], PS);
}

// B of C: positions tb + 16·kk.., latent dims d0...
fn load_v(tb: u32, kk: u32, d0: u32, kvr: u32) -> MatB {
    let at = (tb + 16u * kk) * kvr + d0;
    return coopLoadT<MatB>(&cache[at], kvr);
}

// The queries of rows row0.. into qs, times scale · log2 e (zeros for
// rows past the chunk and dims past the row).
fn stage_queries(lid: u32, row0: u32, n_rows: u32) {
    let kv4 = N_KV / 4u;
    let rot4 = p.n_rot / 4u;
    let n_qk = p.n_nope + p.n_rot;
    let f = p.scale * LOG2E;
    for (var i = lid; i < M * (MAX_ROW / 4u); i += WG) {
        let r = i / (MAX_ROW / 4u);
        let w = i % (MAX_ROW / 4u);
        let gr = row0 + r;
        var v = vec4<f32>(0.0);
        if gr < n_rows && w < kv4 {
            v = q_abs[gr * kv4 + w];
        } else if gr < n_rows && w < kv4 + rot4 {
            let j = w - kv4;
            let z = gr / p.n_head;
            let b = gr * n_qk + p.n_nope + 4u * j;
            let c0 = steps[z].rope[2u * j].xy;
            let c1 = steps[z].rope[2u * j + 1u].xy;
            v = vec4<f32>(q[b] * c0.x - q[b + 1u] * c0.y, q[b] * c0.y + q[b + 1u] * c0.x,
                q[b + 2u] * c1.x - q[b + 3u] * c1.y, q[b + 2u] * c1.y + q[b + 3u] * c1.x);
        }
        v *= f;
        let at = r * QS + 4u * w;
        qs[at] = f16(v.x);
        qs[at + 1u] = f16(v.y);
        qs[at + 2u] = f16(v.z);
        qs[at + 3u] = f16(v.w);
    }
}

// Subgroup s's staged fragment (rows 16·rb..) times each row's rowf, in
// place.
fn scale_staged(s: u32, rb: u32, lane: u32, sg_size: u32) {
    for (var e = lane; e < 256u; e += sg_size) {
        ss[256u * s + e] *= rowf[rb * 16u + e / 16u];
    }
}

// Subgroup s's staged fragment (rows 16·rb.., dims d0..) times rowf into o.
fn write_staged(s: u32, rb: u32, d0: u32, row0: u32, n_rows: u32, lane: u32, sg_size: u32) {
    for (var e = lane; e < 256u; e += sg_size) {
        let r = rb * 16u + e / 16u;
        if row0 + r < n_rows {
            o[(row0 + r) * N_KV + d0 + e % 16u] = ss[256u * s + e] * rowf[r];
        }
    }
}

// Accumulator `c` of row block rb through the subgroup's staging area,
// times each row's rowf (a rescale). Barriers for the staging area, so
// every invocation calls it.
fn rescaled(c: MatC, rb: u32, s: u32, own: bool, lane: u32, sg_size: u32) -> MatC {
    var r = c;
    if own {
        stage(c, s);
    }
    workgroupBarrier();
    if own {
        scale_staged(s, rb, lane, sg_size);
    }
    workgroupBarrier();
    if own {
        r = unstage(s);
    }
    workgroupBarrier();
    return r;
}

// Accumulator `c` (row block rb, dims d0..) times rowf into o.
fn write_out(c: MatC, rb: u32, d0: u32, s: u32, own: bool, row0: u32, n_rows: u32, lane: u32, sg_size: u32) {
    if own {
        stage(c, s);
    }
    workgroupBarrier();
    if own {
        write_staged(s, rb, d0, row0, n_rows, lane, sg_size);
    }
    workgroupBarrier();
}

@compute @workgroup_size(WG)
fn main(
    @builtin(local_invocation_index) lid: u32,
    @builtin(subgroup_id) sg: u32,
    @builtin(subgroup_invocation_id) lane: u32,
    @builtin(subgroup_size) sg_size: u32,
    @builtin(workgroup_id) wid: vec3<u32>,
) {
    let n_rows = p.n_tok * p.n_head;
    let row0 = wid.x * M;
    // Workgroup-uniform: the grid covers the chunk's rows.
    if row0 >= n_rows {
        return;
    }
    // The last row's token sees the most positions.
    let n_max = steps[(min(row0 + M, n_rows) - 1u) / p.n_head].n_pos;
    let kvr = N_KV + p.n_rot;
    let ks = kvr / 16u;
    let k0 = (sg / 4u) * (ks / 2u);
    let k1 = select(ks / 2u, ks, sg / 4u == 1u);
    let own_v = 64u * sg < N_KV;
    // Softmax: row r, positions 4c .. 4c + 4 of a tile.
    let r = lid / 8u;
    let c = lid % 8u;
    var n_row = 0u;
    if row0 + r < n_rows {
        n_row = steps[(row0 + r) / p.n_head].n_pos;
    }
    var m = NEG;
    var l = 0.0;
    // Value accumulators o<row block><column block>: dims d0 + 16·column block.
    let d0 = 64u * sg;
    var o00 = MatC();
    var o01 = MatC();
    var o02 = MatC();
    var o03 = MatC();
    var o10 = MatC();
    var o11 = MatC();
    var o12 = MatC();
    var o13 = MatC();
    if lid == 0u {
        moved = vec4<u32>(0u);
    }
    stage_queries(lid, row0, n_rows);
    workgroupBarrier();
    for (var t0 = 0u; t0 < n_max; t0 += T) {
        let tb = select(t0, n_max - T, n_max >= T && t0 + T > n_max);
        if sg < 8u {
            scores(sg, tb, kvr, k0, k1);
        }
        workgroupBarrier();
        let i = r * T + 4u * c;
        var s = vec4<f32>(ss[i], ss[i + 1u], ss[i + 2u], ss[i + 3u])
            + vec4<f32>(ss[M * T + i], ss[M * T + i + 1u], ss[M * T + i + 2u], ss[M * T + i + 3u]);
        let pos = vec4<u32>(tb + 4u * c) + vec4<u32>(0u, 1u, 2u, 3u);
        let valid = (pos >= vec4<u32>(t0)) & (pos < vec4<u32>(n_row));
        s = select(vec4<f32>(NEG), s, valid);
        var tmax = max(max(s.x, s.y), max(s.z, s.w));
        tmax = max(tmax, subgroupShuffleXor(tmax, 1u));
        tmax = max(tmax, subgroupShuffleXor(tmax, 2u));
        tmax = max(tmax, subgroupShuffleXor(tmax, 4u));
        var m_new = m;
        if tmax > m + TH {
            m_new = tmax;
        }
        let corr = exp2(m - m_new);
        let pv = select(vec4<f32>(0.0), exp2(s - vec4<f32>(m_new)), valid);
        var sum = pv.x + pv.y + pv.z + pv.w;
        sum += subgroupShuffleXor(sum, 1u);
        sum += subgroupShuffleXor(sum, 2u);
        sum += subgroupShuffleXor(sum, 4u);
        // Only rows with something accumulated need their O rescaled.
        if m_new != m && l > 0.0 {
            moved.x = 1u;
        }
        l = l * corr + sum;
        m = m_new;
        let at = r * PS + 4u * c;
        ps[at] = f16(pv.x);
        ps[at + 1u] = f16(pv.y);
        ps[at + 2u] = f16(pv.z);
        ps[at + 3u] = f16(pv.w);
        if c == 0u {
            rowf[r] = corr;
        }
        if workgroupUniformLoad(&moved).x != 0u {
            o00 = rescaled(o00, 0u, sg, own_v, lane, sg_size);
            o01 = rescaled(o01, 0u, sg, own_v, lane, sg_size);
            o02 = rescaled(o02, 0u, sg, own_v, lane, sg_size);
            o03 = rescaled(o03, 0u, sg, own_v, lane, sg_size);
            o10 = rescaled(o10, 1u, sg, own_v, lane, sg_size);
            o11 = rescaled(o11, 1u, sg, own_v, lane, sg_size);
            o12 = rescaled(o12, 1u, sg, own_v, lane, sg_size);
            o13 = rescaled(o13, 1u, sg, own_v, lane, sg_size);
            if lid == 0u {
                moved.x = 0u;
            }
        }
        // acc += P · C[tb.., d0..]: the tile's eight cache fragments loaded
        // first, so their latency overlaps.
        if own_v {
            let b00 = load_v(tb, 0u, d0, kvr);
            let b01 = load_v(tb, 0u, d0 + 16u, kvr);
            let b02 = load_v(tb, 0u, d0 + 32u, kvr);
            let b03 = load_v(tb, 0u, d0 + 48u, kvr);
            let b10 = load_v(tb, 1u, d0, kvr);
            let b11 = load_v(tb, 1u, d0 + 16u, kvr);
            let b12 = load_v(tb, 1u, d0 + 32u, kvr);
            let b13 = load_v(tb, 1u, d0 + 48u, kvr);
            let a0 = load_p(0u, 0u);
            let a1 = load_p(1u, 0u);
            o00 = mma(a0, b00, o00);
            o10 = mma(a1, b00, o10);
            o01 = mma(a0, b01, o01);
            o11 = mma(a1, b01, o11);
            o02 = mma(a0, b02, o02);
            o12 = mma(a1, b02, o12);
            o03 = mma(a0, b03, o03);
            o13 = mma(a1, b03, o13);
            let a2 = load_p(0u, 1u);
            let a3 = load_p(1u, 1u);
            o00 = mma(a2, b10, o00);
            o10 = mma(a3, b10, o10);
            o01 = mma(a2, b11, o01);
            o11 = mma(a3, b11, o11);
            o02 = mma(a2, b12, o02);
            o12 = mma(a3, b12, o12);
            o03 = mma(a2, b13, o03);
            o13 = mma(a3, b13, o13);
        }
    }
    if c == 0u {
        rowf[r] = 1.0 / l;
        if row0 + r < n_rows {
            ml[row0 + r] = vec2<f32>(m * LN2 + log(l), 1.0);
        }
    }
    write_out(o00, 0u, d0, sg, own_v, row0, n_rows, lane, sg_size);
    write_out(o01, 0u, d0 + 16u, sg, own_v, row0, n_rows, lane, sg_size);
    write_out(o02, 0u, d0 + 32u, sg, own_v, row0, n_rows, lane, sg_size);
    write_out(o03, 0u, d0 + 48u, sg, own_v, row0, n_rows, lane, sg_size);
    write_out(o10, 1u, d0, sg, own_v, row0, n_rows, lane, sg_size);
    write_out(o11, 1u, d0 + 16u, sg, own_v, row0, n_rows, lane, sg_size);
    write_out(o12, 1u, d0 + 32u, sg, own_v, row0, n_rows, lane, sg_size);
    write_out(o13, 1u, d0 + 48u, sg, own_v, row0, n_rows, lane, sg_size);
}
