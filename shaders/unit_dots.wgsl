// The decode matvecs' unit dots (matvec.wgsl, route.wgsl) for a format
// without dots of its own: the unit dequantized (unit_load), then dotted
// with the staged x. q4_0_dots.wgsl, q8_0_dots.wgsl and q6_k_dots.wgsl
// fold the dequantization into the dot instead.

// A unit as a matvec holds it while it does other work (matvec.wgsl: the
// gate+up's next pair, the weighted sum's next slot), then its dot. Here
// only its index: these formats have no raw form for the decode, and a
// held dequantized unit (32 floats) cost the Q5_K shared gate+up 16% (H200
// 5.85 -> 6.77 us, docs/perf-journal.md session 29), so the loads wait
// for the dot as before.
alias Held = u32;

fn unit_hold(u: u32) -> Held {
    return u;
}

fn held_dot(u: Held, v: array<vec4<f32>, 8>) -> f32 {
    let a = unit_load(u);
    return dot(a[0], v[0]) + dot(a[1], v[1]) + dot(a[2], v[2]) + dot(a[3], v[3])
        + dot(a[4], v[4]) + dot(a[5], v[5]) + dot(a[6], v[6]) + dot(a[7], v[7]);
}
