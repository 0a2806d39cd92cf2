// Q6_K's unit dots for the decode matvecs (matvec.wgsl, route.wgsl; after
// q6_k.wgsl, bytes_f32.wgsl and matvec_x.wgsl): the dequantization folded
// into the dot, as q4_0_dots.wgsl does for nibbles. The six-bit quants are
// assembled a byte a weight (q6_quants); a byte is or'd into the mantissa of
// 2^23 where it sits in its 16-bit half (place t: bits 8t ..), and one
// subtract leaves (q − 32)·256^t exactly; the two places are summed apart,
// the second scaled by 1/256 (exact), each half of the unit by its scale
// once.

// Σ (q − 32)·x over sixteen weights: byte b of word i of q is weight
// 4i + b, whose x is component b of v_i.
fn q6_half(q: vec4<u32>, v0: vec4<f32>, v1: vec4<f32>, v2: vec4<f32>, v3: vec4<f32>) -> f32 {
    // placed() with c = 2^23 + 32·256^t
    let h = q >> vec4<u32>(16u);
    let s0 = placed(q, 0xFFu, 8388640.0) * vec4<f32>(v0.x, v1.x, v2.x, v3.x)
        + placed(h, 0xFFu, 8388640.0) * vec4<f32>(v0.z, v1.z, v2.z, v3.z);
    let s1 = placed(q, 0xFF00u, 8396800.0) * vec4<f32>(v0.y, v1.y, v2.y, v3.y)
        + placed(h, 0xFF00u, 8396800.0) * vec4<f32>(v0.w, v1.w, v2.w, v3.w);
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
    let q = q6_quants(r);
    let s = q6_scales(r);
    return s.x * q6_half(q[0], v[0], v[1], v[2], v[3]) + s.y * q6_half(q[1], v[4], v[5], v[6], v[7]);
}
