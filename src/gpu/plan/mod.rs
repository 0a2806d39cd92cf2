//! The decode plan: every buffer, bind group, pipeline and workgroup count
//! of one token's forward pass, built once at load. Running a token is then:
//! write the step uniform and the embedding row, record `dispatches` into
//! one compute pass, submit, read back the top-k candidates (a few bytes).
//!
//! Per MoE block (14 dispatches, 10 barriers): q_a ∥ kv_a (attn_norm fused
//! into both), q_b (q_a_norm fused) ∥ kv_append, k_b absorb, attention, v_b
//! (merging the attention splits), attn_output (+ residual), router logits
//! (ffn_norm fused) ∥ shared gate+up (ffn_norm fused), router selection
//! (writes the normed h too), experts gate+up ∥ shared down, experts down
//! (+ weighted combine + shared output + residual). `a ∥ b`: b follows a
//! with no barrier between them, so the GPU overlaps them. The output head
//! adds rms_norm, the head matvec and two top-k passes.

mod builder;
pub mod prefill;

use super::context::Gpu;
use super::kernels::{Kernel, Pipelines};
use super::ops::{self, Dispatch, MatvecMode};
use super::resident::{FfnWeights, QWeights, ResidentWeights};
use crate::error::{Error, Result};
use crate::model::Model;
use builder::{Builder, Mv};

/// Most candidates the top-k passes can return per token.
pub const MAX_CANDIDATES: usize = 64;

/// The plan's buffers that the engine reads or writes per token.
pub struct Io {
    /// The token to run (one u32); the plan gathers its embedding.
    pub token: wgpu::Buffer,
    pub x: wgpu::Buffer,
    pub step: wgpu::Buffer,
    pub logits: wgpu::Buffer,
    pub cand_v: wgpu::Buffer,
    pub cand_i: wgpu::Buffer,
    pub topk_params: [wgpu::Buffer; 2],
    pub topk_wg: u32,
    /// Intermediates a block leaves behind, under the reference trace's
    /// names (`reference::Trace`), with their lengths: read after a block's
    /// attention half (`After::Attn`) or feed-forward half (`After::Ffn`).
    pub traced: Vec<(&'static str, After, wgpu::Buffer, usize)>,
}

/// Which half of a block has run when a traced buffer is read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum After {
    Attn,
    Ffn,
    /// Only in MoE blocks.
    MoeFfn,
}

/// Where one block's dispatches sit in `Plan::dispatches`.
#[derive(Clone, Debug)]
pub struct BlockRange {
    pub layer: usize,
    pub moe: bool,
    pub attn: std::ops::Range<usize>,
    pub ffn: std::ops::Range<usize>,
}

pub struct Plan {
    /// A token's dispatches once the context is longer than
    /// `ops::SHORT_ATTENTION_MAX` (`at` picks).
    pub dispatches: Vec<Dispatch>,
    /// The same with the short-context attention (attention_head.wgsl) in
    /// each attention slot: the same buffers, so the same barriers.
    pub short: Vec<Dispatch>,
    pub blocks: Vec<BlockRange>,
    /// Where the output head (result norm, head matvec, top-k) starts in
    /// `dispatches`: prefill runs it after its own layer stack.
    pub head_start: usize,
    pub io: Io,
}

impl Plan {
    /// The dispatches of a token that attends over `n_pos` positions.
    pub fn at(&self, n_pos: usize) -> &[Dispatch] {
        if n_pos <= ops::SHORT_ATTENTION_MAX {
            &self.short
        } else {
            &self.dispatches
        }
    }
}

/// Check that the kernels handle `model`'s shapes and that an `n_ctx`-token
/// cache fits in one binding of at most `limit` bytes.
pub fn check(model: &Model, n_ctx: usize, limit: u64) -> Result<()> {
    let c = &model.config;
    if c.n_lora_kv > ops::MAX_LATENT
        || c.n_embd_head_qk_rope > ops::MAX_ROPE
        || c.n_lora_kv % 64 != 0
        || c.kv_row() % 8 != 0
    {
        return Err(Error::Unsupported(format!(
            "latent width {} / rope width {}: the attention kernels handle up to {} / {}",
            c.n_lora_kv,
            c.n_embd_head_qk_rope,
            ops::MAX_LATENT,
            ops::MAX_ROPE
        )));
    }
    let n_expert = c.moe_dims().0;
    if n_expert > ops::ROUTER_MAX_EXPERT {
        return Err(Error::Unsupported(format!(
            "{} experts; the router kernel handles up to {}",
            n_expert,
            ops::ROUTER_MAX_EXPERT
        )));
    }
    let cache_bytes = cache_bytes(model, n_ctx)?;
    if cache_bytes > limit {
        return Err(Error::InvalidArgument(format!(
            "a {n_ctx}-token KV cache needs {} MiB per layer; this adapter binds at most {} MiB: use a smaller --ctx",
            cache_bytes >> 20,
            limit >> 20
        )));
    }
    Ok(())
}

