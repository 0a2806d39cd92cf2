// IQ4_NL weights for matvec.wgsl and matmul.wgsl, repacked at load as Q4_0
// is (src/gpu/repack.rs; the block is the same 18 bytes): one unit is one
// GGUF block (f16 scale d, 32 four-bit codebook indices q,
// w = d·kvalues[q], iq4_values.wgsl).
// Bindings: 6 scales (array<u32>, two f16 per word, low half = even block),
// 7 nibbles (array<vec4<u32>>, the block's 16 bytes unchanged: weights
// 4i..4i+4 are the low nibbles of word i, 16+4i.. its high nibbles).

@group(0) @binding(6) var<storage, read> scales: array<u32>;
@group(0) @binding(7) var<storage, read> nibbles: array<vec4<u32>>;

// Written out (no array filled in a loop) so the unit stays in registers.
fn unit_load(u: u32) -> Unit {
    let d = unpack2x16float(scales[u >> 1u])[u & 1u];
    let q = nibbles[u];
    let m = vec4<u32>(0xFu);
    let s = vec4<u32>(4u);
    return Unit(d * iq4_values(bytes4(q.x) & m), d * iq4_values(bytes4(q.y) & m),
        d * iq4_values(bytes4(q.z) & m), d * iq4_values(bytes4(q.w) & m),
        d * iq4_values(bytes4(q.x) >> s), d * iq4_values(bytes4(q.y) >> s),
        d * iq4_values(bytes4(q.z) >> s), d * iq4_values(bytes4(q.w) >> s));
}
