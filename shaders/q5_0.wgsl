// Q5_0 weights for matvec.wgsl and matmul.wgsl, repacked at load
// (src/gpu/repack.rs): one unit is one GGUF block (f16 scale d, 32 five-bit
// weights q, w = d·(q − 16)); q5_unit.wgsl reads the quants.
// Binding: 6 scales (array<u32>, two f16 per word, low half = even block).

@group(0) @binding(6) var<storage, read> scales: array<u32>;

// (a, b) of w = a·q + b: d·q − 16·d is exact in f32 (d is an f16, q five
// bits), so this equals ggml's d·(q − 16).
fn unit_scale(u: u32) -> vec2<f32> {
    let d = unpack2x16float(scales[u >> 1u])[u & 1u];
    return vec2<f32>(d, -16.0 * d);
}
