// Q6_K weights for matvec.wgsl and matmul.wgsl. GGUF's 210-byte super-blocks are padded to
// 212 bytes (53 words) at load so every block starts on a word; bytes are
// otherwise unchanged. A super-block holds 8 units of 32 weights:
// w = d·sc·(q − 32), q six bits, sc a signed byte per 16 weights.
// Unit j = 4·h + k (h half, k quarter) weight l (0..32):
//   low 4 bits: byte 64·h + 32·(k & 1) + l of ql, high nibble when k >= 2
//   high 2 bits: byte 32·h + l of qh (bytes 128..192), bits 2k..2k+1
//   scale: byte 8·h + 2·k + l / 16 of sc (bytes 192..208); d: f16 at byte 208
// Binding: 6 blocks (array<u32>).
// The six-bit quants of four weights are assembled in one word (shift and
// mask per word, not per byte) before bytes4f splits them: per 4 weights
// 6 word ops + 7 byte ops + 4 FADDs (bytes_f32.wgsl) + 4 FMAs, against ~50
// ops before (docs/perf-journal.md, session 7 helper kquant). A split
// repack with fewer loads was measured slower (journal): the layout stays.

@group(0) @binding(6) var<storage, read> blocks: array<u32>;

// Weights 4i..4i+4 of a unit as d·sc·(q − 32) = q·s − 32·s (one FMA),
// from ql word `lo` (nibble at `ls`: 0 or 4) and qh word `hi` (bits at
// `hs` = 2k). The high pair goes to bits 4..5 of each byte.
fn quad6(lo: u32, hi: u32, ls: u32, hs: u32, s: f32) -> vec4<f32> {
    let q = ((lo >> ls) & 0x0F0F0F0Fu) | (((hi >> hs) << 4u) & 0x30303030u);
    return fma(bytes4f(q), vec4<f32>(s), vec4<f32>(-32.0 * s));
}

// d times the unit's two scales (weights 0..16 and 16..32): bytes 8h + 2k
// and 8h + 2k + 1 of sc.
fn scales2(w0: u32, j: u32) -> vec2<f32> {
    let d = unpack2x16float(blocks[w0 + 52u]).x;
    let sb = 192u + 8u * (j / 4u) + 2u * (j % 4u);
    let sw = blocks[w0 + sb / 4u] >> ((sb & 3u) * 8u);
    let s0 = f32(bitcast<i32>(sw << 24u) >> 24u);
    let s1 = f32(bitcast<i32>((sw >> 8u) << 24u) >> 24u);
    return d * vec2<f32>(s0, s1);
}

// Written out (no array filled in a loop) so the unit stays in registers.
fn unit_load(u: u32) -> Unit {
    let j = u % 8u;
    let w0 = (u / 8u) * 53u;
    let s = scales2(w0, j);
    let h = j / 4u;
    let k = j % 4u;
    let l0 = w0 + 16u * h + 8u * (k & 1u);
    let h0 = w0 + 32u + 8u * h;
    let ls = (k >> 1u) * 4u;
    let hs = 2u * k;
    return Unit(quad6(blocks[l0], blocks[h0], ls, hs, s.x),
        quad6(blocks[l0 + 1u], blocks[h0 + 1u], ls, hs, s.x),
        quad6(blocks[l0 + 2u], blocks[h0 + 2u], ls, hs, s.x),
        quad6(blocks[l0 + 3u], blocks[h0 + 3u], ls, hs, s.x),
        quad6(blocks[l0 + 4u], blocks[h0 + 4u], ls, hs, s.y),
        quad6(blocks[l0 + 5u], blocks[h0 + 5u], ls, hs, s.y),
        quad6(blocks[l0 + 6u], blocks[h0 + 6u], ls, hs, s.y),
        quad6(blocks[l0 + 7u], blocks[h0 + 7u], ls, hs, s.y));
}
