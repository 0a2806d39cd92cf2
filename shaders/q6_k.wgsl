// Q6_K weights for matvec.wgsl and matmul.wgsl, each 210-byte super-block
// rearranged at load into 224 bytes (14 vec4s) where each unit's bytes lie
// together (src/gpu/repack.rs, `repack_q6_k`). A super-block holds 8 units
// of 32 weights: w = d·sc·(q − 32), q six bits, sc a signed byte per 16
// weights. Unit j (j = 0..8):
//   vec4 j: its low 4 bits, as Q4_0's nibbles (byte p: weight p low,
//     weight p + 16 high)
//   vec4 8 + j / 2, words 2·(j % 2) and the next: its high 2 bits. Word w
//     byte b: bits 0..1 weight 8w + b, 2..3 weight 16 + 8w + b, 4..5
//     weight 8w + 4 + b, 6..7 weight 16 + 8w + 4 + b, so each pair is
//     shifted to bits 4..5 of its weight's byte whole words at a time
//   vec4 12: the 16 scale bytes in GGUF's order, unit j's at 2j and 2j + 1
//   vec4 13: d (f16, low half of the first word), then zeros.
// A unit is four loads (GGUF's order spreads it over six vec4s, units j
// and j + 2 sharing ql, four units the qh bytes), and the shifts that
// assemble its quants are constants.
// Binding: 6 blocks (array<vec4<u32>>).

@group(0) @binding(6) var<storage, read> blocks: array<vec4<u32>>;

// A unit's words as loaded (unit_raw: its nibbles, its two qh words, the
// word holding its two scale bytes in its low half, the word holding d),
// dequantized by unit_of; unit_load is both (matmul_coop.wgsl holds the
// raw form).
struct Raw {
    q: vec4<u32>,
    h: vec2<u32>,
    sw: u32,
    dw: u32,
}

fn unit_raw(u: u32) -> Raw {
    let j = u % 8u;
    let b = (u / 8u) * 14u;
    let hv = blocks[b + 8u + j / 2u];
    let h = select(hv.zw, hv.xy, (j & 1u) == 0u);
    return Raw(blocks[b + j], h, blocks[b + 12u][j / 2u] >> ((j & 1u) * 16u), blocks[b + 13u].x);
}

// The unit's six-bit quants, one a byte: [0] weights 0..16 (word i byte b
// is weight 4i + b), [1] weights 16..32 (16 + 4i + b). Also
// q6_k_dots.wgsl's.
fn q6_quants(r: Raw) -> array<vec4<u32>, 2> {
    let lo = vec4<u32>(r.h.x << 4u, r.h.x, r.h.y << 4u, r.h.y);
    let hi = vec4<u32>(r.h.x << 2u, r.h.x >> 2u, r.h.y << 2u, r.h.y >> 2u);
    let m = vec4<u32>(0x0F0F0F0Fu);
    let p = vec4<u32>(0x30303030u);
    return array<vec4<u32>, 2>((r.q & m) | (lo & p), ((r.q >> vec4<u32>(4u)) & m) | (hi & p));
}

// d times the unit's two scales (weights 0..16 and 16..32).
fn q6_scales(r: Raw) -> vec2<f32> {
    let sc = vec2<f32>(f32(bitcast<i32>(r.sw << 24u) >> 24u), f32(bitcast<i32>(r.sw << 16u) >> 24u));
    return unpack2x16float(r.dw).x * sc;
}

// Four weights' quants w as d·sc·(q − 32) = q·s − 32·s (one FMA).
fn quad6(w: u32, s: f32) -> vec4<f32> {
    return fma(bytes4f(w), vec4<f32>(s), vec4<f32>(-32.0 * s));
}

// Written out (no array filled in a loop) so the unit stays in registers.
fn unit_of(r: Raw) -> Unit {
    let s = q6_scales(r);
    let q = q6_quants(r);
    return Unit(quad6(q[0].x, s.x), quad6(q[0].y, s.x), quad6(q[0].z, s.x), quad6(q[0].w, s.x),
        quad6(q[1].x, s.y), quad6(q[1].y, s.y), quad6(q[1].z, s.y), quad6(q[1].w, s.y));
}

fn unit_load(u: u32) -> Unit {
    return unit_of(unit_raw(u));
}
