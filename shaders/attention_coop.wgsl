enable f16;
enable wgpu_cooperative_matrix;

// Prefill attention on cooperative matrices (tensor cores): MLA over the
// latent cache in absorbed form, for adapters that offer 16x16x16
// f16 x f16 -> f32 subgroup matrices and run it in 8 subgroups of 32
// lanes (`ops::attention_coop_fits`). The rows of the products are a chunk's
// (token, head) pairs, row = token · n_head + head, so every cached row
// read by a workgroup serves M of them at once, and the positions are the
// columns:
//   S = Q · Cᵀ        Q: [q_abs ‖ rope(q_pe)] · scale · log2 e, C: cache rows
//   O += P · C[:, :N_KV]   P = 2^(S − m), m and l = Σ P per row
// Each token attends over its causal prefix, positions [0, n_pos), in
// n_split splits (its step record's): the prefill's tokens in one, the
// decode's one token in up to MAX_SPLITS, merged by attn_v_b's matvec.
//
// Bindings: 0 params (uniform; n_tok is the chunk's, written per chunk),
// 1 steps (array<Step>: n_pos, rope table), 2 q_abs (array<vec4<f32>>,
// rows × N_KV/4), 3 q (array<f32>, rows × (n_nope + n_rot), the q_b
// output: q_pe is its tail, roped here), 4 cache (array<vec4<u32>>: f16
// rows of N_KV + n_rot), 5 o (array<f32>, N_KV per slot, normalised),
// 6 ml (array<vec2<f32>>, (m + ln l, 1) per slot, as attention.wgsl writes).
// Dispatch: (splits, ceil(n_tok · n_head / M), 1); slot of row r and split
// s: r · split_stride + s. Split s of the last row's token covers [s·len,
// min((s+1)·len, n_pos)), len = ceil(n_pos / n_split); a split with no
// positions writes ml = (NEG, 0) and leaves o alone.
//
// Each workgroup owns M = 32 rows. Their queries go to `cs` once, as f16,
// and from there into registers: subgroup s (< 8) holds the KH = 18 query
// fragments of its score block (row block (s % 4) / 2, k steps of half
// s / 4). Per tile of T = 32 positions:
//   staging: the tile's cache rows go to `cs` with 16-byte loads (PRE
//            words per invocation), loaded during the previous tile's
//            softmax and values (issued after its scores are stored), so
//            their latency is hidden: with one workgroup per SM nothing
//            else covers it (pp512 @ d16384 +10.6% on an H100; issued
//            before the scores or halfway through them, +5-7%: registers
//            held through the scores' query fragments). Subgroup s
//            stages the latent columns its own values read (64s ..
//            64s + 64) and stores the next tile's over them as soon as
//            its values are done, every invocation one vec4 of the rope:
//            no workgroup barrier and no phase of its own between one
//            tile's values and the next one's scores;
//   scores:  subgroup s multiplies its queries by position block s % 2
//            of the tile (B, column-major from cs) into its half of `ss`;
//   softmax: invocations 8r .. 8r + 8 own row r, four positions each: the
//            two halves summed, masked, the row's max and sum reduced over
//            the 8 lanes by shuffles, P written to `ps` as f16;
//   values:  subgroup s (< N_KV / 64) adds P · C[:, 64s .. 64s + 64] into
//            its 2 × 4 accumulators, C row-major from cs.
// Four barriers a tile (workgroupUniformLoad is two). The accumulators
// are opaque, so the running max is lazy: it moves only when a tile's max
// exceeds it by more than TH (P then stays below 2^TH, well inside f16),
// and only then are the rows rescaled, through `ss`, in a
// workgroup-uniform branch. The last tile is moved back to end at the
// split's last position (positions already done masked) so no row past
// the split is read where there are at least T before its end.
//
// Why (H100, docs/perf-journal.md session 11): fragments loaded straight
// from the cache (16 rows of 32 bytes per load) and queries reloaded from
// workgroup memory every tile ran the scores at ~23 TFLOP/s; staging the
// tile with whole-line loads and holding the queries in registers took
// pp512 @ d16384 from 762 to 1,384; the tile loop is bound by its
// instructions (session 12: two runtime divisions per staged vec4 cost
// 16% of pp512 @ d16384). Every workgroup array is a multiple
// of 16 bytes: a 4-byte one shifted the H100's cooperative loads and
// stores of the others by 4 bytes.
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
// cs holds the M rows' queries, then T cache rows; eight invocations
// stage each row.
const_assert M == T;
const_assert WG == 8u * T;
/// The widest row: MAX_LATENT + MAX_ROPE.
/// host: gpu::ops::ATTENTION_COOP_ROW
const MAX_ROW: u32 = 576u;
// f16 per row of cs: 8 of padding, so a fragment's 16 rows start on
// different banks.
const CS: u32 = MAX_ROW + 8u;
// The most k steps of a score half: MAX_ROW / 32, one query fragment each.
const KH: u32 = 18u;
// vec4<u32>s (8 cache values) each invocation stages per tile: 8 of its
// subgroup's 64 latent columns of T rows (32 lanes), 1 of the rope.
const PRE: u32 = 9u;
/// host: gpu::ops::MAX_ROPE
const MAX_ROPE: u32 = 64u;
const_assert T * 8u == 32u * (PRE - 1u);
const_assert T * MAX_ROPE / 8u <= WG;
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
    // split slots per row in o and ml (1 in the prefill)
    split_stride: u32,
    _pad1: u32,
    _pad2: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> steps: array<Step>;
