// MoE router for one token per workgroup, after the router matvec (matvec_f32 with the
// ffn norm fused) has written the logits; one workgroup: probabilities by
// the gating function, top-k by probability + selection bias (the bias only
// picks; ties go to the lower id), the chosen probabilities renormalised
// (floor 6.1035e-5, as llama.cpp) and scaled. Mirrors reference::route.
// The experts norm x themselves (the decode's gate+up matvec, the
// prefill's ffn_norm rows): the router wrote a normed copy of x that
// nothing read (H100 tg128 +0.45% without it, docs/perf-journal.md
// session 14).
//
// Bindings: 0 params (uniform), 1 logits (array<f32>, n_expert per token,
// in `parts` planes), 2 bias
// (array<f32>, n_expert; zeros when the model has none), 3 sel (array<u32>,
// n_used, out), 4 sel_w (array<f32>, n_used, out).
// Workgroup t handles token t: every binding but the bias is offset by t
// whole rows.
// Dispatch: (tokens, 1, 1). Invocation i owns experts i, i + WG: their
// probabilities and scores in registers, their ranks.

const WG: u32 = 256u;
/// host: gpu::ops::ROUTER_MAX_EXPERT
const MAX_EXPERT: u32 = 512u;
// experts per invocation
const EPT: u32 = MAX_EXPERT / WG;

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

// The logits, then the experts' scores (probability + bias).
var<workgroup> probs: array<f32, MAX_EXPERT>;
// The chosen experts' probabilities, by rank.
var<workgroup> chosen: array<f32, MAX_EXPERT>;

@compute @workgroup_size(WG)
fn main(ids: Ids, @builtin(workgroup_id) wid: vec3<u32>) {
    let s0 = wid.x * p.n_used;
    for (var e = ids.lid; e < p.n_expert; e += WG) {
        var v = logits[wid.x * p.n_expert + e];
        for (var s = 1u; s < p.parts; s++) {
            v += logits[s * p.plane + wid.x * p.n_expert + e];
        }
        probs[e] = v;
    }
    workgroupBarrier();
    // Probabilities, and each invocation's experts' scores in registers
    // (expert lid + j·WG): one global read of the bias per expert.
    var mx = -3.0e38;
    if p.gating == 1u {
        for (var e = 0u; e < p.n_expert; e++) {
            mx = max(mx, probs[e]);
        }
    }
    var pr: array<f32, EPT>;
    var sc: array<f32, EPT>;
    var local_sum = 0.0;
    for (var j = 0u; j < EPT; j++) {
        let e = ids.lid + j * WG;
        if e < p.n_expert {
            if p.gating == 0u {
                pr[j] = 1.0 / (1.0 + exp(-probs[e]));
            } else {
                pr[j] = exp(probs[e] - mx);
            }
            local_sum += pr[j];
        }
    }
    if p.gating == 1u {
        let inv = 1.0 / wg_sum(local_sum, ids);
        for (var j = 0u; j < EPT; j++) {
            pr[j] *= inv;
        }
    }
    // A NaN score ranks as the lowest, so the ranks below stay a
    // permutation.
    for (var j = 0u; j < EPT; j++) {
        let e = ids.lid + j * WG;
        let v = pr[j] + bias[min(e, p.n_expert - 1u)];
        sc[j] = select(-3.0e38, v, e < p.n_expert && v == v);
    }
    // Each expert's rank in (score desc, id asc) order, counted against
    // every score in workgroup memory: three barriers, where n_used rounds
    // of a workgroup argmax took five each (H100: tg128 +0.2%,
    // docs/perf-journal.md session 12).
    workgroupBarrier();
    for (var j = 0u; j < EPT; j++) {
        let e = ids.lid + j * WG;
        if e < p.n_expert {
            probs[e] = sc[j];
        }
    }
    workgroupBarrier();
    for (var j = 0u; j < EPT; j++) {
        let e = ids.lid + j * WG;
        if e < p.n_expert {
            var rank = 0u;
            for (var i = 0u; i < p.n_expert; i++) {
                let o = probs[i];
                rank += select(0u, 1u, o > sc[j] || (o == sc[j] && i < e));
            }
            if rank < p.n_used {
                sel[s0 + rank] = e;
                chosen[rank] = pr[j];
            }
        }
    }
    workgroupBarrier();
    if ids.lid == 0u {
        var total = 0.0;
        for (var k = 0u; k < p.n_used; k++) {
            total += chosen[k];
        }
        var f = p.scale;
        if p.norm_w == 1u {
            f = p.scale / max(total, 6.103515625e-5);
        }
        for (var k = 0u; k < p.n_used; k++) {
            sel_w[s0 + k] = chosen[k] * f;
        }
    }
}
