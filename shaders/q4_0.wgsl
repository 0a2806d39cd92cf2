// Q4_0 weights for matvec.wgsl and matmul.wgsl, repacked at load (src/gpu/repack.rs): one
// unit is one GGUF block (f16 scale d, 32 four-bit weights q, w = d·(q − 8)).
// Bindings: 6 scales (array<u32>, two f16 per word, low half = even block),
// 7 nibbles (array<vec4<u32>>, the block's 16 bytes unchanged).

@group(0) @binding(6) var<storage, read> scales: array<u32>;
@group(0) @binding(7) var<storage, read> nibbles: array<vec4<u32>>;

// A unit's words as loaded: nibbles and scale (unit_raw), dequantized by
// unit_of; unit_load is both (matmul_coop.wgsl holds the raw form).
struct Raw {
    q: vec4<u32>,
    d: f32,
}

fn unit_raw(u: u32) -> Raw {
    return Raw(nibbles[u], unpack2x16float(scales[u >> 1u])[u & 1u]);
}

// Weights 4i..4i+4 are the low nibbles of word i, 16+4i.. its high nibbles;
// d·(q − 8) with q − 8 made exactly by bytes4f_less (no int → float
// converts). Written out (no array filled in a loop) so the unit stays in
// registers.
fn unit_of(r: Raw) -> Unit {
    let d = r.d;
    let lo = vec4<u32>(0x0F0F0F0Fu) & r.q;
    let hi = vec4<u32>(0x0F0F0F0Fu) & (r.q >> vec4<u32>(4u));
    return Unit(d * bytes4f_less(lo.x, 8.0), d * bytes4f_less(lo.y, 8.0),
        d * bytes4f_less(lo.z, 8.0), d * bytes4f_less(lo.w, 8.0),
        d * bytes4f_less(hi.x, 8.0), d * bytes4f_less(hi.y, 8.0),
        d * bytes4f_less(hi.z, 8.0), d * bytes4f_less(hi.w, 8.0));
}

fn unit_load(u: u32) -> Unit {
    return unit_of(unit_raw(u));
}