@group(0) @binding(2) var<storage, read> q_abs: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read> q: array<f32>;
@group(0) @binding(4) var<storage, read> cache: array<vec4<u32>>;
@group(0) @binding(5) var<storage, read_write> o: array<f32>;
@group(0) @binding(6) var<storage, read_write> ml: array<vec2<f32>>;

// Row-major, CS f16 a row: first the rows' queries (row r, dim k at
// r·CS + k), then each tile's cache rows (position t of the tile at t·CS).
var<workgroup> cs: array<f16, M * CS>;
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
// 4 bytes.
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

// One k step of a score block: acc + query fragment q times the tile's
// position block at cb (column-major B: position n's row is column n).
fn sstep(acc: MatC, q: MatA, k: u32, cb: u32) -> MatC {
    return coopMultiplyAdd(q, coopLoad<MatB>(&cs[cb + 16u * k], CS), acc);
}

// Query fragment of row block rb at k step k.
fn qload(rb: u32, k: u32) -> MatA {
    return coopLoadT<MatA>(&cs[rb * 16u * CS + 16u * k], CS);
}

// The 16 × 16 score block in acc into half h of ss at row block rb,
// position block pb.
fn sstore(acc: MatC, h: u32, rb: u32, pb: u32) {
    coopStoreT(acc, &ss[h * M * T + rb * 16u * T + pb * 16u], T);
}

// The first position of the tile that starts at t0: moved back so it
// ends at t_hi, or at T where t_hi is less (the cache has at least T rows).
fn tile_base(t0: u32, t_hi: u32) -> u32 {
    let end = max(t_hi, T);
    return select(t0, end - T, t0 + T > end);
}

// This invocation's share of the cache rows of the tile at tb (row8
// vec4<u32>s a row). Words 0 .. 8: latent column block sg (f16 64·sg ..
// 64·sg + 64) of rows lane / 8 + 4j, vec4 lane % 8 of the block; subgroup
// sg alone reads that block in the values, so it can store the next
// tile's over it as soon as its own values are done. Four rows' 128-byte
// runs a load. Word 8: the rope's vec4 lid % 8 of row lid / 8 (the rope
// is at most 64 wide), read only by the scores.
fn tile_load(lid: u32, sg: u32, lane: u32, tb: u32, row8: u32) -> array<vec4<u32>, PRE> {
    var v: array<vec4<u32>, PRE>;
    if 64u * sg < N_KV {
        let at = (tb + lane / 8u) * row8 + 8u * sg + lane % 8u;
        for (var j = 0u; j < 8u; j++) {
            v[j] = cache[at + 4u * row8 * j];
        }
    }
    let rc = lid % 8u;
    if N_KV / 8u + rc < row8 {
        v[8] = cache[(tb + lid / 8u) * row8 + N_KV / 8u + rc];
    }
    return v;
}

// Eight f16 from four words into cs at `at`.
fn put8(at: u32, w: vec4<u32>) {
    let a = unpack2x16float(w.x);
    let b = unpack2x16float(w.y);
    let c = unpack2x16float(w.z);
    let d = unpack2x16float(w.w);
    cs[at] = f16(a.x);
    cs[at + 1u] = f16(a.y);
    cs[at + 2u] = f16(b.x);
    cs[at + 3u] = f16(b.y);
    cs[at + 4u] = f16(c.x);
    cs[at + 5u] = f16(c.y);
    cs[at + 6u] = f16(d.x);
    cs[at + 7u] = f16(d.y);
}

