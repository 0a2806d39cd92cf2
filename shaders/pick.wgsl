// The next token picked on the GPU from the top-k candidates, so a sampled
// decode step can be queued before the host has read the previous one back
// (engine::decode, `step_ahead`). It mirrors sample.rs's temperature, top-k,
// min-p and top-p in f32 with a uniform the host drew ahead from the
// sampler's own generator; the host still samples each token itself (in
// f64) and keeps the queued step only if the GPU fed that same token.
//
// Bindings: 0 params (uniform), 1 cand_v (array<f32>, best first), 2 cand_i
// (array<u32>), 3 token (array<u32>, the id the decode plan gathers).
// Dispatch: (1, 1, 1); invocation 0 does it all (at most 64 candidates).

// Invocation 0 works alone (the reduction prelude sizes its scratch by WG).
const WG: u32 = 32u;

struct Params {
    // candidates considered (top-k, at most those the top-k pass returned)
    k: u32,
    inv_t: f32,
    top_p: f32,
    min_p: f32,
    // in [0, 1)
    u: f32,
    _pad0: u32,
    _pad1: u32,
    _pad2: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> cand_v: array<f32>;
@group(0) @binding(2) var<storage, read> cand_i: array<u32>;
@group(0) @binding(3) var<storage, read_write> token: array<u32>;

// Candidate i's weight before normalising (the best one's is 1).
fn weight(i: u32) -> f32 {
    return exp((cand_v[i] - cand_v[0]) * p.inv_t);
}

@compute @workgroup_size(WG)
fn main(ids: Ids) {
    if ids.lid != 0u {
        return;
    }
    // min-p against the best candidate: the leading run of weights >= min_p.
    var keep_min = 1u;
    while keep_min < p.k && weight(keep_min) >= p.min_p {
        keep_min++;
    }
    var sum = 0.0;
    for (var i = 0u; i < keep_min; i++) {
        sum += weight(i);
    }
    // top-p: the fewest candidates whose normalised mass reaches top_p.
    var keep = keep_min;
    var cum = 0.0;
    for (var i = 0u; i < keep_min; i++) {
        cum += weight(i) / sum;
        if cum >= p.top_p {
            keep = i + 1u;
            break;
        }
    }
    var mass = 0.0;
    for (var i = 0u; i < keep; i++) {
        mass += weight(i) / sum;
    }
    var u = p.u * mass;
    var pick = keep - 1u;
    for (var i = 0u; i < keep; i++) {
        let v = weight(i) / sum;
        if u < v {
            pick = i;
            break;
        }
        u -= v;
    }
    token[0] = cand_i[pick];
}
