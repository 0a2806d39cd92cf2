// Q6_K weights for matvec.wgsl and matmul.wgsl. GGUF's 210-byte super-blocks are padded to
// 224 bytes (14 vec4s) at load so every block starts on a vec4 and a unit
// is six vector loads (rather than eighteen words); bytes are otherwise
// unchanged. A super-block holds 8 units of 32 weights:
// w = d·sc·(q − 32), q six bits, sc a signed byte per 16 weights.
// Unit j = 4·h + k (h half, k quarter) weight l (0..32):
//   low 4 bits: byte 64·h + 32·(k & 1) + l of ql, high nibble when k >= 2
//   high 2 bits: byte 32·h + l of qh (bytes 128..192), bits 2k..2k+1
//   scale: byte 8·h + 2·k + l / 16 of sc (bytes 192..208); d: f16 at byte 208
// Binding: 6 blocks (array<vec4<u32>>).
// The six-bit quants of four weights are assembled in one word (shift and
// mask per word, not per byte) before bytes4f splits them: per 4 weights
// 6 word ops + 7 byte ops + 4 FADDs (bytes_f32.wgsl) + 4 FMAs, against ~50
// ops before (docs/perf-journal.md, session 7 helper kquant). A split
// repack (ql and qh in arrays of their own) was measured slower (journal);
// the 14 bytes of padding a block were faster in both the prefill and the
// decode head (session 16).

@group(0) @binding(6) var<storage, read> blocks: array<vec4<u32>>;

// Weights 4i..4i+4 of a unit as d·sc·(q − 32) = q·s − 32·s (one FMA),
// from ql word `lo` (nibble at `ls`: 0 or 4) and qh word `hi` (bits at
// `hs` = 2k). The high pair goes to bits 4..5 of each byte.
fn quad6(lo: u32, hi: u32, ls: u32, hs: u32, s: f32) -> vec4<f32> {
    return fma(bytes4f(q6_words(lo, hi, ls, hs)), vec4<f32>(s), vec4<f32>(-32.0 * s));
}

// The six-bit quants of four weights, one a byte (also q6_k_dots.wgsl's).
fn q6_words(lo: u32, hi: u32, ls: u32, hs: u32) -> u32 {
    return ((lo >> ls) & 0x0F0F0F0Fu) | (((hi >> hs) << 4u) & 0x30303030u);
}

// A unit's words as loaded (unit_raw: its eight ql and eight qh words,
// the word holding its two scale bytes, the word holding d, its index j),
// dequantized by unit_of; unit_load is both (matmul_coop.wgsl holds the
// raw form).
struct Raw {
    l0: vec4<u32>,
    l1: vec4<u32>,
    h0: vec4<u32>,
    h1: vec4<u32>,
    sw: u32,
    dw: u32,
    j: u32,
}

fn unit_raw(u: u32) -> Raw {
    let j = u % 8u;
    let b = (u / 8u) * 14u;
    let h = j / 4u;
    let k = j % 4u;
    // ql: vec4s 4h + 2(k & 1) and the next; qh: 8 + 2h and the next; sc:
    // vec4 12 (its word 2h + k / 2 holds the unit's two scale bytes); d:
    // the low half of vec4 13's first word.
    let l0 = b + 4u * h + 2u * (k & 1u);
    let h0 = b + 8u + 2u * h;
    return Raw(blocks[l0], blocks[l0 + 1u], blocks[h0], blocks[h0 + 1u],
        blocks[b + 12u][2u * h + k / 2u], blocks[b + 13u].x, j);
}

// d times the unit's two scales (weights 0..16 and 16..32): bytes 8h + 2k
// and 8h + 2k + 1 of sc.
fn q6_scales(r: Raw) -> vec2<f32> {
    let j = r.j;
    let sb = 192u + 8u * (j / 4u) + 2u * (j % 4u);
    let sw = r.sw >> ((sb & 3u) * 8u);
    let sc = vec2<f32>(f32(bitcast<i32>(sw << 24u) >> 24u), f32(bitcast<i32>((sw >> 8u) << 24u) >> 24u));
    return unpack2x16float(r.dw).x * sc;
}

// Written out (no array filled in a loop) so the unit stays in registers.
fn unit_of(r: Raw) -> Unit {
    let k = r.j % 4u;
    let s = q6_scales(r);
    let ls = (k >> 1u) * 4u;
    let hs = 2u * k;
    return Unit(quad6(r.l0.x, r.h0.x, ls, hs, s.x), quad6(r.l0.y, r.h0.y, ls, hs, s.x),
        quad6(r.l0.z, r.h0.z, ls, hs, s.x), quad6(r.l0.w, r.h0.w, ls, hs, s.x),
        quad6(r.l1.x, r.h1.x, ls, hs, s.y), quad6(r.l1.y, r.h1.y, ls, hs, s.y),
        quad6(r.l1.z, r.h1.z, ls, hs, s.y), quad6(r.l1.w, r.h1.w, ls, hs, s.y));
}

fn unit_load(u: u32) -> Unit {
    return unit_of(unit_raw(u));
}
