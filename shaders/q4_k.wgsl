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

// Written out (no array filled in a loop) so the unit stays in registers.
fn unit_load(u: u32) -> Unit {
    let j = u % 8u;
    let b = (u / 8u) * 9u;
    let sm = scale_min_k4(blocks[b], j);
    let q0 = blocks[b + 1u + (j / 2u) * 2u];
    let q1 = blocks[b + 2u + (j / 2u) * 2u];
    let s = (j & 1u) * 4u;
    return Unit(quad4k(q0.x, s, sm), quad4k(q0.y, s, sm), quad4k(q0.z, s, sm), quad4k(q0.w, s, sm),
        quad4k(q1.x, s, sm), quad4k(q1.y, s, sm), quad4k(q1.z, s, sm), quad4k(q1.w, s, sm));
}
