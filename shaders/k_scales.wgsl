// The 6-bit scale and min of a K-quant unit (Q4_K, Q5_K), shared by their
// format files: ggml's get_scale_min_k4 over a super-block's first 16 bytes.
// `head` is those bytes as four words: x d|dmin (f16 pair), y..w the 12
// scale bytes s[0..12]. Unit j < 4: sc = s[j] & 63, m = s[j+4] & 63; unit
// j >= 4 (k = j − 4): sc = (s[j+4] & 15) | (s[k] >> 6) << 4,
// m = (s[j+4] >> 4) | (s[j] >> 6) << 4. Returns (d·sc, dmin·m).

fn scale_min_k4(head: vec4<u32>, j: u32) -> vec2<f32> {
    let sh = (j & 3u) * 8u;
    let a = (head.y >> sh) & 0xFFu;
    let b = (head.z >> sh) & 0xFFu;
    let c = (head.w >> sh) & 0xFFu;
    let lo = vec2<u32>(a, b) & vec2<u32>(63u);
    let hi = vec2<u32>(c & 0xFu, c >> 4u) | ((vec2<u32>(a, b) >> vec2<u32>(6u)) << vec2<u32>(4u));
    return unpack2x16float(head.x) * vec2<f32>(select(hi, lo, j < 4u));
}
