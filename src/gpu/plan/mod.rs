//! The decode plan: every buffer, bind group, pipeline and workgroup count
//! of one token's forward pass, built once at load. Running a token is then:
//! write the step uniform and the embedding row, record `dispatches` into
//! one compute pass, submit, read back the top-k candidates (a few bytes).
//!
//! Per MoE block (14 dispatches): q_a, kv_a (attn_norm fused into both),
//! q_b (q_a_norm fused), kv_append, k_b absorb, attention, v_b (merging
//! the attention splits),
//! attn_output (+ residual), router logits (matvec, ffn_norm fused), router
//! selection (writes the normed h too),
//! experts gate+up, experts down (+ weighted combine + residual), shared
//! gate+up, shared down (+ residual). The output head adds rms_norm, the
//! head matvec and two top-k passes.

mod builder;

use super::context::Gpu;
use super::kernels::{Kernel, Pipelines};
use super::ops::{self, Dispatch, MatvecMode};
use super::weights::{Matrix, Uploader};
use crate::error::{Error, Result};
use crate::model::{ExpertsGateUp, Ffn, Gating, Model, QProj};
use builder::{Builder, Mv};

/// Most candidates the top-k passes can return per token.
pub const MAX_CANDIDATES: usize = 64;

/// The plan's buffers that the engine reads or writes per token.
pub struct Io {
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
    pub dispatches: Vec<Dispatch>,
    pub blocks: Vec<BlockRange>,
    pub io: Io,
    /// Kept for their buffers' lifetime and for inspection.
    pub matrices: Vec<Matrix>,
}

/// Weight bytes the plan uploads (for the progress bar).
pub fn weight_bytes(model: &Model) -> u64 {
    let embd = model.weights.token_embd.n_bytes;
    model.file.tensors().iter().map(|t| t.n_bytes).sum::<u64>() - embd
}

