// The decode matvecs' unit dots (matvec.wgsl, route.wgsl) for a format
// without dots of its own: the unit dequantized (unit_load), then dotted
// with the staged x. q4_0_dots.wgsl and q8_0_dots.wgsl fold the
// dequantization into the dot instead.

// Unit u's dot with staged unit j's x.
fn unit_dot(u: u32, j: u32) -> f32 {
    let a = unit_load(u);
    let v = x8(j);
    return dot(a[0], v[0]) + dot(a[1], v[1]) + dot(a[2], v[2]) + dot(a[3], v[3])
        + dot(a[4], v[4]) + dot(a[5], v[5]) + dot(a[6], v[6]) + dot(a[7], v[7]);
}

// Units ua's and ub's dots with staged unit j's x, each x vec4 read once.
fn unit_dot2(ua: u32, ub: u32, j: u32) -> vec2<f32> {
    let a = unit_load(ua);
    let b = unit_load(ub);
    let v = x8(j);
    return vec2<f32>(
        dot(a[0], v[0]) + dot(a[1], v[1]) + dot(a[2], v[2]) + dot(a[3], v[3])
            + dot(a[4], v[4]) + dot(a[5], v[5]) + dot(a[6], v[6]) + dot(a[7], v[7]),
        dot(b[0], v[0]) + dot(b[1], v[1]) + dot(b[2], v[2]) + dot(b[3], v[3])
            + dot(b[4], v[4]) + dot(b[5], v[5]) + dot(b[6], v[6]) + dot(b[7], v[7]));
}
