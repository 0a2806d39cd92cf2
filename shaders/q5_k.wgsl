// Q5_K weights for matvec.wgsl and matmul.wgsl, GGUF bytes unchanged (176-byte super-blocks
// are already word aligned: 44 words). A super-block holds 8 units of 32
// weights: w = d·sc_j·(q + 16·h) − dmin·m_j, with 6-bit sc_j, m_j packed in
// 12 bytes (k_scales.wgsl), q four bits and h one bit.
// Word layout of a super-block: 0 d|dmin (f16 pair), 1..4 scales,
// 4..12 qh (bit j of byte l = high bit of unit j's weight l), 12..44 qs
// (unit j's weight l: byte 32·(j/2) + l, high nibble when j is odd).
// Binding: 6 blocks (array<u32>).

@group(0) @binding(6) var<storage, read> blocks: array<u32>;

// Unit j's weights 4i..4i+4 before scaling: q + 16·h.
fn quads(w0: u32, j: u32, i: u32) -> vec4<f32> {
    let q = (bytes4(blocks[w0 + 12u + (j / 2u) * 8u + i]) >> vec4<u32>((j & 1u) * 4u)) & vec4<u32>(0xFu);
    let h = (bytes4(blocks[w0 + 4u + i]) >> vec4<u32>(j)) & vec4<u32>(1u);
    return vec4<f32>(q + h * 16u);
}

// Written out (no array filled in a loop) so the unit stays in registers.
fn unit_load(u: u32) -> Unit {
    let j = u % 8u;
    let w0 = (u / 8u) * 44u;
    let sm = scale_min_k4(vec4<u32>(blocks[w0], blocks[w0 + 1u], blocks[w0 + 2u], blocks[w0 + 3u]), j);
    let m = vec4<f32>(sm.y);
    return Unit(sm.x * quads(w0, j, 0u) - m, sm.x * quads(w0, j, 1u) - m,
        sm.x * quads(w0, j, 2u) - m, sm.x * quads(w0, j, 3u) - m,
        sm.x * quads(w0, j, 4u) - m, sm.x * quads(w0, j, 5u) - m,
        sm.x * quads(w0, j, 6u) - m, sm.x * quads(w0, j, 7u) - m);
}
