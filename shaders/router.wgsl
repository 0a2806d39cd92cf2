// The prefill's MoE router, one token per workgroup, after the router
// logits matmul has written the logits: choose.wgsl's choice. The decode
// computes its logits and choice in one dispatch (route.wgsl).
// The experts norm x themselves (the prefill's ffn_norm rows): the router
// wrote a normed copy of x that nothing read (H100 tg128 +0.45% without
// it, docs/perf-journal.md session 14).
//
// Bindings: 0 params (uniform), 1 logits (array<f32>, n_expert per token,
// in `parts` planes), 2 bias (array<f32>, n_expert; zeros when the model
// has none), 3 sel (array<u32>, n_used, out), 4 sel_w (array<f32>, n_used,
// out). Workgroup t handles token t: every binding but the bias is offset
// by t whole rows.
// Dispatch: (tokens, 1, 1).

const WG: u32 = 256u;

struct Params {
    n_expert: u32,
    n_used: u32,
    // 0 sigmoid, 1 softmax
    gating: u32,
    // 1: renormalise the chosen weights
    norm_w: u32,
    scale: f32,
    // logits in `parts` planes `plane` floats apart (a split-K matmul's
    // partial sums, ops::matmul_k_parts), added up here
    parts: u32,
    plane: u32,
    _pad0: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> logits: array<f32>;
@group(0) @binding(2) var<storage, read> bias: array<f32>;
@group(0) @binding(3) var<storage, read_write> sel: array<u32>;
@group(0) @binding(4) var<storage, read_write> sel_w: array<f32>;

@compute @workgroup_size(WG)
fn main(ids: Ids, @builtin(workgroup_id) wid: vec3<u32>) {
    var logit: array<f32, EPT>;
    var b: array<f32, EPT>;
    for (var j = 0u; j < EPT; j++) {
        let e = min(ids.lid + j * WG, p.n_expert - 1u);
        var v = logits[wid.x * p.n_expert + e];
        for (var s = 1u; s < p.parts; s++) {
            v += logits[s * p.plane + wid.x * p.n_expert + e];
        }
        logit[j] = v;
        b[j] = bias[e];
    }
    choose(Choice(p.n_expert, p.n_used, p.gating, p.norm_w, p.scale), wid.x * p.n_used, logit, b, ids);
}
