// unit_load for the five-bit legacy formats (q5_0.wgsl, q5_1.wgsl, which
// bind the scales and define `unit_scale`): one unit is one GGUF block of
// 32 weights, w = a·q + b with (a, b) = unit_scale(u) and q five bits.
// Weight l < 16 is the low nibble of qs byte l, weight 16 + l its high
// nibble; bit l of the 32-bit qh is weight l's fifth bit.
// Binding: 7 quants (array<u32>, five words per block: qh, then qs's 16
// bytes), repacked at load (src/gpu/repack.rs).

@group(0) @binding(7) var<storage, read> quants: array<u32>;

// Weights 4i..4i+4 of nibble half `shift` (0: weights 0..16, 4: 16..32)
// before scaling, with fifth bits from qh bits `bit`..`bit`+4. Whole-word
// ops: the four fifth bits are spread to bit 4 of each byte by one multiply
// (n·0x2040810 puts bit b of n at 8b + 4; the four copies do not overlap).
fn q5_quad(qs: u32, shift: u32, qh: u32, bit: u32) -> vec4<f32> {
    let h = (((qh >> bit) & 0xFu) * 0x2040810u) & 0x10101010u;
    return bytes4f(((qs >> shift) & 0x0F0F0F0Fu) | h);
}

// Written out (no array filled in a loop) so the unit stays in registers.
fn unit_load(u: u32) -> Unit {
    let s = unit_scale(u);
    let a = vec4<f32>(s.x);
    let b = vec4<f32>(s.y);
    let t = 5u * u;
    let qh = quants[t];
    let q0 = quants[t + 1u];
    let q1 = quants[t + 2u];
    let q2 = quants[t + 3u];
    let q3 = quants[t + 4u];
    return Unit(fma(q5_quad(q0, 0u, qh, 0u), a, b), fma(q5_quad(q1, 0u, qh, 4u), a, b),
        fma(q5_quad(q2, 0u, qh, 8u), a, b), fma(q5_quad(q3, 0u, qh, 12u), a, b),
        fma(q5_quad(q0, 4u, qh, 16u), a, b), fma(q5_quad(q1, 4u, qh, 20u), a, b),
        fma(q5_quad(q2, 4u, qh, 24u), a, b), fma(q5_quad(q3, 4u, qh, 28u), a, b));
}
