// Q8_0's unit dots for the decode matvecs (matvec.wgsl, route.wgsl; after
// q8_0.wgsl, bytes_f32.wgsl and matvec_x.wgsl): the dequantization folded
// into the dot, as q4_0_dots.wgsl does for nibbles. Each word's sign bits
// are flipped once (byte + 128); a byte is or'd into the mantissa of 2^23
// where it sits in its 16-bit half (place t: bits 8t ..), and one subtract
// leaves q·256^t exactly; the two places are summed apart, the second
// scaled by 1/256 (exact), the unit by d once.

// Σ q·x over a unit's quants (weights 0..15 in a, 16..31 in b; byte k of
// word i is weight 4i + k) with its x in v.
fn q8_sum(qa: vec4<u32>, qb: vec4<u32>, v: array<vec4<f32>, 8>) -> f32 {
    // placed() with c = 2^23 + 128·256^t
    let a = qa ^ vec4<u32>(0x80808080u);
    let b = qb ^ vec4<u32>(0x80808080u);
    let ah = a >> vec4<u32>(16u);
    let bh = b >> vec4<u32>(16u);
    let s0 = (placed(a, 0xFFu, 8388736.0) * vec4<f32>(v[0].x, v[1].x, v[2].x, v[3].x)
        + placed(ah, 0xFFu, 8388736.0) * vec4<f32>(v[0].z, v[1].z, v[2].z, v[3].z))
        + (placed(b, 0xFFu, 8388736.0) * vec4<f32>(v[4].x, v[5].x, v[6].x, v[7].x)
        + placed(bh, 0xFFu, 8388736.0) * vec4<f32>(v[4].z, v[5].z, v[6].z, v[7].z));
    let s1 = (placed(a, 0xFF00u, 8421376.0) * vec4<f32>(v[0].y, v[1].y, v[2].y, v[3].y)
        + placed(ah, 0xFF00u, 8421376.0) * vec4<f32>(v[0].w, v[1].w, v[2].w, v[3].w))
        + (placed(b, 0xFF00u, 8421376.0) * vec4<f32>(v[4].y, v[5].y, v[6].y, v[7].y)
        + placed(bh, 0xFF00u, 8421376.0) * vec4<f32>(v[4].w, v[5].w, v[6].w, v[7].w));
    let s = s0 + s1 * 0.00390625;
    return (s.x + s.y) + (s.z + s.w);
}

// A unit as loaded (its raw words), so that a matvec can hold it while it
// does other work (matvec.wgsl: the gate+up's next pair, the weighted
// sum's next slot), then its dot.
alias Held = Raw;

fn unit_hold(u: u32) -> Held {
    return unit_raw(u);
}

fn held_dot(r: Held, v: array<vec4<f32>, 8>) -> f32 {
    return r.d * q8_sum(r.a, r.b, v);
}
