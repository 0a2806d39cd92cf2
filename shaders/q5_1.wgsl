// Q5_1 weights for matvec.wgsl and matmul.wgsl, repacked at load
// (src/gpu/repack.rs): one unit is one GGUF block (f16 scale d, f16 min m,
// 32 five-bit weights q, w = d·q + m); q5_unit.wgsl reads the quants.
// Binding: 6 scales (array<u32>, one word per block: d low half, m high).

@group(0) @binding(6) var<storage, read> scales: array<u32>;

// (a, b) of w = a·q + b.
fn unit_scale(u: u32) -> vec2<f32> {
    return unpack2x16float(scales[u]);
}