/// Bytes of one layer's latent cache (f16 rows of `kv_row` values); the
/// context length comes from the user, so the product is checked.
fn cache_bytes(model: &Model, n_ctx: usize) -> Result<u64> {
    (n_ctx as u64)
        .checked_mul(2 * model.config.kv_row() as u64)
        .ok_or_else(|| {
            Error::InvalidArgument(format!(
                "a {n_ctx}-token KV cache is larger than any GPU: use a smaller --ctx"
            ))
        })
}

/// One latent KV cache per layer, owned by a session and bound by its plans.
pub fn kv_caches(gpu: &Gpu, model: &Model, n_ctx: usize) -> Result<Vec<wgpu::Buffer>> {
    let bytes = cache_bytes(model, n_ctx)?;
    (0..model.config.n_layer)
        .map(|il| gpu.scratch(&format!("kv_cache-{il}"), bytes))
        .collect()
}

/// The decode plan of `model` over the resident weights `w`, appending to
/// and attending over `caches` (`kv_caches`).
pub fn build(
    gpu: &Gpu,
    pipes: &Pipelines,
    model: &Model,
    w: &ResidentWeights,
    caches: &[wgpu::Buffer],
) -> Result<Plan> {
    let c = &model.config;
    let n_qk = c.n_embd_head_qk();
    let scratch = |label: &str, dims: &[usize]| gpu.scratch_f32(label, dims);
    let n_split = ops::MAX_SPLITS;
    let (n_expert, n_used, n_ff_exp, n_ff_sh) = c.moe_dims();

    let x = scratch("x", &[c.n_embd])?;
    let qa = scratch("q_a", &[c.n_lora_q.max(1)])?;
    let q = scratch("q", &[c.n_head, n_qk])?;
    let q_abs = scratch("q_abs", &[c.n_head, c.n_lora_kv])?;
    let o_part = scratch("o_part", &[c.n_head, n_split as usize, c.n_lora_kv])?;
    let ml = scratch("ml", &[c.n_head, n_split as usize, 2])?;
    let v_heads = scratch("v_heads", &[c.n_head, c.n_embd_head_v])?;
    let h2 = scratch("ffn_h", &[c.n_embd])?;
    let sel = scratch("sel", &[n_used.max(1)])?;
    let moe_logits = scratch("ffn_moe_logits", &[n_expert.max(1)])?;
    let sel_w = scratch("sel_w", &[n_used.max(1)])?;
    let act = scratch("act", &[c.n_ff.max(n_used * n_ff_exp).max(n_ff_sh)])?;
    let xn = scratch("result_norm", &[c.n_embd])?;
    let logits = scratch("logits", &[c.n_vocab])?;
    let step = gpu.storage("step", bytemuck::bytes_of(&ops::Step::new(0, &[])))?;
    let zeros = scratch("zero_bias", &[n_expert.max(4)])?;
    let zero_x = scratch("zero_x", &[c.n_embd])?;

    let mut b = Builder {
        gpu,
        pipes,
        out: Vec::new(),
        eps: c.rms_eps,
        dummy: scratch("unused", &[4])?,
        zero_id: scratch("expert_0", &[4])?,
    };
    let kv_params = b.uniform("kv_append", &ops::KvAppendParams::new(c));
    let attn_params = b.uniform("attention", &ops::AttentionParams::new(c, n_split));
    let head_params = b.uniform("attention_head", &ops::AttentionHeadParams::new(c, n_split));
    let mut short_attn = Vec::new();
    let router_params = b.uniform("router", &ops::RouterParams::new(c));
    let n_head = c.n_head as u32;
    let token = scratch("token", &[1])?;
    b.out
        .extend(ops::embed(gpu, pipes, &w.token_embd, &token, &x)?);
    let mut blocks = Vec::new();
    for (il, lw) in w.layers.iter().enumerate() {
        let attn_start = b.out.len();
        // Buffers written by a dispatch that runs beside its predecessor
        // (no barrier between them) are this layer's own: a buffer's first
        // use in the token's encoder needs no barrier, any later change of
        // use does (docs/perf-journal.md, barriers).
        let ckv = scratch(&format!("kv_a-{il}"), &[c.kv_row()])?;
        // --- attention ---
        let normed = |x| Mv {
            norm: Some(&lw.attn_norm),
            ..Mv::plain(x, x)
        };
        // q_a (or q) and kv_a side by side; q_b and kv_append side by side
        // (q_b binds kv_a's output ahead for kv_append).
        let (first, first_out) = match &lw.q {
            QWeights::Lora { q_a, .. } => (q_a, &qa),
            QWeights::Direct(wq) => (wq, &q),
        };
        b.matvec(
            first,
            Mv {
                y: first_out,
                ..normed(&x)
            },
        )?;
        b.matvec(
            &lw.kv_a_mqa,
            Mv {
                y: &ckv,
                ..normed(&x)
            },
        )?;
        if let QWeights::Lora { q_a_norm, q_b, .. } = &lw.q {
            b.matvec(
                q_b,
                Mv {
                    norm: Some(q_a_norm),
                    ahead: Some(&ckv),
                    ..Mv::plain(&qa, &q)
                },
            )?;
        }
        let cache = &caches[il];
        b.push(
            format!("blk.{il}.kv_append"),
            Kernel::KvAppend,
            &[&kv_params, &step, &ckv, &lw.kv_a_norm, cache],
            [1, 1, 1],
        )?;
        b.matvec(
            &lw.k_b,
            Mv {
                slots: n_head,
                x_stride: (n_qk / 4) as u32,
                y_stride: c.n_lora_kv as u32,
                ..Mv::plain(&q, &q_abs)
            },
        )?;
        let attn = [&attn_params, &step, &q_abs, &q, cache, &o_part, &ml];
        let grid = [n_split, ops::attention_head_blocks(c.n_head), 1];
        short_attn.push((
            b.out.len(),
            Dispatch::new(
                gpu,
                pipes,
                Kernel::AttentionHead,
                &[],
                &[&head_params, &step, &q_abs, &q, cache, &o_part, &ml],
                [n_split, n_head, 1],
            )?
            .named(format!("blk.{il}.attention")),
        ));
        b.out.push(
            ops::attention(gpu, pipes, c.n_lora_kv, &attn, grid)?
                .named(format!("blk.{il}.attention")),
        );
        // v_b merges the attention splits of its head as it reads them.
        b.matvec(
            &lw.v_b,
            Mv {
                slots: n_head,
                combine: Some((&ml, n_split)),
                y_stride: c.n_embd_head_v as u32,
                ..Mv::plain(&o_part, &v_heads)
            },
        )?;
        b.matvec(
            &lw.attn_output,
            Mv {
                accum: true,
                ..Mv::plain(&v_heads, &x)
            },
        )?;

        // --- feed-forward ---
        let ffn_start = b.out.len();
        let gate_up = |x, norm, sel, slots, y_stride, y| Mv {
            mode: MatvecMode::GateUp,
            norm,
            sel,
            slots,
            y_stride,
            ..Mv::plain(x, y)
        };
        let down = |accum| Mv {
            accum,
            ..Mv::plain(&act, &x)
        };
        match &lw.ffn {
            FfnWeights::Dense(d) => {
                b.matvec(
                    &d.gate_up,
                    gate_up(&x, Some(&lw.ffn_norm), None, 1, 0, &act),
                )?;
                b.matvec(&d.down, down(true))?;
            }
            FfnWeights::Moe {
                gate_inp,
                exp_probs_b,
                gate_up_exps,
                down_exps,
                shared,
            } => {
                // Three pairs run side by side: router logits and the shared
                // gate+up (both norm x themselves), the routed gate+up and
                // the shared down (into its own buffer), then the routed
                // down adds the shared output with the residual.
                let sh_act = scratch(&format!("ffn_shexp_act-{il}"), &[n_ff_sh.max(1)])?;
                let sh_out = scratch(&format!("ffn_shexp_out-{il}"), &[c.n_embd])?;
                b.matvec(
                    gate_inp,
                    Mv {
                        norm: Some(&lw.ffn_norm),
                        ..Mv::plain(&x, &moe_logits)
                    },
                )?;
                if let Some(sh) = shared {
                    b.matvec(
                        &sh.gate_up,
                        gate_up(&x, Some(&lw.ffn_norm), None, 1, 0, &sh_act),
                    )?;
                }
                b.push(
                    format!("blk.{il}.router"),
                    Kernel::Router,
                    &[
                        &router_params,
                        &x,
                        &lw.ffn_norm,
                        &moe_logits,
                        exp_probs_b.as_ref().unwrap_or(&zeros),
                        &h2,
                        &sel,
                        &sel_w,
                    ],
                    [1, 1, 1],
                )?;
                let n_used = c.n_expert_used as u32;
                let routed_gate_up = gate_up(
                    &h2,
                    None,
                    Some((&sel, &sel_w)),
                    n_used,
                    c.n_ff_exp as u32,
                    &act,
                );
                match shared {
                    Some(sh) => {
                        b.matvec(
                            gate_up_exps,
                            Mv {
                                ahead: Some(&sh_act),
                                ..routed_gate_up
                            },
                        )?;
                        b.matvec(&sh.down, Mv::plain(&sh_act, &sh_out))?;
                    }
                    None => b.matvec(gate_up_exps, routed_gate_up)?,
                }
                b.matvec(
                    down_exps,
                    Mv {
                        mode: MatvecMode::WeightedSum,
                        sel: Some((&sel, &sel_w)),
                        slots: n_used,
                        x_stride: (c.n_ff_exp / 4) as u32,
                        add: Some(if shared.is_some() { &sh_out } else { &zero_x }),
                        ..down(true)
                    },
                )?;
            }
        }
        blocks.push(BlockRange {
            layer: il,
            moe: matches!(lw.ffn, FfnWeights::Moe { .. }),
            attn: attn_start..ffn_start,
            ffn: ffn_start..b.out.len(),
        });
    }

    // --- output head and top-k candidates ---
    let head_start = b.out.len();
    let norm_params = b.uniform(
        "result_norm",
        &ops::RmsNormParams {
            n: c.n_embd as u32,
            eps: c.rms_eps,
            n_rows: 1,
            _pad: 0,
        },
    );
    b.push(
        "result_norm".into(),
        Kernel::RmsNorm,
        &[&norm_params, &x, &w.output_norm, &xn],
        [1, 1, 1],
    )?;
    b.matvec(&w.output, Mv::plain(&xn, &logits))?;
    let topk_wg = (c.n_vocab / ops::TOPK_SLICE).clamp(1, ops::TOPK_MAX_WG) as u32;
    let cand1_v = scratch("cand1_v", &[topk_wg as usize, MAX_CANDIDATES])?;
    let cand1_i = scratch("cand1_i", &[topk_wg as usize, MAX_CANDIDATES])?;
    let cand_v = scratch("cand_v", &[MAX_CANDIDATES])?;
    let cand_i = scratch("cand_i", &[MAX_CANDIDATES])?;
    let topk_params = [
        b.uniform("topk1", &topk_params(c.n_vocab as u32, topk_wg, 1, true)),
        b.uniform("topk2", &topk_params(c.n_vocab as u32, topk_wg, 1, false)),
    ];
    let d1 = Dispatch::new(
        gpu,
        pipes,
        Kernel::TopK,
        &[("FIRST", 1.0)],
        &[&topk_params[0], &logits, &b.dummy, &cand1_v, &cand1_i],
        [topk_wg, 1, 1],
    )?
    .named("topk1");
    let d2 = Dispatch::new(
        gpu,
        pipes,
        Kernel::TopK,
        &[("FIRST", 0.0)],
        &[&topk_params[1], &cand1_v, &cand1_i, &cand_v, &cand_i],
        [1, 1, 1],
    )?
    .named("topk2");
    b.out.extend([d1, d2]);
    let mut short = b.out.clone();
    for (i, d) in short_attn {
        short[i] = d;
    }
    Ok(Plan {
        dispatches: b.out,
        short,
        blocks,
        head_start,
        io: Io {
            traced: vec![
                ("q", After::Attn, q.clone(), c.n_head * n_qk),
                (
                    "q_nope_absorbed",
                    After::Attn,
                    q_abs.clone(),
                    c.n_head * c.n_lora_kv,
                ),
                (
                    "kqv_out",
                    After::Attn,
                    v_heads.clone(),
                    c.n_head * c.n_embd_head_v,
                ),
                ("ffn_inp", After::Attn, x.clone(), c.n_embd),
                (
                    "ffn_moe_logits",
                    After::MoeFfn,
                    moe_logits.clone(),
                    c.n_expert,
                ),
                ("ffn_norm", After::MoeFfn, h2.clone(), c.n_embd),
                ("l_out", After::Ffn, x.clone(), c.n_embd),
            ],
            token,
            x,
            step,
            logits,
            cand_v,
            cand_i,
            topk_params,
            topk_wg,
        },
    })
}

/// Params of top-k pass 1 (`first`) or 2 for `k` candidates out of `n_vocab`.
pub fn topk_params(n_vocab: u32, n_wg: u32, k: u32, first: bool) -> ops::TopKParams {
    if first {
        ops::TopKParams {
            n: n_vocab,
            len: n_vocab.div_ceil(n_wg),
            k,
            _pad: 0,
        }
    } else {
        ops::TopKParams {
            n: n_wg * k,
            len: n_wg * k,
            k,
            _pad: 0,
        }
    }
}
