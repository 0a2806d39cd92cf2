// The MoE router's choice for one token, by one workgroup: shared by
// router.wgsl (the prefill's, after the logits matmul) and route.wgsl (the
// decode's, in its last workgroup). Probabilities by the gating function,
// top-k by probability + selection bias (the bias only picks; ties go to
// the lower id), the chosen probabilities renormalised (floor 6.1035e-5,
// as llama.cpp) and scaled. Mirrors reference::route.
// The kernel declares `WG`, `sel` (array<u32>, out) and `sel_w`
// (array<f32>, out). Invocation i owns experts i, i + WG, …: the caller
// hands it their logits and biases in registers, and it ranks them.
// The decode waits on all of it (route.wgsl's tail), so it is written for
// latency: no global load, two barriers (softmax's reductions aside), the
// ranks counted four scores a workgroup load.

/// host: gpu::ops::ROUTER_MAX_EXPERT
const MAX_EXPERT: u32 = 512u;
// experts per invocation
const EPT: u32 = MAX_EXPERT / WG;

// Every expert's score (probability + bias), four a vec4; slots past
// n_expert hold the lowest score.
var<workgroup> scores: array<vec4<f32>, MAX_EXPERT / 4u>;
// The chosen experts' probabilities, by rank.
var<workgroup> chosen: array<f32, MAX_EXPERT>;

struct Choice {
    n_expert: u32,
    n_used: u32,
    // 0 sigmoid, 1 softmax
    gating: u32,
    // 1: renormalise the chosen weights
    norm_w: u32,
    scale: f32,
}

// Writes the choice to sel[s0 ..] and sel_w[s0 ..]. logit[j] and bias[j]
// belong to expert lid + j·WG (unread past n_expert). Call from uniform
// control flow.
fn choose(c: Choice, s0: u32, logit: array<f32, EPT>, bias: array<f32, EPT>, ids: Ids) {
    var mx = -3.0e38;
    if c.gating == 1u {
        for (var j = 0u; j < EPT; j++) {
            if ids.lid + j * WG < c.n_expert {
                mx = max(mx, logit[j]);
            }
        }
        mx = wg_max(mx, ids);
    }
    var pr: array<f32, EPT>;
    var local_sum = 0.0;
    for (var j = 0u; j < EPT; j++) {
        if ids.lid + j * WG < c.n_expert {
            if c.gating == 0u {
                pr[j] = 1.0 / (1.0 + exp(-logit[j]));
            } else {
                pr[j] = exp(logit[j] - mx);
            }
            local_sum += pr[j];
        }
    }
    if c.gating == 1u {
        let inv = 1.0 / wg_sum(local_sum, ids);
        for (var j = 0u; j < EPT; j++) {
            pr[j] *= inv;
        }
    }
    // A NaN score ranks as the lowest, so the ranks below stay a
    // permutation.
    let n4 = (c.n_expert + 3u) / 4u;
    var sc: array<f32, EPT>;
    for (var j = 0u; j < EPT; j++) {
        let e = ids.lid + j * WG;
        let v = pr[j] + bias[j];
        sc[j] = select(-3.0e38, v, e < c.n_expert && v == v);
        if e < 4u * n4 {
            scores[e / 4u][e % 4u] = sc[j];
        }
    }
    workgroupBarrier();
    // Each expert's rank in (score desc, id asc) order.
    for (var j = 0u; j < EPT; j++) {
        let e = ids.lid + j * WG;
        if e < c.n_expert {
            let s = vec4<f32>(sc[j]);
            var n = vec4<u32>(0u);
            for (var q = 0u; q < n4; q++) {
                let o = scores[q];
                let i = vec4<u32>(4u * q) + vec4<u32>(0u, 1u, 2u, 3u);
                n += select(vec4<u32>(0u), vec4<u32>(1u), o > s | (o == s & i < vec4<u32>(e)));
            }
            let rank = n.x + n.y + n.z + n.w;
            if rank < c.n_used {
                sel[s0 + rank] = e;
                chosen[rank] = pr[j];
            }
        }
    }
    workgroupBarrier();
    if ids.lid < c.n_used {
        var total = 0.0;
        for (var k = 0u; k < c.n_used; k++) {
            total += chosen[k];
        }
        var f = c.scale;
        if c.norm_w == 1u {
            f = c.scale / max(total, 6.103515625e-5);
        }
        sel_w[s0 + ids.lid] = chosen[ids.lid] * f;
    }
}
