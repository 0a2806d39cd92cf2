//! The prefill plan's buffers: the chunk's activations, `ubatch` rows
//! each, and the kernels' params, the same for every layer.

use crate::error::{Error, Result};
use crate::gpu::context::Gpu;
use crate::gpu::ops;
use crate::model::Config;

/// Split-K parts of the dense matmuls whose consumers add the parts'
/// planes up (`ops::matmul_k_parts`): q_a (q_a_norm), kv_a (kv_append),
/// the router logits (the router). Their rows are n_embd wide.
#[derive(Clone, Copy)]
pub(super) struct Splits {
    pub(super) q_a: usize,
    pub(super) kv_a: usize,
    pub(super) logits: usize,
    /// Tokens per chunk (ubatch): a plane holds this many rows.
    u: usize,
}

impl Splits {
    pub(super) fn new(c: &Config, coop: bool, u: usize) -> Splits {
        let units = (c.n_embd / 32) as u32;
        let k = |rows: usize| ops::matmul_k_parts(rows as u32, units, coop) as usize;
        Splits {
            q_a: k(c.n_lora_q.max(1)),
            kv_a: k(c.kv_row()),
            logits: k(c.n_expert.max(1)),
            u,
        }
    }

    /// Floats per plane of an output `n` floats a token.
    pub(super) fn plane(&self, n: usize) -> usize {
        self.u * n
    }
}

/// The chunk's activations, `ubatch` rows each, and the step records.
pub(super) struct Acts {
    pub(super) k: Splits,
    pub(super) tokens: wgpu::Buffer,
    pub(super) x: wgpu::Buffer,
    pub(super) xn: wgpu::Buffer,
    /// q_a's planes, then kv_a's from float `kv_off` on. One buffer, so
    /// that q_a_norm's read moves kv_a's planes to the read state too and
    /// kv_append, which writes only its layer's cache (first used there),
    /// runs beside q_b with no barrier.
    pub(super) qkv_a: wgpu::Buffer,
    pub(super) kv_off: usize,
    pub(super) qan: wgpu::Buffer,
    pub(super) q: wgpu::Buffer,
    pub(super) q_abs: wgpu::Buffer,
    pub(super) o: wgpu::Buffer,
    /// The attention's split outputs where a chunk's tokens attend in
    /// several (`ops::prefill_splits`), `split_rows` (token, split) rows
    /// (`ops::prefill_split_rows`), merged into `o`.
    pub(super) o_part: wgpu::Buffer,
    pub(super) ml: wgpu::Buffer,
    pub(super) v_heads: wgpu::Buffer,
    pub(super) h2: wgpu::Buffer,
    /// The output norm's rows (`Prefill::head`).
    pub(super) result_norm: wgpu::Buffer,
    pub(super) moe_logits: wgpu::Buffer,
    pub(super) sel: wgpu::Buffer,
    pub(super) sel_w: wgpu::Buffer,
    pub(super) act: wgpu::Buffer,
    pub(super) act_r: wgpu::Buffer,
    /// The experts' down outputs, a slot of the matmul's tile a routed
    /// tile (moe_group.wgsl's `rows`).
    pub(super) part: wgpu::Buffer,
    pub(super) steps: wgpu::Buffer,
    pub(super) zero_bias: wgpu::Buffer,
}

