// F32 weights for matvec.wgsl and matmul.wgsl (the MoE router, `ffn_gate_inp`): one unit
// is 32 consecutive floats of a row, read as eight vec4s.
// Binding: 6 weights (array<vec4<f32>>).

@group(0) @binding(6) var<storage, read> weights: array<vec4<f32>>;

fn unit_dot(u: u32, xo: u32) -> f32 {
    var acc = 0.0;
    for (var k = 0u; k < 8u; k++) {
        acc += dot(weights[8u * u + k], xv(xo + k));
    }
    return acc;
}

fn unit_load(u: u32) -> Unit {
    var w: Unit;
    for (var k = 0u; k < 8u; k++) {
        w[k] = weights[8u * u + k];
    }
    return w;
}
