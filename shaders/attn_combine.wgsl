// Merges the per-split partial results of attention.wgsl for each head:
// out_h = Σ_s e^(m_s − M) · o_s / Σ_s e^(m_s − M) · l_s, M = max_s m_s,
// over the splits that had positions (l_s > 0; the others left o_s unset).
//
// Bindings: 0 params (uniform), 1 step (uniform: n_split), 2 o
// (array<vec2<f32>>, n_head × split_stride × n_kv / 2), 3 ml
// (array<vec2<f32>>, (m, l) per head and split slot), 4 out (array<vec2<f32>>, n_head × n_kv / 2).
// Dispatch: (n_head, 1, 1); invocation i owns latent pair i.

const WG: u32 = 256u;

struct Step {
    pos: u32,
    n_pos: u32,
    n_split: u32,
    _pad: u32,
    rope: array<vec4<f32>, 64>,
}

struct Params {
    n_kv: u32,
    // split slots per head in o and ml
    split_stride: u32,
    _pad0: u32,
    _pad1: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<uniform> step: Step;
@group(0) @binding(2) var<storage, read> o: array<vec2<f32>>;
@group(0) @binding(3) var<storage, read> ml: array<vec2<f32>>;
@group(0) @binding(4) var<storage, read_write> out: array<vec2<f32>>;

@compute @workgroup_size(WG)
fn main(ids: Ids, @builtin(workgroup_id) wid: vec3<u32>) {
    let h = wid.x;
    let kv_words = p.n_kv / 2u;
    if ids.lid >= kv_words {
        return;
    }
    var mx = -3.0e38;
    for (var s = 0u; s < step.n_split; s++) {
        mx = max(mx, ml[h * p.split_stride + s].x);
    }
    var num = vec2<f32>(0.0);
    var den = 0.0;
    for (var s = 0u; s < step.n_split; s++) {
        let slot = h * p.split_stride + s;
        if ml[slot].y > 0.0 {
            let f = exp(ml[slot].x - mx);
            num += f * o[slot * kv_words + ids.lid];
            den += f * ml[slot].y;
        }
    }
    out[h * kv_words + ids.lid] = num / den;
}
