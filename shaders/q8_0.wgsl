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

// A unit's words as loaded (unit_raw), dequantized by unit_of; unit_load
// is both (matmul_coop.wgsl holds the raw form).
struct Raw {
    a: vec4<u32>,
    b: vec4<u32>,
    d: f32,
}

fn unit_raw(u: u32) -> Raw {
    return Raw(quants[2u * u], quants[2u * u + 1u], unpack2x16float(scales[u >> 1u])[u & 1u]);
}

// Written out (no array filled in a loop) so the unit stays in registers.
fn unit_of(r: Raw) -> Unit {
    let d = r.d;
    return Unit(d * i8x4(r.a.x), d * i8x4(r.a.y), d * i8x4(r.a.z), d * i8x4(r.a.w),
        d * i8x4(r.b.x), d * i8x4(r.b.y), d * i8x4(r.b.z), d * i8x4(r.b.w));
}

fn unit_load(u: u32) -> Unit {
    return unit_of(unit_raw(u));
}
