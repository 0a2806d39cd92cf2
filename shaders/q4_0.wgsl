// Q4_0 weights for matvec.wgsl and matmul.wgsl, repacked at load (src/gpu/repack.rs): one
// unit is one GGUF block (f16 scale d, 32 four-bit weights q, w = d·(q − 8)).
// Bindings: 6 scales (array<u32>, two f16 per word, low half = even block),
// 7 nibbles (array<vec4<u32>>, the block's 16 bytes unchanged).

@group(0) @binding(6) var<storage, read> scales: array<u32>;
@group(0) @binding(7) var<storage, read> nibbles: array<vec4<u32>>;

// Weights 4i..4i+4 are the low nibbles of word i, 16+4i.. its high nibbles.
// Written out (no array filled in a loop) so the unit stays in registers.
fn unit_load(u: u32) -> Unit {
    let d = unpack2x16float(scales[u >> 1u])[u & 1u];
    let q = nibbles[u];
    let b0 = bytes4(q.x);
    let b1 = bytes4(q.y);
    let b2 = bytes4(q.z);
    let b3 = bytes4(q.w);
    let m = vec4<u32>(0xFu);
    let s = vec4<u32>(4u);
    return Unit(d * (vec4<f32>(b0 & m) - 8.0), d * (vec4<f32>(b1 & m) - 8.0),
        d * (vec4<f32>(b2 & m) - 8.0), d * (vec4<f32>(b3 & m) - 8.0),
        d * (vec4<f32>(b0 >> s) - 8.0), d * (vec4<f32>(b1 >> s) - 8.0),
        d * (vec4<f32>(b2 >> s) - 8.0), d * (vec4<f32>(b3 >> s) - 8.0));
}
