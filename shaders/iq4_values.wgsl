// ggml's kvalues_iq4nl codebook for IQ4_NL and IQ4_XS, shared by their
// format files: 16 signed bytes (−127, −104, −83, −65, −49, −35, −22, −10,
// 1, 13, 25, 38, 53, 69, 89, 113) packed four to a word, so a lookup is two
// selects between the words and a sign-extending shift. (Indexing the
// vector with the runtime index instead, `t[q >> 2]`, ran the IQ4_XS
// matvecs at 40-180 GB/s on the H100, ~5x slower than the other formats:
// docs/perf-journal.md, session 9.)

const IQ4_VALUES = vec4<u32>(0xBFAD9881u, 0xF6EADDCFu, 0x26190D01u, 0x71594535u);

// The codebook values of four 4-bit indices.
fn iq4_values(q: vec4<u32>) -> vec4<f32> {
    let t = IQ4_VALUES;
    let odd = (q & vec4<u32>(4u)) != vec4<u32>(0u);
    let w = select(select(vec4<u32>(t.x), vec4<u32>(t.y), odd),
        select(vec4<u32>(t.z), vec4<u32>(t.w), odd), q >= vec4<u32>(8u));
    let up = vec4<u32>(24u) - (q & vec4<u32>(3u)) * 8u;
    return vec4<f32>(bitcast<vec4<i32>>(w << up) >> vec4<u32>(24u));
}
