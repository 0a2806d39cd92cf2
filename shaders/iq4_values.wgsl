// ggml's kvalues_iq4nl codebook for IQ4_NL and IQ4_XS, shared by their
// format files: 16 signed bytes (−127, −104, −83, −65, −49, −35, −22, −10,
// 1, 13, 25, 38, 53, 69, 89, 113) packed four to a word, so a lookup is a
// vector component pick and a sign-extending shift, not an indexed array.

const IQ4_VALUES = vec4<u32>(0xBFAD9881u, 0xF6EADDCFu, 0x26190D01u, 0x71594535u);

// The codebook values of four 4-bit indices.
fn iq4_values(q: vec4<u32>) -> vec4<f32> {
    let t = IQ4_VALUES;
    let w = vec4<u32>(t[q.x >> 2u], t[q.y >> 2u], t[q.z >> 2u], t[q.w >> 2u]);
    let up = vec4<u32>(24u) - (q & vec4<u32>(3u)) * 8u;
    return vec4<f32>(bitcast<vec4<i32>>(w << up) >> vec4<u32>(24u));
}
