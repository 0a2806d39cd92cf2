// How matmul_coop.wgsl stages a Q4_0 unit (q4_0.wgsl's bindings and
// unit_load's arithmetic): a step holds the raw words through its
// products (five registers, not 32 floats) and dequantizes them as it
// stores them.

struct Staged {
    q: vec4<u32>,
    d: f32,
}

fn stage_load(u: u32) -> Staged {
    return Staged(nibbles[u], unpack2x16float(scales[u >> 1u])[u & 1u]);
}

// Weights 4i..4i+4 are the low nibbles of word i, 16+4i.. its high nibbles.
fn stage_store(o: u32, w: Staged) {
    let lo = vec4<u32>(0x0F0F0F0Fu) & w.q;
    let hi = vec4<u32>(0x0F0F0F0Fu) & (w.q >> vec4<u32>(4u));
    put4(o, 0u, w.d * bytes4f_less(lo.x, 8.0));
    put4(o, 1u, w.d * bytes4f_less(lo.y, 8.0));
    put4(o, 2u, w.d * bytes4f_less(lo.z, 8.0));
    put4(o, 3u, w.d * bytes4f_less(lo.w, 8.0));
    put4(o, 4u, w.d * bytes4f_less(hi.x, 8.0));
    put4(o, 5u, w.d * bytes4f_less(hi.y, 8.0));
    put4(o, 6u, w.d * bytes4f_less(hi.z, 8.0));
    put4(o, 7u, w.d * bytes4f_less(hi.w, 8.0));
}
