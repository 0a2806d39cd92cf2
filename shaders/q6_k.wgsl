// Q6_K weights for matvec.wgsl and matmul.wgsl. GGUF's 210-byte super-blocks are padded to
// 212 bytes (53 words) at load so every block starts on a word; bytes are
// otherwise unchanged. A super-block holds 8 units of 32 weights:
// w = d·sc·(q − 32), q six bits, sc a signed byte per 16 weights.
// Unit j = 4·h + k (h half, k quarter) weight l (0..32):
//   low 4 bits: byte 64·h + 32·(k & 1) + l of ql, high nibble when k >= 2
//   high 2 bits: byte 32·h + l of qh (bytes 128..192), bits 2k..2k+1
//   scale: byte 8·h + 2·k + l / 16 of sc (bytes 192..208); d: f16 at byte 208
// Binding: 6 blocks (array<u32>).

@group(0) @binding(6) var<storage, read> blocks: array<u32>;

// Unit u's weights 4i..4i+4 before scaling: q − 32.
fn quads(w0: u32, j: u32, i: u32) -> vec4<f32> {
    let h = j / 4u;
    let k = j % 4u;
    let lo = (bytes4(blocks[w0 + 16u * h + 8u * (k & 1u) + i]) >> vec4<u32>((k >> 1u) * 4u)) & vec4<u32>(0xFu);
    let hi = (bytes4(blocks[w0 + 32u + 8u * h + i]) >> vec4<u32>(2u * k)) & vec4<u32>(3u);
    return vec4<f32>(lo | (hi << vec4<u32>(4u))) - 32.0;
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
    return Unit(s.x * quads(w0, j, 0u), s.x * quads(w0, j, 1u), s.x * quads(w0, j, 2u),
        s.x * quads(w0, j, 3u), s.y * quads(w0, j, 4u), s.y * quads(w0, j, 5u),
        s.y * quads(w0, j, 6u), s.y * quads(w0, j, 7u));
}