// tile_load's words into cs, each eight f16 at a multiple of eight:
// latent word j to row lane / 8 + 4j, f16 64·sg + 8·(lane % 8), a base
// and a constant step (no address arithmetic a store: the walk this
// replaced cost pp512 @ d16384 3.6%, H200, session 37), and the rope's
// word to its place in row lid / 8.
fn tile_store(lid: u32, sg: u32, lane: u32, v: array<vec4<u32>, PRE>, row8: u32) {
    if 64u * sg < N_KV {
        let at = (lane / 8u) * CS + 64u * sg + 8u * (lane % 8u);
        for (var j = 0u; j < 8u; j++) {
            put8(at + 4u * CS * j, v[j]);
        }
    }
    let rc = lid % 8u;
    if N_KV / 8u + rc < row8 {
        put8((lid / 8u) * CS + N_KV + 8u * rc, v[8]);
    }
}

// A of P: rows 16·rb.., positions 16·kk.. of the tile.
fn load_p(rb: u32, kk: u32) -> MatA {
    let at = rb * 16u * PS + 16u * kk;
    return coopLoadT<MatA>(&ps[at], PS);
}

// B of the tile's cache rows: positions 16·kk.., latent dims d0...
fn load_v(kk: u32, d0: u32) -> MatB {
    let at = 16u * kk * CS + d0;
    return coopLoadT<MatB>(&cs[at], CS);
}

// q_abs vec4 i of the workgroup's rows (row i / (N_KV / 4) from row0),
// zeros past the chunk.
fn q_abs4(i: u32, row0: u32, n_rows: u32) -> vec4<f32> {
    let gr = row0 + i / (N_KV / 4u);
    var v = vec4<f32>(0.0);
    if i < M * (N_KV / 4u) && gr < n_rows {
        v = q_abs[gr * (N_KV / 4u) + i % (N_KV / 4u)];
    }
    return v;
}

// Four query values into cs at `at`, as f16.
fn put4(at: u32, v: vec4<f32>) {
    let h = vec4<f16>(v);
    cs[at] = h.x;
    cs[at + 1u] = h.y;
    cs[at + 2u] = h.z;
    cs[at + 3u] = h.w;
}

// q_abs vec4 i of the rows, times f, into cs.
fn put_q_abs(i: u32, v: vec4<f32>, f: f32) {
    if i < M * (N_KV / 4u) {
        put4((i / (N_KV / 4u)) * CS + 4u * (i % (N_KV / 4u)), v * f);
    }
}

