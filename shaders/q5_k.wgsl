// Q5_K weights for matvec.wgsl and matmul.wgsl, GGUF bytes unchanged (176-byte super-blocks
// are already 16-byte aligned: 11 vec4s). A super-block holds 8 units of 32
// weights: w = d·sc_j·(q + 16·h) − dmin·m_j, with 6-bit sc_j, m_j packed in
// 12 bytes (k_scales.wgsl), q four bits and h one bit.
// Vec4 layout of a super-block (11 vec4s): 0 d|dmin (f16 pair) and the 12
// scale bytes, 1..3 qh (bit j of byte l = high bit of unit j's weight l),
// 3..11 qs (unit j's weight l: byte 32·(j/2) + l, high nibble when j is
// odd; so unit j reads vec4s 3 + 2·(j/2) and 4 + 2·(j/2)). Read as vec4s:
// five loads a unit rather than twenty words.
// Binding: 6 blocks (array<vec4<u32>>).

@group(0) @binding(6) var<storage, read> blocks: array<vec4<u32>>;

// Unit j's weights 4i..4i+4 as d·sc·(q + 16·h) − dmin·m: nibble and high
// bit are masked on whole words (qs word at `s`, qh word's bit j to bit 4
// of each byte), one FMA per weight.
fn quad5k(qs: u32, s: u32, qh: u32, j: u32, sm: vec2<f32>) -> vec4<f32> {
    let q = ((qs >> s) & 0x0F0F0F0Fu) | (((qh >> j) << 4u) & 0x10101010u);
    return fma(bytes4f(q), vec4<f32>(sm.x), vec4<f32>(-sm.y));
}

// A unit's words as loaded (unit_raw: the super-block's head, the unit's
// eight qs words, the eight qh words, its index j), dequantized by
// unit_of; unit_load is both (matmul_coop.wgsl holds the raw form).
struct Raw {
    head: vec4<u32>,
    qs0: vec4<u32>,
    qs1: vec4<u32>,
    qh0: vec4<u32>,
    qh1: vec4<u32>,
    j: u32,
}

fn unit_raw(u: u32) -> Raw {
    let j = u % 8u;
    let b = (u / 8u) * 11u;
    let q = b + 3u + (j / 2u) * 2u;
    return Raw(blocks[b], blocks[q], blocks[q + 1u], blocks[b + 1u], blocks[b + 2u], j);
}

// Written out (no array filled in a loop) so the unit stays in registers.
fn unit_of(r: Raw) -> Unit {
    let j = r.j;
    let sm = scale_min_k4(r.head, j);
    let s = (j & 1u) * 4u;
    return Unit(quad5k(r.qs0.x, s, r.qh0.x, j, sm), quad5k(r.qs0.y, s, r.qh0.y, j, sm),
        quad5k(r.qs0.z, s, r.qh0.z, j, sm), quad5k(r.qs0.w, s, r.qh0.w, j, sm),
        quad5k(r.qs1.x, s, r.qh1.x, j, sm), quad5k(r.qs1.y, s, r.qh1.y, j, sm),
        quad5k(r.qs1.z, s, r.qh1.z, j, sm), quad5k(r.qs1.w, s, r.qh1.w, j, sm));
}

fn unit_load(u: u32) -> Unit {
    return unit_of(unit_raw(u));
}
