// F16 weights for matvec.wgsl and matmul.wgsl: the unit and binding are
// halves.wgsl's; this file turns two words (four halves) into floats.

fn four(a: u32, b: u32) -> vec4<f32> {
    return vec4<f32>(unpack2x16float(a), unpack2x16float(b));
}