// The queries of rows row0.. into cs, times scale · log2 e (zeros for
// rows past the chunk and dims past the row). q_abs goes eight vec4
// loads an invocation at a time, all issued before their stores, so a
// workgroup waits for two rounds of loads where a loop of one load and
// its store waited for sixteen. That wait is much of a workgroup that has
// few tiles: the prefill's early rows, the decode's splits (H200, session
// 33: a 512-token chunk's attention at depth 0 -11%, tg64 @ d4096 and @
// d16384 +1.4%). Then q_pe, roped (two vec4s an invocation). The six-load
// batches of an earlier form that roped inside the batch (a larger kernel)
// lost 1.5% of the decode at depth.
fn stage_queries(lid: u32, row0: u32, n_rows: u32) {
    let f = p.scale * LOG2E;
    for (var i = lid; i < M * (N_KV / 4u); i += 8u * WG) {
        let v0 = q_abs4(i, row0, n_rows);
        let v1 = q_abs4(i + WG, row0, n_rows);
        let v2 = q_abs4(i + 2u * WG, row0, n_rows);
        let v3 = q_abs4(i + 3u * WG, row0, n_rows);
        let v4 = q_abs4(i + 4u * WG, row0, n_rows);
        let v5 = q_abs4(i + 5u * WG, row0, n_rows);
        let v6 = q_abs4(i + 6u * WG, row0, n_rows);
        let v7 = q_abs4(i + 7u * WG, row0, n_rows);
        put_q_abs(i, v0, f);
        put_q_abs(i + WG, v1, f);
        put_q_abs(i + 2u * WG, v2, f);
        put_q_abs(i + 3u * WG, v3, f);
        put_q_abs(i + 4u * WG, v4, f);
        put_q_abs(i + 5u * WG, v5, f);
        put_q_abs(i + 6u * WG, v6, f);
        put_q_abs(i + 7u * WG, v7, f);
    }
    // The rest of each row: q_pe roped, then zeros.
    let kv4 = N_KV / 4u;
    let rot4 = p.n_rot / 4u;
    let n_qk = p.n_nope + p.n_rot;
    let tail = MAX_ROW / 4u - kv4;
    for (var i = lid; i < M * tail; i += WG) {
        let r = i / tail;
        let j = i % tail;
        let gr = row0 + r;
        var v = vec4<f32>(0.0);
        if gr < n_rows && j < rot4 {
            let z = gr / p.n_head;
            let b = gr * n_qk + p.n_nope + 4u * j;
            let c0 = steps[z].rope[2u * j].xy;
            let c1 = steps[z].rope[2u * j + 1u].xy;
            v = vec4<f32>(q[b] * c0.x - q[b + 1u] * c0.y, q[b] * c0.y + q[b + 1u] * c0.x,
                q[b + 2u] * c1.x - q[b + 3u] * c1.y, q[b + 2u] * c1.y + q[b + 3u] * c1.x);
        }
        put4(r * CS + 4u * (kv4 + j), v * f);
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
fn write_staged(s: u32, rb: u32, d0: u32, row0: u32, n_rows: u32, lane: u32, sg_size: u32, split: u32) {
    for (var e = lane; e < 256u; e += sg_size) {
        let r = rb * 16u + e / 16u;
        if row0 + r < n_rows {
            let slot = (row0 + r) * p.split_stride + split;
            o[slot * N_KV + d0 + e % 16u] = ss[256u * s + e] * rowf[r];
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
fn write_out(c: MatC, rb: u32, d0: u32, s: u32, own: bool, row0: u32, n_rows: u32, lane: u32, sg_size: u32, split: u32) {
    if own {
        stage(c, s);
    }
    workgroupBarrier();
    if own {
        write_staged(s, rb, d0, row0, n_rows, lane, sg_size, split);
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
    let split = wid.x;
    // Workgroup-uniform: the grid covers the chunk's rows.
    let blocks = (n_rows + M - 1u) / M;
    if wid.y >= blocks {
        return;
    }
    // Row blocks from the last: a causal chunk's later tokens attend over
    // more positions, so the longest workgroups start first and the
    // shortest fill the tail.
    let row0 = (blocks - 1u - wid.y) * M;
    // The last row's token sees the most positions; the split covers
    // [t_lo, t_hi) of them (all of them in the prefill: one split).
    let last = steps[(min(row0 + M, n_rows) - 1u) / p.n_head];
    let len = (last.n_pos + last.n_split - 1u) / last.n_split;
    let t_lo = split * len;
    let t_hi = min(t_lo + len, last.n_pos);
    if split >= last.n_split || t_lo >= t_hi {
        // Empty slots are marked for the merge in attn_v_b's matvec.
        if lid < M && row0 + lid < n_rows {
            ml[(row0 + lid) * p.split_stride + split] = vec2<f32>(NEG, 0.0);
        }
        return;
    }
    let kvr = N_KV + p.n_rot;
    // Score half sg / 4: k steps k0 .. k0 + KH. The queries are zero past
    // the row, so narrower rows (fewer than 2·KH steps) add zeros.
    let k0 = (sg / 4u) * KH;
    let own_v = 64u * sg < N_KV;
    // Softmax: row r, positions 4c .. 4c + 4 of a tile.
    let r = lid / 8u;
    let c = lid % 8u;
    // Positions of row r in this split end at n_row.
    var n_row = 0u;
    if row0 + r < n_rows {
        n_row = min(steps[(row0 + r) / p.n_head].n_pos, t_hi);
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
    // Score block: position block pb, row block rb, k steps k0 .. k0 + KH. Its
    // query fragments stay in registers for every tile.
    let pb = sg % 2u;
    let rb = (sg % 4u) / 2u;
    let q0 = qload(rb, k0);
    let q1 = qload(rb, k0 + 1u);
    let q2 = qload(rb, k0 + 2u);
    let q3 = qload(rb, k0 + 3u);
    let q4 = qload(rb, k0 + 4u);
    let q5 = qload(rb, k0 + 5u);
    let q6 = qload(rb, k0 + 6u);
    let q7 = qload(rb, k0 + 7u);
    let q8 = qload(rb, k0 + 8u);
    let q9 = qload(rb, k0 + 9u);
    let q10 = qload(rb, k0 + 10u);
    let q11 = qload(rb, k0 + 11u);
    let q12 = qload(rb, k0 + 12u);
    let q13 = qload(rb, k0 + 13u);
    let q14 = qload(rb, k0 + 14u);
    let q15 = qload(rb, k0 + 15u);
    let q16 = qload(rb, k0 + 16u);
    let q17 = qload(rb, k0 + 17u);
    let row8 = kvr / 8u;
    let cb = pb * 16u * CS;
    var words = tile_load(lid, sg, lane, tile_base(t_lo, t_hi), row8);
    // cs is free once every subgroup holds its query fragments.
    workgroupBarrier();
    tile_store(lid, sg, lane, words, row8);
    for (var t0 = t_lo; t0 < t_hi; t0 += T) {
        let tb = tile_base(t0, t_hi);
        // The tile is in cs: stored above or at the end of the last
        // tile's values.
        workgroupBarrier();
        var acc = MatC();
        acc = sstep(acc, q0, k0, cb);
        acc = sstep(acc, q1, k0 + 1u, cb);
        acc = sstep(acc, q2, k0 + 2u, cb);
        acc = sstep(acc, q3, k0 + 3u, cb);
        acc = sstep(acc, q4, k0 + 4u, cb);
        acc = sstep(acc, q5, k0 + 5u, cb);
        acc = sstep(acc, q6, k0 + 6u, cb);
        acc = sstep(acc, q7, k0 + 7u, cb);
        acc = sstep(acc, q8, k0 + 8u, cb);
        acc = sstep(acc, q9, k0 + 9u, cb);
        acc = sstep(acc, q10, k0 + 10u, cb);
        acc = sstep(acc, q11, k0 + 11u, cb);
        acc = sstep(acc, q12, k0 + 12u, cb);
        acc = sstep(acc, q13, k0 + 13u, cb);
        acc = sstep(acc, q14, k0 + 14u, cb);
        acc = sstep(acc, q15, k0 + 15u, cb);
        acc = sstep(acc, q16, k0 + 16u, cb);
        acc = sstep(acc, q17, k0 + 17u, cb);
        if sg < 8u {
            sstore(acc, sg / 4u, rb, pb);
        }
        // The next tile's words, in flight through the softmax and values.
        if t0 + T < t_hi {
            words = tile_load(lid, sg, lane, tile_base(t0 + T, t_hi), row8);
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
            let b00 = load_v(0u, d0);
            let b01 = load_v(0u, d0 + 16u);
            let b02 = load_v(0u, d0 + 32u);
            let b03 = load_v(0u, d0 + 48u);
            let b10 = load_v(1u, d0);
            let b11 = load_v(1u, d0 + 16u);
            let b12 = load_v(1u, d0 + 32u);
            let b13 = load_v(1u, d0 + 48u);
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
        // The next tile over this one, with no workgroup barrier: the
        // latent block sg was read only by this subgroup's values (its
        // fragment loads are done once the subgroup is past its barrier),
        // the rope only by the scores, before the softmax's barrier.
        if t0 + T < t_hi {
            subgroupBarrier();
            tile_store(lid, sg, lane, words, row8);
        }
    }
    if c == 0u {
        // A row with no positions in this split (a token of the
        // workgroup's before the split starts) is marked empty: o = 0, l = 0.
        rowf[r] = select(0.0, 1.0 / l, l > 0.0);
        if row0 + r < n_rows {
            var v = vec2<f32>(NEG, 0.0);
            if l > 0.0 {
                v = vec2<f32>(m * LN2 + log(l), 1.0);
            }
            ml[(row0 + r) * p.split_stride + split] = v;
        }
    }
    write_out(o00, 0u, d0, sg, own_v, row0, n_rows, lane, sg_size, split);
    write_out(o01, 0u, d0 + 16u, sg, own_v, row0, n_rows, lane, sg_size, split);
    write_out(o02, 0u, d0 + 32u, sg, own_v, row0, n_rows, lane, sg_size, split);
    write_out(o03, 0u, d0 + 48u, sg, own_v, row0, n_rows, lane, sg_size, split);
    write_out(o10, 1u, d0, sg, own_v, row0, n_rows, lane, sg_size, split);
    write_out(o11, 1u, d0 + 16u, sg, own_v, row0, n_rows, lane, sg_size, split);
    write_out(o12, 1u, d0 + 32u, sg, own_v, row0, n_rows, lane, sg_size, split);
    write_out(o13, 1u, d0 + 48u, sg, own_v, row0, n_rows, lane, sg_size, split);
}
