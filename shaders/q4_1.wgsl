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
    let lo = vec4<u32>(0x0F0F0F0Fu) & q;
    let hi = vec4<u32>(0x0F0F0F0Fu) & (q >> vec4<u32>(4u));
    return Unit(d * bytes4f(lo.x) + m, d * bytes4f(lo.y) + m, d * bytes4f(lo.z) + m,
        d * bytes4f(lo.w) + m, d * bytes4f(hi.x) + m, d * bytes4f(hi.y) + m,
        d * bytes4f(hi.z) + m, d * bytes4f(hi.w) + m);
}
