// Q5_0 weights for matvec.wgsl and matmul.wgsl, repacked at load
// (src/gpu/repack.rs): one unit is one GGUF block (f16 scale d, 32 five-bit
// weights, w = d·(q − 16)). Weight l < 16 is the low nibble of qs byte l,
// weight 16 + l its high nibble; bit l of the 32-bit qh is weight l's fifth
// bit.
// Bindings: 6 scales (array<u32>, two f16 per word, low half = even block),
// 7 quants (array<u32>, five words per block: qh, then qs's 16 bytes).

@group(0) @binding(6) var<storage, read> scales: array<u32>;
@group(0) @binding(7) var<storage, read> quants: array<u32>;

// Weights 4i..4i+4 of nibble half `shift` (0: weights 0..16, 4: 16..32)
// before scaling: q − 16, with fifth bits from qh bit `bit`..`bit`+4.
fn q5_quad(qs: u32, shift: u32, qh: u32, bit: u32) -> vec4<f32> {
    let q = (bytes4(qs) >> vec4<u32>(shift)) & vec4<u32>(0xFu);
    let h = (vec4<u32>(qh) >> (vec4<u32>(bit) + vec4<u32>(0u, 1u, 2u, 3u))) & vec4<u32>(1u);
    return vec4<f32>(q | (h << vec4<u32>(4u))) - 16.0;
}

// Written out (no array filled in a loop) so the unit stays in registers.
fn unit_load(u: u32) -> Unit {
    let d = unpack2x16float(scales[u >> 1u])[u & 1u];
    let t = 5u * u;
    let qh = quants[t];
    let a = quants[t + 1u];
    let b = quants[t + 2u];
    let c = quants[t + 3u];
    let e = quants[t + 4u];
    return Unit(d * q5_quad(a, 0u, qh, 0u), d * q5_quad(b, 0u, qh, 4u),
        d * q5_quad(c, 0u, qh, 8u), d * q5_quad(e, 0u, qh, 12u),
        d * q5_quad(a, 4u, qh, 16u), d * q5_quad(b, 4u, qh, 20u),
        d * q5_quad(c, 4u, qh, 24u), d * q5_quad(e, 4u, qh, 28u));
}
