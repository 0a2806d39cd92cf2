// bytes4f for the K-quant, legacy four-, five- and eight-bit format files
// (q4_k, q5_k, q6_k, q5_unit, q4_0, q4_1, q8_0), and placed() for their
// unit-dots files: the four bytes of a word as f32 without int → float
// converts, which run at a quarter of the FMA rate on NVIDIA (32 per unit
// otherwise).
// Or-ing a byte into the mantissa of 2^23 (0x4B000000) gives exactly
// 2^23 + byte; one subtract takes 2^23 off, exactly.

fn bytes4f(w: u32) -> vec4<f32> {
    return bytes4f_less(w, 0.0);
}

// The four bytes of `w` less `c` (a constant: 8 for Q4_0's nibbles, 128
// for Q8_0's sign-flipped bytes), with the offset folded into the same
// subtract: (2^23 + byte) − (2^23 + c), exact for integers c < 2^23.
fn bytes4f_less(w: u32, c: f32) -> vec4<f32> {
    let m = ((vec4<u32>(w) >> vec4<u32>(0u, 8u, 16u, 24u)) & vec4<u32>(0xFFu)) | vec4<u32>(0x4B000000u);
    return bitcast<vec4<f32>>(m) - vec4<f32>(8388608.0 + c);
}

// The bits `mask` selects in each of the four words, in place, as floats
// less c: (2^23 + bits) − c, exact while the bits stay under bit 23 and c
// is an integer. The unit-dots files take a byte or nibble where it sits
// (place t: its value times 256^t or 16^t) with c = 2^23 + offset·place,
// so one mask-or and one subtract give (q − offset)·place.
fn placed(w: vec4<u32>, mask: u32, c: f32) -> vec4<f32> {
    return bitcast<vec4<f32>>((w & vec4<u32>(mask)) | vec4<u32>(0x4B000000u)) - vec4<f32>(c);
}
