// Q3_K weights for matvec.wgsl and matmul.wgsl. GGUF's 110-byte
// super-blocks are padded to 112 bytes (28 words) at load so every block
// starts on a word (src/gpu/repack.rs); bytes are otherwise unchanged. A
// super-block holds 8 units of 32 weights: w = d·(sc − 32)·(q − 4·!h),
// q two low bits, h one high bit, sc six bits per 16 weights.
// Bytes of a super-block: 0..32 hmask, 32..96 qs, 96..108 scales, 108 d.
// Unit j weight l (0..32): bits 2·(j % 4).. of qs byte 32·(j / 4) + l, high
// bit j of hmask byte l, scale s = 2j + l / 16: low four bits of byte s
// (s < 8) or high four of byte s − 8, top two bits 2·(s / 4).. of byte
// 8 + s % 4 of the scales (ggml's dequantize_row_q3_K order).
// Binding: 6 blocks (array<u32>).

@group(0) @binding(6) var<storage, read> blocks: array<u32>;

// Unit j's weights 4i..4i+4 before scaling: q − 4·!h.
fn q3_quads(w0: u32, j: u32, i: u32) -> vec4<f32> {
    let lo = (bytes4(blocks[w0 + 8u + 8u * (j / 4u) + i]) >> vec4<u32>(2u * (j % 4u))) & vec4<u32>(3u);
    let hi = (bytes4(blocks[w0 + i]) >> vec4<u32>(j)) & vec4<u32>(1u);
    return vec4<f32>(lo | (hi << vec4<u32>(2u))) - 4.0;
}

// d times unit j's two scales (weights 0..16 and 16..32).
fn q3_scales(w0: u32, j: u32) -> vec2<f32> {
    let s = 2u * j;
    let sh = (s % 4u) * 8u;
    let low = (blocks[w0 + 24u + (s % 8u) / 4u] >> (sh + (s / 8u) * 4u)) & 0x0F0Fu;
    let high = (blocks[w0 + 26u] >> (sh + (s / 4u) * 2u)) & 0x0303u;
    let q = low | (high << 4u);
    let d = unpack2x16float(blocks[w0 + 27u]).x;
    return d * (vec2<f32>(vec2<u32>(q & 0xFFu, q >> 8u)) - 32.0);
}

// Written out (no array filled in a loop) so the unit stays in registers.
fn unit_load(u: u32) -> Unit {
    let j = u % 8u;
    let w0 = (u / 8u) * 28u;
    let s = q3_scales(w0, j);
    return Unit(s.x * q3_quads(w0, j, 0u), s.x * q3_quads(w0, j, 1u), s.x * q3_quads(w0, j, 2u),
        s.x * q3_quads(w0, j, 3u), s.y * q3_quads(w0, j, 4u), s.y * q3_quads(w0, j, 5u),
        s.y * q3_quads(w0, j, 6u), s.y * q3_quads(w0, j, 7u));
}
