// Q4_0's unit dots for the decode matvecs (matvec.wgsl, route.wgsl; after
// q4_0.wgsl, bytes_f32.wgsl and matvec_x.wgsl): the dequantization folded
// into the dot. A nibble is or'd into the mantissa of 2^23 where it sits in
// its 16-bit half (place t: bits 4t ..), and one subtract leaves
// (q − 8)·16^t exactly; the products are summed per place, the places scaled by
// 16^−t (exact) and the unit by d once: about 116 instructions a unit where
// unit_load's shifts, byte floats and scaling, then the dot, took ~170. The
// decode matvecs are bound by their instructions: a stand-in dequantization
// of ~8 instructions a unit ran an H200 token 11% faster, these dots (with
// q8_0_dots.wgsl) 4.3%. Staging x pre-scaled by 16^−t, so that one vec4
// sums every product (16 instructions a unit fewer), was 1.3% slower
// (docs/perf-journal.md, session 26).

// Σ (q − 8)·x over a unit's words q with its x in v. In word i, byte b's
// low nibble is weight 4i + b and its high nibble weight 4i + b + 16, so
// place t of the low half (bytes 0, 1) and of the high half (bytes 2, 3)
// meets component t / 2 (+ 2 for the high half) of v[i] (t even) or
// v[4 + i] (t odd).
fn q4_sum(q: vec4<u32>, v: array<vec4<f32>, 8>) -> f32 {
    // placed() with c = 2^23 + 8·16^t
    let h = q >> vec4<u32>(16u);
    let s0 = placed(q, 0xFu, 8388616.0) * vec4<f32>(v[0].x, v[1].x, v[2].x, v[3].x)
        + placed(h, 0xFu, 8388616.0) * vec4<f32>(v[0].z, v[1].z, v[2].z, v[3].z);
    let s1 = placed(q, 0xF0u, 8388736.0) * vec4<f32>(v[4].x, v[5].x, v[6].x, v[7].x)
        + placed(h, 0xF0u, 8388736.0) * vec4<f32>(v[4].z, v[5].z, v[6].z, v[7].z);
    let s2 = placed(q, 0xF00u, 8390656.0) * vec4<f32>(v[0].y, v[1].y, v[2].y, v[3].y)
        + placed(h, 0xF00u, 8390656.0) * vec4<f32>(v[0].w, v[1].w, v[2].w, v[3].w);
    let s3 = placed(q, 0xF000u, 8421376.0) * vec4<f32>(v[4].y, v[5].y, v[6].y, v[7].y)
        + placed(h, 0xF000u, 8421376.0) * vec4<f32>(v[4].w, v[5].w, v[6].w, v[7].w);
    let s = (s0 + s1 * 0.0625) + (s2 * 0.00390625 + s3 * 0.000244140625);
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
    return r.d * q4_sum(r.q, v);
}
