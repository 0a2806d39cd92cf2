// The decode's MoE router in one dispatch: the router logits
// (ffn_gate_inp · RMSNorm(x) · g, as matvec.wgsl computes a normed product)
// and, in the workgroup that finishes last, choose.wgsl's choice from them.
// As two dispatches (the logits matvec, then router.wgsl) the choice was a
// barrier level of its own: H100 tg128 +4.0%, @ d4096 +5.8% without it
// (docs/perf-journal.md, session 25). The choice is made once, after every
// logit is written, not in the consumers' prologues: there it cost the
// routed matvecs 18% (session 14). It is on the token's critical path, so
// choose.wgsl is written for latency (the biases are loaded up front).
//
// Bindings: 0 params (uniform), 1 x (array<vec4<f32>>: the residual
// stream), 2 g (array<vec4<f32>>: ffn_norm's weight), 3 logits
// (array<atomic<u32>>, out: n_expert logits as f32 bits, then the count of
// workgroups done, which the last one puts back to 0), 4 sel (array<u32>,
// n_used, out), 5 sel_w (array<f32>, n_used, out), 6 (and 7) the router
// matrix in its format's file, 8 bias (array<f32>, n_expert; zeros when
// the model has none).
// Dispatch: (ceil(rows / ROWS), 1, 1) per part of the router matrix (a
// matrix too large for one binding is split into row ranges, each its own
// dispatch; wgpu puts a barrier between them, as both write `logits`). A
// group of TPR invocations owns one logit; the workgroup that counts itself
// last of all the parts' `groups` owns the choice.
// The logits are written and read through atomics (coherent across
// workgroups where plain loads may hit a stale cache), ordered before the
// count by storageBarrier, a device-scope fence in each of naga's outputs
// (SPIR-V: Device memory scope; MSL: threadgroup_barrier(mem_device);
// HLSL: DeviceMemoryBarrierWithGroupSync), so the last workgroup sees every
// other workgroup's logits. No workgroup waits on another: nothing here
// needs forward progress across workgroups.

/// host: gpu::ops::MATVEC_WG
const WG: u32 = 128u;
/// host: gpu::ops::ROUTE_ROWS
const ROWS: u32 = 2u;
const TPR: u32 = WG / ROWS;
const NORM: bool = true;

// A dequantized weight unit: weights 4i .. 4i + 4 in element i.
alias Unit = array<vec4<f32>, 8>;

struct Params {
    n_expert: u32,
    // 32-weight units per row
    units: u32,
    // this dispatch's rows (logits row0 ..) of the router matrix
    row0: u32,
    rows: u32,
    // workgroups of all the router's dispatches
    groups: u32,
    n_used: u32,
    // 0 sigmoid, 1 softmax
    gating: u32,
    // 1: renormalise the chosen weights
    norm_w: u32,
    scale: f32,
    eps: f32,
    _pad0: u32,
    _pad1: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> x: array<vec4<f32>>;
@group(0) @binding(2) var<storage, read> g: array<vec4<f32>>;
@group(0) @binding(3) var<storage, read_write> logits: array<atomic<u32>>;
@group(0) @binding(4) var<storage, read_write> sel: array<u32>;
@group(0) @binding(5) var<storage, read_write> sel_w: array<f32>;
@group(0) @binding(8) var<storage, read> bias: array<f32>;

// 1 in the workgroup that counted itself last.
var<workgroup> last: u32;

@compute @workgroup_size(WG)
fn main(ids: Ids, @builtin(workgroup_id) wid: vec3<u32>) {
    // The biases now, so that the choice waits on no load but the logits.
    var b: array<f32, EPT>;
    for (var j = 0u; j < EPT; j++) {
        if ids.lid + j * WG < p.n_expert {
            b[j] = bias[ids.lid + j * WG];
        }
    }
    let r = wid.x * ROWS + ids.lid / TPR;
    let t = ids.lid % TPR;
    let live = r < p.rows;
    var a = 0.0;
    for (var c0 = 0u; c0 < p.units; c0 += XCHUNK) {
        let c1 = min(c0 + XCHUNK, p.units);
        stage(0u, c0, c1, ids.lid);
        if live {
            a += row_dots(r * p.units, t, c0, c1);
        }
    }
    a = seg_sum(a, ids, TPR) * norm_scale(ids);
    if t == 0u && live {
        atomicStore(&logits[p.row0 + r], bitcast<u32>(a));
    }
    // This workgroup's logits are out before it counts itself done.
    storageBarrier();
    if ids.lid == 0u {
        last = select(0u, 1u, atomicAdd(&logits[p.n_expert], 1u) == p.groups - 1u);
    }
    if workgroupUniformLoad(&last) == 0u {
        return;
    }
    storageBarrier();
    var logit: array<f32, EPT>;
    for (var j = 0u; j < EPT; j++) {
        if ids.lid + j * WG < p.n_expert {
            logit[j] = bitcast<f32>(atomicLoad(&logits[ids.lid + j * WG]));
        }
    }
    if ids.lid == 0u {
        atomicStore(&logits[p.n_expert], 0u);
    }
    choose(Choice(p.n_expert, p.n_used, p.gating, p.norm_w, p.scale), 0u, logit, b, ids);
}
