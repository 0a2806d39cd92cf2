// Q3_K weights for matvec.wgsl and matmul.wgsl. GGUF's 110-byte
// super-blocks are padded to 112 bytes (7 vec4s) at load so every block
// starts on a vec4 (src/gpu/repack.rs); bytes are otherwise unchanged. A
// super-block holds 8 units of 32 weights: w = d·(sc − 32)·(q − 4·!h),
// q two low bits, h one high bit, sc six bits per 16 weights.
// Bytes of a super-block: 0..32 hmask, 32..96 qs, 96..108 scales, 108 d.
// Unit j weight l (0..32): bits 2·(j % 4).. of qs byte 32·(j / 4) + l, high
// bit j of hmask byte l, scale s = 2j + l / 16: low four bits of byte s
// (s < 8) or high four of byte s − 8, top two bits 2·(s / 4).. of byte
// 8 + s % 4 of the scales (ggml's dequantize_row_q3_K order).
// Read as vec4s (seven a super-block): a unit is five vector loads (its
// two hmask vectors, two qs vectors, the scales and d), not 19 words.
// Binding: 6 blocks (array<vec4<u32>>).

@group(0) @binding(6) var<storage, read> blocks: array<vec4<u32>>;

// Weights 4i..4i+4 before scaling, q − 4·!h, from qs word `q` (bits
// 2·(j % 4)..) and hmask word `h` (bit j).
fn q3_quad(q: u32, h: u32, j: u32) -> vec4<f32> {
    let lo = (bytes4(q) >> vec4<u32>(2u * (j % 4u))) & vec4<u32>(3u);
    let hi = (bytes4(h) >> vec4<u32>(j)) & vec4<u32>(1u);
    return vec4<f32>(lo | (hi << vec4<u32>(2u))) - 4.0;
}

// d times unit j's two scales (weights 0..16 and 16..32), from the
// super-block's last vector (scale words 24..27 and d).
fn q3_scales(t: vec4<u32>, j: u32) -> vec2<f32> {
    let s = 2u * j;
    let sh = (s % 4u) * 8u;
    let low = (select(t.x, t.y, (s % 8u) >= 4u) >> (sh + (s / 8u) * 4u)) & 0x0F0Fu;
    let high = (t.z >> (sh + (s / 4u) * 2u)) & 0x0303u;
    let q = low | (high << 4u);
    let d = unpack2x16float(t.w).x;
    return d * (vec2<f32>(vec2<u32>(q & 0xFFu, q >> 8u)) - 32.0);
}

// Written out (no array filled in a loop) so the unit stays in registers.
fn unit_load(u: u32) -> Unit {
    let j = u % 8u;
    let b = (u / 8u) * 7u;
    let s = q3_scales(blocks[b + 6u], j);
    let h0 = blocks[b];
    let h1 = blocks[b + 1u];
    let q0 = blocks[b + 2u + 2u * (j / 4u)];
    let q1 = blocks[b + 3u + 2u * (j / 4u)];
    return Unit(s.x * q3_quad(q0.x, h0.x, j), s.x * q3_quad(q0.y, h0.y, j), s.x * q3_quad(q0.z, h0.z, j),
        s.x * q3_quad(q0.w, h0.w, j), s.y * q3_quad(q1.x, h1.x, j), s.y * q3_quad(q1.y, h1.y, j),
        s.y * q3_quad(q1.z, h1.z, j), s.y * q3_quad(q1.w, h1.w, j));
}
