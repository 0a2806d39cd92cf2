// Q8_0 weights for matvec.wgsl and matmul.wgsl, repacked at load (src/gpu/repack.rs): one
// unit is one GGUF block (f16 scale d, 32 signed bytes q, w = d·q).
// Bindings: 6 scales (array<u32>, two f16 per word, low half = even block),
// 7 quants (array<vec4<u32>>, two per block, bytes unchanged).

@group(0) @binding(6) var<storage, read> scales: array<u32>;
@group(0) @binding(7) var<storage, read> quants: array<vec4<u32>>;

// Four signed bytes of `w` as floats: the sign bits flipped make them
// byte + 128, which bytes4f_less takes back off exactly.
fn i8x4(w: u32) -> vec4<f32> {
    return bytes4f_less(w ^ 0x80808080u, 128.0);
}

// Written out (no array filled in a loop) so the unit stays in registers.
fn unit_load(u: u32) -> Unit {
    let d = unpack2x16float(scales[u >> 1u])[u & 1u];
    let a = quants[2u * u];
    let b = quants[2u * u + 1u];
    return Unit(d * i8x4(a.x), d * i8x4(a.y), d * i8x4(a.z), d * i8x4(a.w),
        d * i8x4(b.x), d * i8x4(b.y), d * i8x4(b.z), d * i8x4(b.w));
}
