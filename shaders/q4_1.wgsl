// Q4_1 weights for matvec.wgsl and matmul.wgsl, repacked at load
// (src/gpu/repack.rs): one unit is one GGUF block (f16 scale d, f16 min m,
// 32 four-bit weights q, w = d·q + m).
// Bindings: 6 scales (array<u32>, one word per block: d low half, m high),
// 7 nibbles (array<vec4<u32>>, the block's 16 bytes unchanged: weights
// 4i..4i+4 are the low nibbles of word i, 16+4i.. its high nibbles).

@group(0) @binding(6) var<storage, read> scales: array<u32>;
@group(0) @binding(7) var<storage, read> nibbles: array<vec4<u32>>;

// Written out (no array filled in a loop) so the unit stays in registers.
fn unit_load(u: u32) -> Unit {
    let dm = unpack2x16float(scales[u]);
    let d = vec4<f32>(dm.x);
    let m = vec4<f32>(dm.y);
    let q = nibbles[u];
    let lo = vec4<u32>(0xFu);
    let hi = vec4<u32>(4u);
    return Unit(d * vec4<f32>(bytes4(q.x) & lo) + m, d * vec4<f32>(bytes4(q.y) & lo) + m,
        d * vec4<f32>(bytes4(q.z) & lo) + m, d * vec4<f32>(bytes4(q.w) & lo) + m,
        d * vec4<f32>(bytes4(q.x) >> hi) + m, d * vec4<f32>(bytes4(q.y) >> hi) + m,
        d * vec4<f32>(bytes4(q.z) >> hi) + m, d * vec4<f32>(bytes4(q.w) >> hi) + m);
}
