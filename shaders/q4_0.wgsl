// Q4_0 weights for matvec.wgsl and matmul.wgsl, repacked at load (src/gpu/repack.rs): one
// unit is one GGUF block (f16 scale d, 32 four-bit weights q, w = d·(q − 8)).
// Bindings: 6 scales (array<u32>, two f16 per word, low half = even block),
// 7 nibbles (array<vec4<u32>>, the block's 16 bytes unchanged).

@group(0) @binding(6) var<storage, read> scales: array<u32>;
@group(0) @binding(7) var<storage, read> nibbles: array<vec4<u32>>;

// Byte j of a block holds weight j in its low nibble and weight j+16 in its
// high nibble; `w` carries bytes 4i..4i+3, so `lo` is x[4i..4i+4] and `hi`
// is x[16+4i..16+4i+4].
fn nibble_dot(w: u32, lo: vec4<f32>, hi: vec4<f32>) -> f32 {
    let b = bytes4(w);
    let l = vec4<f32>(b & vec4<u32>(0xFu)) - 8.0;
    let h = vec4<f32>(b >> vec4<u32>(4u)) - 8.0;
    return dot(l, lo) + dot(h, hi);
}

fn unit_dot(u: u32, xo: u32) -> f32 {
    let d = unpack2x16float(scales[u >> 1u])[u & 1u];
    let q = nibbles[u];
    return d * (nibble_dot(q.x, xv(xo), xv(xo + 4u)) + nibble_dot(q.y, xv(xo + 1u), xv(xo + 5u))
        + nibble_dot(q.z, xv(xo + 2u), xv(xo + 6u)) + nibble_dot(q.w, xv(xo + 3u), xv(xo + 7u)));
}

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
