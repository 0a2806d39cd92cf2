// Q6_K weights for matvec.wgsl. GGUF's 210-byte super-blocks are padded to
// 212 bytes (53 words) at load so every block starts on a word; bytes are
// otherwise unchanged. A super-block holds 8 units of 32 weights:
// w = d·sc·(q − 32), q six bits, sc a signed byte per 16 weights.
// Unit j = 4·h + k (h half, k quarter) weight l (0..32):
//   low 4 bits: byte 64·h + 32·(k & 1) + l of ql, high nibble when k >= 2
//   high 2 bits: byte 32·h + l of qh (bytes 128..192), bits 2k..2k+1
//   scale: byte 8·h + 2·k + l / 16 of sc (bytes 192..208); d: f16 at byte 208
// Binding: 6 blocks (array<u32>).

@group(0) @binding(6) var<storage, read> blocks: array<u32>;

fn unit_dot(u: u32, xo: u32) -> f32 {
    let j = u % 8u;
    let h = j / 4u;
    let k = j % 4u;
    let w0 = (u / 8u) * 53u;
    let d = unpack2x16float(blocks[w0 + 52u]).x;
    let ql0 = w0 + 16u * h + 8u * (k & 1u);
    let qh0 = w0 + 32u + 8u * h;
    let lshift = (k >> 1u) * 4u;
    let hshift = 2u * k;
    var part = vec2<f32>(0.0);
    for (var i = 0u; i < 8u; i++) {
        let lo = (bytes4(blocks[ql0 + i]) >> vec4<u32>(lshift)) & vec4<u32>(0xFu);
        let hi = (bytes4(blocks[qh0 + i]) >> vec4<u32>(hshift)) & vec4<u32>(3u);
        let q = vec4<f32>(lo | (hi << vec4<u32>(4u))) - 32.0;
        part[i / 4u] += dot(q, xv(xo + i));
    }
    // the unit's two scales: bytes 8h + 2k and 8h + 2k + 1 of sc
    let sb = 192u + 8u * h + 2u * k;
    let sw = blocks[w0 + sb / 4u] >> ((sb & 3u) * 8u);
    let s0 = f32(bitcast<i32>(sw << 24u) >> 24u);
    let s1 = f32(bitcast<i32>((sw >> 8u) << 24u) >> 24u);
    return d * (s0 * part.x + s1 * part.y);
}
