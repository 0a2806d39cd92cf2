// Merges the prefill attention's position splits of each (token, head)
// row into one normalised row, as attn_v_b's matvec merges the decode's:
// o[r] = Σ_s w_s · part[r·S + s] / Σ_s w_s, w_s = l_s · e^(x_s − max x),
// (x_s, l_s) = ml[r·S + s] (l = 0 marks an empty split; each split's part
// is already normalised, so l is 0 or 1).
//
// Bindings: 0 params (uniform), 1 part (array<vec4<f32>>, n_kv / 4 per
// slot), 2 ml (array<vec2<f32>>, one per slot), 3 o (array<vec4<f32>>,
// n_kv / 4 per row); slot = r · S + s, S = split_stride.
// Dispatch: (n_head, tokens, 1); workgroup (h, z) owns row z · n_head + h,
// invocation i its vec4s i, i + WG, ….

const WG: u32 = 64u;
// Finite "minus infinity", as attention_coop.wgsl marks empty splits.
const NEG: f32 = -3.0e38;

struct Params {
    n_kv: u32,
    n_head: u32,
    split_stride: u32,
    _pad: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> part: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> ml: array<vec2<f32>>;
@group(0) @binding(3) var<storage, read_write> o: array<vec4<f32>>;

@compute @workgroup_size(WG)
fn main(@builtin(local_invocation_index) lid: u32, @builtin(workgroup_id) wid: vec3<u32>) {
    let r = wid.y * p.n_head + wid.x;
    let kv4 = p.n_kv / 4u;
    var top = NEG;
    for (var s = 0u; s < p.split_stride; s++) {
        let m = ml[r * p.split_stride + s];
        if m.y > 0.0 {
            top = max(top, m.x);
        }
    }
    var total = 0.0;
    for (var s = 0u; s < p.split_stride; s++) {
        let m = ml[r * p.split_stride + s];
        total += m.y * exp(m.x - top);
    }
    for (var v = lid; v < kv4; v += WG) {
        var acc = vec4<f32>(0.0);
        for (var s = 0u; s < p.split_stride; s++) {
            let m = ml[r * p.split_stride + s];
            if m.y > 0.0 {
                acc += (m.y * exp(m.x - top)) * part[(r * p.split_stride + s) * kv4 + v];
            }
        }
        o[r * kv4 + v] = acc / total;
    }
}
