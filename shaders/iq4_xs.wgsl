// IQ4_XS weights for matvec.wgsl and matmul.wgsl, GGUF bytes unchanged: a
// 136-byte super-block is 34 words. It holds 8 units of 32 weights:
// w = d·(ls − 32)·kvalues[q] (iq4_values.wgsl), q four bits, ls six bits
// per unit. Words of a super-block: 0 d (low f16) | scales_h (high 16 bits:
// bits 2j..2j+2 are unit j's top two scale bits), 1 scales_l (bits
// 4j..4j+4: unit j's low four), 2..34 qs (unit j: words 2 + 4j .. 6 + 4j,
// weights 4i..4i+4 the low nibbles of word i, 16+4i.. its high nibbles).
// Binding: 6 blocks (array<u32>).

@group(0) @binding(6) var<storage, read> blocks: array<u32>;

// Written out (no array filled in a loop) so the unit stays in registers.
fn unit_load(u: u32) -> Unit {
    let j = u % 8u;
    let w0 = (u / 8u) * 34u;
    let head = blocks[w0];
    let ls = ((blocks[w0 + 1u] >> (4u * j)) & 0xFu) | (((head >> (16u + 2u * j)) & 3u) << 4u);
    let d = unpack2x16float(head).x * (f32(ls) - 32.0);
    let q = w0 + 2u + 4u * j;
    let b0 = bytes4(blocks[q]);
    let b1 = bytes4(blocks[q + 1u]);
    let b2 = bytes4(blocks[q + 2u]);
    let b3 = bytes4(blocks[q + 3u]);
    let m = vec4<u32>(0xFu);
    let s = vec4<u32>(4u);
    return Unit(d * iq4_values(b0 & m), d * iq4_values(b1 & m), d * iq4_values(b2 & m),
        d * iq4_values(b3 & m), d * iq4_values(b0 >> s), d * iq4_values(b1 >> s),
        d * iq4_values(b2 >> s), d * iq4_values(b3 >> s));
}
