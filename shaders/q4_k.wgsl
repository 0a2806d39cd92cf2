// Q4_K weights for matvec.wgsl and matmul.wgsl, GGUF bytes unchanged: a
// 144-byte super-block is nine 16-byte vectors, so every block and every
// unit's nibbles start on a vec4. A super-block holds 8 units of 32 weights:
// w = d·sc_j·q − dmin·m_j, 6-bit sc_j, m_j packed in 12 bytes
// (k_scales.wgsl), q four bits.
// Vec4 layout of a super-block: 0 d|dmin (f16 pair) and the 12 scale
// bytes, 1..9 qs (unit j's weight l: byte 32·(j/2) + l of qs, high nibble
// when j is odd; so unit j reads vec4s 1 + 2·(j/2) and 2 + 2·(j/2)).
// Binding: 6 blocks (array<vec4<u32>>).

@group(0) @binding(6) var<storage, read> blocks: array<vec4<u32>>;

// Weights 4i..4i+4 (nibbles at `s` of word `w`) as d·q − m: the nibble is
// masked on the whole word, one shift and one and for four weights.
fn quad4k(w: u32, s: u32, sm: vec2<f32>) -> vec4<f32> {
    return fma(bytes4f((w >> s) & 0x0F0F0F0Fu), vec4<f32>(sm.x), vec4<f32>(-sm.y));
}

// A unit's words as loaded (unit_raw: the super-block's head, the unit's
// two qs vectors, its index j), dequantized by unit_of; unit_load is both
// (matmul_coop.wgsl holds the raw form).
struct Raw {
    head: vec4<u32>,
    q0: vec4<u32>,
    q1: vec4<u32>,
    j: u32,
}

fn unit_raw(u: u32) -> Raw {
    let j = u % 8u;
    let b = (u / 8u) * 9u;
    return Raw(blocks[b], blocks[b + 1u + (j / 2u) * 2u], blocks[b + 2u + (j / 2u) * 2u], j);
}

// Written out (no array filled in a loop) so the unit stays in registers.
fn unit_of(r: Raw) -> Unit {
    let sm = scale_min_k4(r.head, r.j);
    let s = (r.j & 1u) * 4u;
    let q0 = r.q0;
    let q1 = r.q1;
    return Unit(quad4k(q0.x, s, sm), quad4k(q0.y, s, sm), quad4k(q0.z, s, sm), quad4k(q0.w, s, sm),
        quad4k(q1.x, s, sm), quad4k(q1.y, s, sm), quad4k(q1.z, s, sm), quad4k(q1.w, s, sm));
}

fn unit_load(u: u32) -> Unit {
    return unit_of(unit_raw(u));
}
