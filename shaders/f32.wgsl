// F32 weights for matvec.wgsl and matmul.wgsl (the MoE router, `ffn_gate_inp`): one unit
// is 32 consecutive floats of a row, read as eight vec4s.
// Binding: 6 weights (array<vec4<f32>>).

@group(0) @binding(6) var<storage, read> weights: array<vec4<f32>>;

// Written out (no array filled in a loop) so the unit stays in registers.
fn unit_load(u: u32) -> Unit {
    let b = 8u * u;
    return Unit(weights[b], weights[b + 1u], weights[b + 2u], weights[b + 3u], weights[b + 4u],
        weights[b + 5u], weights[b + 6u], weights[b + 7u]);
}
