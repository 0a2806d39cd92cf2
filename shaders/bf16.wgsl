// BF16 weights for matvec.wgsl and matmul.wgsl: the unit and binding are
// halves.wgsl's; this file turns two words (four bfloat16s) into floats. A
// bfloat16 is the top half of an f32.

fn four(a: u32, b: u32) -> vec4<f32> {
    return bitcast<vec4<f32>>(vec4<u32>(a << 16u, a & 0xFFFF0000u, b << 16u, b & 0xFFFF0000u));
}