pub fn build(
    gpu: &Gpu,
    pipes: &Pipelines,
    model: &Model,
    n_ctx: usize,
    limit: u64,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<Plan> {
    let c = &model.config;
    let w = &model.weights;
    let n_qk = c.n_embd_head_qk();
    if c.n_lora_kv > 512
        || c.n_embd_head_qk_rope > 128
        || c.n_lora_kv % 64 != 0
        || c.kv_row() % 8 != 0
    {
        return Err(Error::Unsupported(format!(
            "latent width {} / rope width {}: the attention kernel handles up to 512 / 128",
            c.n_lora_kv, c.n_embd_head_qk_rope
        )));
    }
    if c.n_expert > ops::ROUTER_MAX_EXPERT {
        return Err(Error::Unsupported(format!(
            "{} experts; the router kernel handles up to {}",
            c.n_expert,
            ops::ROUTER_MAX_EXPERT
        )));
    }
    let row_words = c.kv_row() / 2;
    let cache_bytes = (n_ctx * row_words * 4) as u64;
    if cache_bytes > limit {
        return Err(Error::InvalidArgument(format!(
            "a {n_ctx}-token KV cache needs {} MiB per layer; this adapter binds at most {} MiB: use a smaller --ctx",
            cache_bytes >> 20,
            limit >> 20
        )));
    }
    let mut up = Uploader::new(gpu, &model.file, limit, weight_bytes(model), progress);
    let f32s = |n: usize| (4 * n) as u64;
    let scratch = |label: &str, n: usize| gpu.scratch(label, f32s(n));
    let n_split = ops::MAX_SPLITS;

    let x = scratch("x", c.n_embd);
    let qa = scratch("q_a", c.n_lora_q.max(1));
    let q = scratch("q", c.n_head * n_qk);
    let ckv = scratch("kv_a", c.kv_row());
    let q_abs = scratch("q_abs", c.n_head * c.n_lora_kv);
    let o_part = scratch("o_part", c.n_head * n_split as usize * c.n_lora_kv);
    let ml = scratch("ml", c.n_head * n_split as usize * 2);
    let v_heads = scratch("v_heads", c.n_head * c.n_embd_head_v);
    let h2 = scratch("ffn_h", c.n_embd);
    let sel = scratch("sel", c.n_expert_used.max(1));
    let moe_logits = scratch("ffn_moe_logits", c.n_expert.max(1));
    let sel_w = scratch("sel_w", c.n_expert_used.max(1));
    let n_act = (c.n_ff)
        .max(c.n_expert_used * c.n_ff_exp)
        .max(c.n_ff_exp * c.n_expert_shared);
    let act = scratch("act", n_act);
    let xn = scratch("result_norm", c.n_embd);
    let logits = scratch("logits", c.n_vocab);
    let step = gpu.uniform("step", &ops::Step::new(0, &[]));
    let zeros = scratch("zero_bias", c.n_expert.max(4));

    let mut b = Builder {
        gpu,
        pipes,
        out: Vec::new(),
        eps: c.rms_eps,
        dummy: scratch("unused", 4),
        zero_id: scratch("expert_0", 4),
    };
    let mut matrices = Vec::new();
    let kv_params = b.uniform(
        "kv_append",
        &ops::KvAppendParams {
            n_kv: c.n_lora_kv as u32,
            n_rot: c.n_embd_head_qk_rope as u32,
            eps: c.rms_eps,
            _pad: 0,
        },
    );
    let attn_params = b.uniform(
        "attention",
        &ops::AttentionParams {
            n_kv: c.n_lora_kv as u32,
            n_rot: c.n_embd_head_qk_rope as u32,
            n_nope: c.n_embd_head_qk_nope as u32,
            scale: c.kq_scale(),
            split_stride: n_split,
            _pad: [0; 3],
        },
    );
    let router_params = b.uniform(
        "router",
        &ops::RouterParams {
            n_embd: c.n_embd as u32,
            n_expert: c.n_expert as u32,
            n_used: c.n_expert_used as u32,
            gating: match c.gating {
                Gating::Sigmoid => 0,
                Gating::Softmax => 1,
            },
            norm_w: c.expert_weights_norm as u32,
            scale: c.expert_weights_scale,
            eps: c.rms_eps,
            _pad: 0,
        },
    );
    let n_head = c.n_head as u32;
    let mut blocks = Vec::new();
    for (il, lw) in w.layers.iter().enumerate() {
        let attn_start = b.out.len();
        let attn_norm = up.vector(&lw.attn_norm)?;
        // --- attention ---
        let normed = |x| Mv {
            norm: Some(&attn_norm),
            ..Mv::plain(x, x)
        };
        match &lw.q {
            QProj::Lora { q_a, q_a_norm, q_b } => {
                let (m_a, m_b) = (up.matrix(q_a)?, up.matrix(q_b)?);
                let g = up.vector(q_a_norm)?;
                b.matvec(
                    &m_a,
                    Mv {
                        y: &qa,
                        ..normed(&x)
                    },
                )?;
                b.matvec(
                    &m_b,
                    Mv {
                        norm: Some(&g),
                        ..Mv::plain(&qa, &q)
                    },
                )?;
                matrices.extend([m_a, m_b]);
            }
            QProj::Direct { q: wq } => {
                let m = up.matrix(wq)?;
                b.matvec(
                    &m,
                    Mv {
                        y: &q,
                        ..normed(&x)
                    },
                )?;
                matrices.push(m);
            }
        }
        let kv_a = up.matrix(&lw.kv_a_mqa)?;
        b.matvec(
            &kv_a,
            Mv {
                y: &ckv,
                ..normed(&x)
            },
        )?;
        let kv_norm = up.vector(&lw.kv_a_norm)?;
        let cache = gpu.scratch(&format!("kv_cache-{il}"), cache_bytes);
        b.push(
            format!("blk.{il}.kv_append"),
            Kernel::KvAppend,
            &[&kv_params, &step, &ckv, &kv_norm, &cache],
            [1, 1, 1],
        )?;
        let k_b = up.matrix(&lw.k_b)?;
        b.matvec(
            &k_b,
            Mv {
                slots: n_head,
                x_stride: (n_qk / 4) as u32,
                y_stride: c.n_lora_kv as u32,
                ..Mv::plain(&q, &q_abs)
            },
        )?;
        b.push(
            format!("blk.{il}.attention"),
            Kernel::Attention,
            &[&attn_params, &step, &q_abs, &q, &cache, &o_part, &ml],
            [n_split, n_head, 1],
        )?;
        // v_b merges the attention splits of its head as it reads them.
        let v_b = up.matrix(&lw.v_b)?;
        b.matvec(
            &v_b,
            Mv {
                slots: n_head,
                combine: Some((&ml, n_split)),
                y_stride: c.n_embd_head_v as u32,
                ..Mv::plain(&o_part, &v_heads)
            },
        )?;
        let wo = up.matrix(&lw.attn_output)?;
        b.matvec(
            &wo,
            Mv {
                accum: true,
                ..Mv::plain(&v_heads, &x)
            },
        )?;
        matrices.extend([kv_a, k_b, v_b, wo]);

        // --- feed-forward ---
        let ffn_start = b.out.len();
        let ffn_norm = up.vector(&lw.ffn_norm)?;
        let gate_up = |x, norm, sel, slots, y_stride| Mv {
            mode: MatvecMode::GateUp,
            norm,
            sel,
            slots,
            y_stride,
            ..Mv::plain(x, &act)
        };
        match &lw.ffn {
            Ffn::Dense(d) => {
                let gu = up.gate_up(&format!("blk.{il}.ffn_gate_up"), &d.gate, &d.up)?;
                let down = up.matrix(&d.down)?;
                b.matvec(&gu, gate_up(&x, Some(&ffn_norm), None, 1, 0))?;
                b.matvec(
                    &down,
                    Mv {
                        accum: true,
                        ..Mv::plain(&act, &x)
                    },
                )?;
                matrices.extend([gu, down]);
            }
            Ffn::Moe {
                gate_inp,
                exp_probs_b,
                gate_up_exps,
                down_exps,
                shared,
            } => {
                let router = up.matrix(gate_inp)?;
                b.matvec(
                    &router,
                    Mv {
                        norm: Some(&ffn_norm),
                        ..Mv::plain(&x, &moe_logits)
                    },
                )?;
                matrices.push(router);
                let bias = match exp_probs_b {
                    Some(t) => Some(up.vector(t)?),
                    None => None,
                };
                b.push(
                    format!("blk.{il}.router"),
                    Kernel::Router,
                    &[
                        &router_params,
                        &x,
                        &ffn_norm,
                        &moe_logits,
                        bias.as_ref().unwrap_or(&zeros),
                        &h2,
                        &sel,
                        &sel_w,
                    ],
                    [1, 1, 1],
                )?;

                let gu = match gate_up_exps {
                    ExpertsGateUp::Separate { gate, up: u } => {
                        up.gate_up(&format!("blk.{il}.ffn_gate_up_exps"), gate, u)?
                    }
                    ExpertsGateUp::Merged { gate_up } => up.merged_gate_up(gate_up)?,
                };
                let n_used = c.n_expert_used as u32;
                b.matvec(
                    &gu,
                    gate_up(&h2, None, Some((&sel, &sel_w)), n_used, c.n_ff_exp as u32),
                )?;
                let down = up.matrix(down_exps)?;
                b.matvec(
                    &down,
                    Mv {
                        mode: MatvecMode::WeightedSum,
                        accum: true,
                        sel: Some((&sel, &sel_w)),
                        slots: n_used,
                        x_stride: (c.n_ff_exp / 4) as u32,
                        ..Mv::plain(&act, &x)
                    },
                )?;
                matrices.extend([gu, down]);
                if let Some(sh) = shared {
                    // The shared expert reuses `act` after the routed down has read it.
                    let sgu =
                        up.gate_up(&format!("blk.{il}.ffn_gate_up_shexp"), &sh.gate, &sh.up)?;
                    let sdown = up.matrix(&sh.down)?;
                    b.matvec(&sgu, gate_up(&h2, None, None, 1, 0))?;
                    b.matvec(
                        &sdown,
                        Mv {
                            accum: true,
                            ..Mv::plain(&act, &x)
                        },
                    )?;
                    matrices.extend([sgu, sdown]);
                }
            }
        }
        blocks.push(BlockRange {
            layer: il,
            moe: matches!(lw.ffn, Ffn::Moe { .. }),
            attn: attn_start..ffn_start,
            ffn: ffn_start..b.out.len(),
        });
    }

    // --- output head and top-k candidates ---
    let output_norm = up.vector(&w.output_norm)?;
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
        &[&norm_params, &x, &output_norm, &xn],
        [1, 1, 1],
    )?;
    let head = up.matrix(&w.output)?;
    b.matvec(&head, Mv::plain(&xn, &logits))?;
    matrices.push(head);
    let topk_wg = (c.n_vocab / 1024).clamp(1, 128) as u32;
    let cand1_v = scratch("cand1_v", topk_wg as usize * MAX_CANDIDATES);
    let cand1_i = scratch("cand1_i", topk_wg as usize * MAX_CANDIDATES);
    let cand_v = scratch("cand_v", MAX_CANDIDATES);
    let cand_i = scratch("cand_i", MAX_CANDIDATES);
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
    Ok(Plan {
        dispatches: b.out,
        blocks,
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
            x,
            step,
            logits,
            cand_v,
            cand_i,
            topk_params,
            topk_wg,
        },
        matrices,
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
