// Q2_K weights for matvec.wgsl and matmul.wgsl, GGUF bytes unchanged: an
// 84-byte super-block is 21 words. It holds 8 units of 32 weights:
// w = d·(sc & 15)·q − dmin·(sc >> 4), q two bits, sc a byte per 16 weights.
// Bytes of a super-block: 0..16 scales, 16..80 qs, 80 d|dmin (f16 pair).
// Unit j weight l (0..32): bits 2·(j % 4).. of qs byte 32·(j / 4) + l,
// scale byte 2j + l / 16 (ggml's dequantize_row_q2_K order).
// Binding: 6 blocks (array<u32>).

@group(0) @binding(6) var<storage, read> blocks: array<u32>;

// Unit j's weights 4i..4i+4 before scaling: q.
fn q2_quads(w0: u32, j: u32, i: u32) -> vec4<f32> {
    let w = blocks[w0 + 4u + 8u * (j / 4u) + i];
    return vec4<f32>((bytes4(w) >> vec4<u32>(2u * (j % 4u))) & vec4<u32>(3u));
}

// Written out (no array filled in a loop) so the unit stays in registers.
fn unit_load(u: u32) -> Unit {
    let j = u % 8u;
    let w0 = (u / 8u) * 21u;
    let dm = unpack2x16float(blocks[w0 + 20u]);
    let sw = blocks[w0 + j / 2u] >> ((j & 1u) * 16u);
    let sc = vec2<f32>(vec2<u32>(sw & 0xFu, (sw >> 8u) & 0xFu));
    let mn = vec2<f32>(vec2<u32>((sw >> 4u) & 0xFu, (sw >> 12u) & 0xFu));
    let a0 = vec4<f32>(dm.x * sc.x);
    let a1 = vec4<f32>(dm.x * sc.y);
    let m0 = vec4<f32>(dm.y * mn.x);
    let m1 = vec4<f32>(dm.y * mn.y);
    return Unit(a0 * q2_quads(w0, j, 0u) - m0, a0 * q2_quads(w0, j, 1u) - m0,
        a0 * q2_quads(w0, j, 2u) - m0, a0 * q2_quads(w0, j, 3u) - m0,
        a1 * q2_quads(w0, j, 4u) - m1, a1 * q2_quads(w0, j, 5u) - m1,
        a1 * q2_quads(w0, j, 6u) - m1, a1 * q2_quads(w0, j, 7u) - m1);
}
