// IQ4_XS weights for matvec.wgsl and matmul.wgsl. GGUF's 136-byte
// super-block is rotated at load (src/gpu/repack.rs): its 128 bytes of
// nibbles first, then its 8-byte head, then 8 bytes of padding, 144 bytes
// (9 vec4s) in all, so a unit is two vector loads. It holds 8 units of 32
// weights: w = d·(ls − 32)·kvalues[q] (iq4_values.wgsl), q four bits, ls
// six bits per unit. Vec4 j (0..8) is unit j's nibbles (weights 4i..4i+4
// the low nibbles of word i, 16+4i.. its high nibbles); vec4 8 is the head:
// x d (low f16) | scales_h (high 16 bits: bits 2j..2j+2 are unit j's top
// two scale bits), y scales_l (bits 4j..4j+4: unit j's low four).
// Binding: 6 blocks (array<vec4<u32>>).

@group(0) @binding(6) var<storage, read> blocks: array<vec4<u32>>;

// Written out (no array filled in a loop) so the unit stays in registers.
fn unit_load(u: u32) -> Unit {
    let j = u % 8u;
    let b = (u / 8u) * 9u;
    let head = blocks[b + 8u];
    let ls = ((head.y >> (4u * j)) & 0xFu) | (((head.x >> (16u + 2u * j)) & 3u) << 4u);
    let d = unpack2x16float(head.x).x * (f32(ls) - 32.0);
    let q = blocks[b + j];
    let b0 = bytes4(q.x);
    let b1 = bytes4(q.y);
    let b2 = bytes4(q.z);
    let b3 = bytes4(q.w);
    let m = vec4<u32>(0xFu);
    let s = vec4<u32>(4u);
    return Unit(d * iq4_values(b0 & m), d * iq4_values(b1 & m), d * iq4_values(b2 & m),
        d * iq4_values(b3 & m), d * iq4_values(b0 >> s), d * iq4_values(b1 >> s),
        d * iq4_values(b2 >> s), d * iq4_values(b3 >> s));
}
