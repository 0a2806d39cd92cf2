// unit_load for the 16-bit float formats (f16.wgsl, bf16.wgsl, which
// define `four`), GGUF bytes unchanged: one unit is 32 consecutive values
// of a row (64 bytes, four vec4<u32>, the low half of each word first).
// Binding: 6 halves (array<vec4<u32>>).

@group(0) @binding(6) var<storage, read> halves: array<vec4<u32>>;

// Written out (no array filled in a loop) so the unit stays in registers.
fn unit_load(u: u32) -> Unit {
    let h0 = halves[4u * u];
    let h1 = halves[4u * u + 1u];
    let h2 = halves[4u * u + 2u];
    let h3 = halves[4u * u + 3u];
    return Unit(four(h0.x, h0.y), four(h0.z, h0.w), four(h1.x, h1.y), four(h1.z, h1.w),
        four(h2.x, h2.y), four(h2.z, h2.w), four(h3.x, h3.y), four(h3.z, h3.w));
}