impl Acts {
    /// `split_rows`: the attention's partial rows (`ops::prefill_split_rows`);
    /// `slot_rows`: the routed tiles' slots (`ops::routed_slot_rows`).
    pub(super) fn new(
        gpu: &Gpu,
        c: &Config,
        u: usize,
        n_used: usize,
        (split_rows, slot_rows): (usize, usize),
        k: Splits,
    ) -> Result<Acts> {
        let s = |label: &str, dims: &[usize]| gpu.scratch_f32(label, dims);
        let (n_expert, _, n_ff_exp, n_ff_sh) = c.moe_dims();
        let n_qk = c.n_embd_head_qk();
        let kv_off = k.q_a.checked_mul(k.plane(c.n_lora_q.max(1)));
        let qkv = kv_off.and_then(|q| q.checked_add(k.kv_a.checked_mul(k.plane(c.kv_row()))?));
        let (Some(kv_off), Some(qkv)) = (kv_off, qkv) else {
            return Err(Error::InvalidArgument(format!(
                "the prefill's q_a and kv_a outputs for {u} tokens overflow"
            )));
        };
        Ok(Acts {
            k,
            tokens: s("pf.tokens", &[u])?,
            x: s("pf.x", &[u, c.n_embd])?,
            xn: s("pf.attn_norm", &[u, c.n_embd])?,
            qkv_a: s("pf.q_a_kv_a", &[qkv])?,
            kv_off,
            qan: s("pf.q_a_norm", &[u, c.n_lora_q.max(1)])?,
            q: s("pf.q", &[u, c.n_head, n_qk])?,
            q_abs: s("pf.q_abs", &[u, c.n_head, c.n_lora_kv])?,
            o: s("pf.attn_out", &[u, c.n_head, c.n_lora_kv])?,
            o_part: s("pf.attn_parts", &[split_rows, c.n_head, c.n_lora_kv])?,
            ml: s("pf.ml", &[split_rows, c.n_head, 2])?,
            v_heads: s("pf.v_heads", &[u, c.n_head, c.n_embd_head_v])?,
            h2: s("pf.ffn_norm", &[u, c.n_embd])?,
            result_norm: s("pf.result_norm", &[u, c.n_embd])?,
            moe_logits: s("pf.moe_logits", &[k.logits, u, n_expert.max(1)])?,
            sel: s("pf.sel", &[u, n_used])?,
            sel_w: s("pf.sel_w", &[u, n_used])?,
            act: s("pf.act", &[u, c.n_ff.max(n_ff_sh).max(1)])?,
            act_r: s("pf.act_exps", &[u, n_used, n_ff_exp.max(1)])?,
            part: s("pf.down_exps", &[slot_rows, c.n_embd])?,
            steps: s("pf.steps", &[u, std::mem::size_of::<ops::Step>() / 4])?,
            zero_bias: s("pf.zero_bias", &[n_expert.max(4)])?,
        })
    }
}

/// The kernels' params, the same for every layer.
pub(super) struct Uniforms {
    pub(super) norm_embd: wgpu::Buffer,
    pub(super) norm_q: wgpu::Buffer,
    pub(super) kv: wgpu::Buffer,
    /// The attention's and its merge's, with the chunk's token count and
    /// splits: written per chunk by `Prefill::write_chunk`.
    pub(super) attn: wgpu::Buffer,
    pub(super) attn_coop: wgpu::Buffer,
    pub(super) attn_merge: wgpu::Buffer,
    pub(super) router: wgpu::Buffer,
    pub(super) sum: wgpu::Buffer,
    pub(super) group: wgpu::Buffer,
}

impl Uniforms {
    /// For chunks of up to `u` tokens, `n_used` expert assignments each.
    /// The grouping's and the attention's params depend on the chunk:
    /// `Prefill::write_chunk` writes them before each chunk is recorded.
    /// kv_a's planes start `kv_off` floats into `Acts::qkv_a`.
    pub(super) fn new(
        gpu: &Gpu,
        c: &Config,
        u: usize,
        n_used: usize,
        k: Splits,
        kv_off: usize,
    ) -> Uniforms {
        let norm = |n: usize, parts: usize| {
            gpu.uniform(
                "pf.rms_norm",
                &ops::RmsNormParams {
                    n: n as u32,
                    eps: c.rms_eps,
                    n_rows: u as u32,
                    parts: parts as u32,
                },
            )
        };
        let plane = |n: usize| k.plane(n) as u32;
        let kv = ops::KvAppendParams {
            off: kv_off as u32,
            parts: k.kv_a as u32,
            plane: plane(c.kv_row()),
            ..ops::KvAppendParams::new(c)
        };
        let router = ops::RouterParams {
            parts: k.logits as u32,
            plane: plane(c.n_expert),
            ..ops::RouterParams::new(c)
        };
        let sum = ops::MoeSumParams {
            n: c.n_embd as u32,
            n_used: n_used as u32,
            _pad: [0; 2],
        };
        Uniforms {
            norm_embd: norm(c.n_embd, 1),
            norm_q: norm(c.n_lora_q.max(1), k.q_a),
            kv: gpu.uniform("pf.kv_append", &kv),
            attn: gpu.uniform("pf.attention", &ops::AttentionParams::new(c, 1)),
            attn_coop: gpu.uniform("pf.attention_coop", &ops::AttentionCoopParams::new(c, 0, 1)),
            attn_merge: gpu.uniform("pf.attention_merge", &ops::AttentionMergeParams::new(c, 1)),
            router: gpu.uniform("pf.router", &router),
            sum: gpu.uniform("pf.moe_sum", &sum),
            group: gpu.uniform(
                "pf.moe_group",
                &<ops::MoeGroupParams as bytemuck::Zeroable>::zeroed(),
            ),
        }
    }
}
