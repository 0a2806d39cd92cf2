//! The decode plan's lowering of the recipe (`model::recipe`) into one
//! token's dispatches: the shared buffers, each block's attention half and
//! feed-forward half, the output head. `plan::build` strings them together
//! and checks each part against its recipe. Before each group of
//! dispatches, `lower` names the recipe steps they compute: the norms are
//! fused into the products that read them, residual adds into the products
//! that feed them.

use super::builder::{Builder, Mv};
use super::lower::{Lowered, Lowers};
use super::{BlockRange, Io, Plan, MAX_CANDIDATES};
use crate::error::Result;
use crate::gpu::context::Gpu;
use crate::gpu::kernels::{Kernel, Pipelines};
use crate::gpu::ops::{
    self, AttentionBindings, AttentionCoopBindings, AttentionHeadBindings, Dispatch,
    KvAppendBindings, MatvecMode, RmsNormBindings, RouteBindings, TopkBindings, TopkOverrides,
};
use crate::gpu::resident::{
    FfnWeights, GateUpDown, LayerWeights, MoeWeights, QWeights, ResidentWeights,
};
use crate::model::recipe::{Name, Name::*, Recipe};
use crate::model::{Config, Model};

/// Buffers every layer writes and reads again, and the layers' uniforms.
/// Buffers written by a dispatch that runs beside its predecessor (no
/// barrier between them) are per layer instead: a buffer's first use in
/// the token's encoder needs no barrier, any later change of use does
/// (docs/perf-journal.md, barriers).
struct Shared {
    token: wgpu::Buffer,
    x: wgpu::Buffer,
    qa: wgpu::Buffer,
    q: wgpu::Buffer,
    q_abs: wgpu::Buffer,
    o_part: wgpu::Buffer,
    ml: wgpu::Buffer,
    v_heads: wgpu::Buffer,
    sel: wgpu::Buffer,
    sel_w: wgpu::Buffer,
    moe_logits: wgpu::Buffer,
    act: wgpu::Buffer,
    step: wgpu::Buffer,
    zero_bias: wgpu::Buffer,
    zero_x: wgpu::Buffer,
    kv_params: wgpu::Buffer,
    attn_params: wgpu::Buffer,
    coop_params: wgpu::Buffer,
    head_params: wgpu::Buffer,
}

impl Shared {
    fn new(gpu: &Gpu, c: &Config) -> Result<Shared> {
        let s = |label: &str, dims: &[usize]| gpu.scratch_f32(label, dims);
        let n_split = ops::MAX_SPLITS as usize;
        let (n_expert, n_used, n_ff_exp, _) = c.moe_dims();
        Ok(Shared {
            token: s("token", &[1])?,
            x: s("x", &[c.n_embd])?,
            qa: s("q_a", &[c.n_lora_q.max(1)])?,
            q: s("q", &[c.n_head, c.n_embd_head_qk()])?,
            q_abs: s("q_abs", &[c.n_head, c.n_lora_kv])?,
            o_part: s("o_part", &[c.n_head, n_split, c.n_lora_kv])?,
            ml: s("ml", &[c.n_head, n_split, 2])?,
            v_heads: s("v_heads", &[c.n_head, c.n_embd_head_v])?,
            sel: s("sel", &[n_used.max(1)])?,
            sel_w: s("sel_w", &[n_used.max(1)])?,
            // the logits, then route.wgsl's count of workgroups done
            moe_logits: s("ffn_moe_logits", &[n_expert + 1])?,
            // The dense FFN's and the routed experts' activations (the
            // shared expert's are per layer).
            act: s("act", &[c.n_ff.max(n_used * n_ff_exp).max(1)])?,
            step: gpu.storage("step", bytemuck::bytes_of(&ops::Step::new(0, &[])))?,
            zero_bias: s("zero_bias", &[n_expert.max(4)])?,
            zero_x: s("zero_x", &[c.n_embd])?,
            kv_params: gpu.uniform("kv_append", &ops::KvAppendParams::new(c)),
            attn_params: gpu.uniform("attention", &ops::AttentionParams::new(c, n_split as u32)),
            coop_params: gpu.uniform(
                "attention_coop",
                &ops::AttentionCoopParams::new(c, 1, n_split as u32),
            ),
            head_params: gpu.uniform(
                "attention_head",
                &ops::AttentionHeadParams::new(c, n_split as u32),
            ),
        })
    }
}

/// The decode plan being lowered.
struct Lowering<'a> {
    b: Builder<'a>,
    c: &'a Config,
    s: Shared,
    /// (index in the dispatches, the short-context attention for it).
    short_attn: Vec<(usize, Dispatch)>,
    /// The long-context attention is attention_coop.wgsl
    /// (`ops::attention_coop_fits`), not attention.wgsl.
    coop: bool,
}

pub fn build(
    gpu: &Gpu,
    pipes: &Pipelines,
    model: &Model,
    w: &ResidentWeights,
    caches: &[wgpu::Buffer],
) -> Result<Plan> {
    let c = &model.config;
    let b = Builder {
        gpu,
        pipes,
        out: Vec::new(),
        eps: c.rms_eps,
        dummy: gpu.scratch_f32("unused", &[4])?,
        zero_id: gpu.scratch_f32("expert_0", &[4])?,
        low: Lowered::default(),
    };
    let mut l = Lowering {
        b,
        c,
        s: Shared::new(gpu, c)?,
        short_attn: Vec::new(),
        coop: ops::attention_coop_fits(gpu, c.n_embd_head_qk_rope),
    };
    let recipe = Recipe::new(c);
    l.b.low.lower(&[InpEmbd]);
    for d in ops::embed(gpu, pipes, &w.token_embd, &l.s.token, &l.s.x)? {
        l.b.add(d);
    }
    l.b.low.leaves(InpEmbd, &l.s.x, c.n_embd);
    l.b.low
        .check("the decode input", 0, &recipe.input, &[InpEmbd])?;
    let mut blocks = Vec::new();
    for (il, (lw, cache)) in w.layers.iter().zip(caches).enumerate() {
        l.b.low.block(Some(il));
        let attn_start = l.b.out.len();
        l.attention(il, lw, cache)?;
        let ffn_start = l.b.out.len();
        match &lw.ffn {
            FfnWeights::Dense(d) => l.dense_ffn(lw, d)?,
            FfnWeights::Moe(m) => l.moe_ffn(il, lw, m)?,
        }
        let what = format!("the decode blk.{il}");
        l.b.low
            .check(&what, attn_start, &recipe.blocks[il], &[LOut])?;
        blocks.push(BlockRange {
            layer: il,
            moe: matches!(lw.ffn, FfnWeights::Moe { .. }),
            attn: attn_start..ffn_start,
            ffn: ffn_start..l.b.out.len(),
        });
    }
    let head_start = l.b.out.len();
    l.b.low.block(None);
    let head = l.head(w)?;
    l.b.low
        .check("the decode head", head_start, &recipe.head, &[Candidates])?;
    let mut short = l.b.out.clone();
    for (i, d) in l.short_attn.drain(..) {
        short[i] = d;
    }
    Ok(Plan {
        io: io(l.s, head, l.b.low),
        dispatches: l.b.out,
        short,
        blocks,
        head_start,
        coop_attention: l.coop,
    })
}

/// What the output head leaves for the engine.
struct Head {
    logits: wgpu::Buffer,
    cand_v: wgpu::Buffer,
    cand_i: wgpu::Buffer,
    topk_params: [wgpu::Buffer; 2],
    topk_wg: u32,
}

fn io(s: Shared, h: Head, low: Lowered) -> Io {
    Io {
        traced: low.traced,
        token: s.token,
        x: s.x,
        step: s.step,
        logits: h.logits,
        cand_v: h.cand_v,
        cand_i: h.cand_i,
        topk_params: h.topk_params,
        topk_wg: h.topk_wg,
    }
}

impl Lowering<'_> {
    /// A block's attention half: q_a (or q) ∥ kv_a, q_b ∥ kv_append (q_b
    /// binds kv_a's output ahead for kv_append), k_b absorb, attention,
    /// v_b (merging the splits), attn_output (+ residual).
    fn attention(&mut self, il: usize, lw: &LayerWeights, cache: &wgpu::Buffer) -> Result<()> {
        let (c, s) = (self.c, &self.s);
        let b = &mut self.b;
        let ckv = b.gpu.scratch_f32(&format!("kv_a-{il}"), &[c.kv_row()])?;
        let normed = |y| Mv {
            norm: Some(&lw.attn_norm),
            ..Mv::plain(&s.x, y)
        };
        let n_q = c.n_head * c.n_embd_head_qk();
        match &lw.q {
            QWeights::Lora { q_a, .. } => b.lowered(&[AttnNorm, QA], &s.qa, c.n_lora_q, |b| {
                b.matvec(q_a, normed(&s.qa))
            })?,
            QWeights::Direct(wq) => {
                b.lowered(&[AttnNorm, Q], &s.q, n_q, |b| b.matvec(wq, normed(&s.q)))?
            }
        }
        b.lowered(&[AttnNorm, KvCmprPe], &ckv, c.kv_row(), |b| {
            b.matvec(&lw.kv_a_mqa, normed(&ckv))
        })?;
        if let QWeights::Lora { q_a_norm, q_b, .. } = &lw.q {
            let mv = Mv {
                norm: Some(q_a_norm),
                ahead: Some(&ckv),
                ..Mv::plain(&s.qa, &s.q)
            };
            b.lowered(&[QANorm, Q], &s.q, n_q, |b| b.matvec(q_b, mv))?;
        }
        b.low.lower(&[KvCmpr, KPe, CacheK]);
        b.push(
            format!("blk.{il}.kv_append"),
            Kernel::KvAppend,
            &KvAppendBindings {
                p: &s.kv_params,
                steps: &s.step,
                ckv: &ckv,
                g: &lw.kv_a_norm,
                cache,
            },
            [1, 1, 1],
        )?;
        let n_head = c.n_head as u32;
        let k_b = Mv {
            slots: n_head,
            x_stride: (c.n_embd_head_qk() / 4) as u32,
            y_stride: c.n_lora_kv as u32,
            ..Mv::plain(&s.q, &s.q_abs)
        };
        let n_abs = c.n_head * c.n_lora_kv;
        b.lowered(&[QNopeAbsorbed], &s.q_abs, n_abs, |b| {
            b.matvec(&lw.k_b, k_b)
        })?;
        self.attend(il, cache)?;
        let (s, b) = (&self.s, &mut self.b);
        // v_b merges the attention splits of its head as it reads them.
        let v_b = Mv {
            slots: n_head,
            combine: Some((&s.ml, ops::MAX_SPLITS)),
            y_stride: c.n_embd_head_v as u32,
            ..Mv::plain(&s.o_part, &s.v_heads)
        };
        b.lowered(&[KqvOut], &s.v_heads, c.n_head * c.n_embd_head_v, |b| {
            b.matvec(&lw.v_b, v_b)
        })?;
        let out = Mv {
            accum: true,
            ..Mv::plain(&s.v_heads, &s.x)
        };
        b.lowered(&[AttnOut, FfnInp], &s.x, c.n_embd, |b| {
            b.matvec(&lw.attn_output, out)
        })
    }

    /// The attention itself, into per-split partials: the all-heads kernel
    /// (attention_coop.wgsl where `ops::attention_coop_fits`, else
    /// attention.wgsl) in the plan, the per-head one in the short-context
    /// plan's slot.
    fn attend(&mut self, il: usize, cache: &wgpu::Buffer) -> Result<()> {
        let (c, s) = (self.c, &self.s);
        let b = &mut self.b;
        let (n_split, n_head) = (ops::MAX_SPLITS, c.n_head as u32);
        let label = format!("blk.{il}.attention");
        let per_head = AttentionHeadBindings {
            p: &s.head_params,
            steps: &s.step,
            q_abs: &s.q_abs,
            q: &s.q,
            cache,
            o: &s.o_part,
            ml: &s.ml,
        };
        let short = Dispatch::new(
            b.gpu,
            b.pipes,
            Kernel::AttentionHead,
            &per_head,
            [ops::short_attention_splits(self.coop), n_head, 1],
        )?;
        self.short_attn
            .push((b.out.len(), short.named(label.clone())));
        // Longer contexts: all heads of a split at once, on cooperative
        // matrices where the adapter has them.
        let d = match self.coop {
            true => {
                let coop = AttentionCoopBindings {
                    p: &s.coop_params,
                    steps: &s.step,
                    q_abs: &s.q_abs,
                    q: &s.q,
                    cache,
                    o: &s.o_part,
                    ml: &s.ml,
                };
                let grid = [n_split, ops::attention_coop_groups(1, n_head), 1];
                ops::attention_coop(b.gpu, b.pipes, c.n_lora_kv, &coop, grid)?
            }
            false => {
                let all_heads = AttentionBindings {
                    p: &s.attn_params,
                    steps: &s.step,
                    q_abs: &s.q_abs,
                    q: &s.q,
                    cache,
                    o: &s.o_part,
                    ml: &s.ml,
                };
                let grid = [n_split, ops::attention_head_blocks(c.n_head), 1];
                ops::attention(b.gpu, b.pipes, c.n_lora_kv, &all_heads, grid)?
            }
        };
        b.low.lower(&[QPe, Kqv]);
        b.add(d.named(label));
        Ok(())
    }

    /// A dense block's feed-forward: gate+up (ffn_norm fused), down (+ residual).
    fn dense_ffn(&mut self, lw: &LayerWeights, d: &GateUpDown) -> Result<()> {
        let (c, s, b) = (self.c, &self.s, &mut self.b);
        let mv = gate_up(&s.x, Some(&lw.ffn_norm), None, 1, 0, &s.act);
        b.lowered(NORMED_SWIGLU, &s.act, c.n_ff, |b| b.matvec(&d.gate_up, mv))?;
        let down = Mv {
            accum: true,
            ..Mv::plain(&s.act, &s.x)
        };
        b.lowered(&[FfnOut, LOut], &s.x, c.n_embd, |b| b.matvec(&d.down, down))
    }

    /// A MoE block's feed-forward. Pairs run side by side: the router
    /// (logits and choice) ∥ shared gate+up (both norm x themselves), then
    /// routed gate+up (norms x itself) ∥ shared down (into its own buffer),
    /// then the routed down adds the shared output and the residual.
    fn moe_ffn(&mut self, il: usize, lw: &LayerWeights, m: &MoeWeights) -> Result<()> {
        let (_, n_used, n_ff_exp, n_ff_sh) = self.c.moe_dims();
        let gpu = self.b.gpu;
        let sh_act = gpu.scratch_f32(&format!("ffn_shexp_act-{il}"), &[n_ff_sh.max(1)])?;
        let sh_out = gpu.scratch_f32(&format!("ffn_shexp_out-{il}"), &[self.c.n_embd])?;
        self.route(il, lw, m)?;
        let (c, s, b) = (self.c, &self.s, &mut self.b);
        if let Some(sh) = &m.shared {
            let mv = gate_up(&s.x, Some(&lw.ffn_norm), None, 1, 0, &sh_act);
            b.lowered(NORMED_SWIGLU, &sh_act, n_ff_sh, |b| {
                b.matvec(&sh.gate_up, mv)
            })?;
        }
        let sel = Some((&s.sel, &s.sel_w));
        let routed = gate_up(
            &s.x,
            Some(&lw.ffn_norm),
            sel,
            n_used as u32,
            n_ff_exp as u32,
            &s.act,
        );
        let routed_steps = &[FfnNorm, FfnMoeGate, FfnMoeUp, FfnMoeSwiglu];
        match &m.shared {
            Some(sh) => {
                let ahead = Mv {
                    ahead: Some(&sh_act),
                    ..routed
                };
                b.lowered(routed_steps, &s.act, n_used * n_ff_exp, |b| {
                    b.matvec(&m.gate_up_exps, ahead)
                })?;
                b.lowered(&[FfnShexp], &sh_out, c.n_embd, |b| {
                    b.matvec(&sh.down, Mv::plain(&sh_act, &sh_out))
                })?;
            }
            None => {
                b.lowered(routed_steps, &s.act, n_used * n_ff_exp, |b| {
                    b.matvec(&m.gate_up_exps, routed)
                })?;
            }
        }
        let down = Mv {
            mode: MatvecMode::WeightedSum,
            sel,
            slots: n_used as u32,
            x_stride: (n_ff_exp / 4) as u32,
            add: Some(match m.shared {
                Some(_) => &sh_out,
                None => &s.zero_x,
            }),
            accum: true,
            ..Mv::plain(&s.act, &s.x)
        };
        let steps: &'static [_] = match m.shared {
            Some(_) => &[FfnMoeDown, FfnMoeWeighted, FfnMoeOut, FfnOut, LOut],
            None => &[FfnMoeDown, FfnMoeWeighted, FfnMoeOut, LOut],
        };
        b.lowered(steps, &s.x, c.n_embd, |b| b.matvec(&m.down_exps, down))
    }

    /// The router logits and the choice from them, in one dispatch per
    /// part of the router matrix (route.wgsl; the routed gate+up norms x
    /// itself).
    fn route(&mut self, il: usize, lw: &LayerWeights, m: &MoeWeights) -> Result<()> {
        let (c, s, b) = (self.c, &self.s, &mut self.b);
        let w = &m.gate_inp;
        let groups = w.parts.iter().map(|p| ops::route_groups(p.rows)).sum();
        b.low.lower(&[
            FfnNorm,
            FfnMoeLogits,
            FfnMoeProbs,
            FfnMoeTopk,
            FfnMoeWeights,
        ]);
        for part in &w.parts {
            let p = ops::RouteParams {
                units: w.units,
                row0: part.row0,
                rows: part.rows,
                groups,
                ..ops::RouteParams::new(c)
            };
            let pb = b.uniform(&format!("blk.{il}.route"), &p);
            let bufs = RouteBindings {
                p: &pb,
                x: &s.x,
                g: &lw.ffn_norm,
                logits: &s.moe_logits,
                sel: &s.sel,
                sel_w: &s.sel_w,
                bias: m.exp_probs_b.as_ref().unwrap_or(&s.zero_bias),
                weights: &part.buffers,
            };
            let wg = [ops::route_groups(part.rows), 1, 1];
            let d = Dispatch::new(b.gpu, b.pipes, Kernel::Route(w.format), &bufs, wg)?;
            let bytes = part.buffers.iter().map(|b| b.size()).sum();
            b.add(d.named(w.name.trim_end_matches(".weight")).reading(bytes));
        }
        b.low.leaves(FfnMoeLogits, &s.moe_logits, c.n_expert);
        b.low.leaves(FfnMoeWeights, &s.sel_w, c.n_expert_used);
        Ok(())
    }

    /// The output head: result norm, the head matvec, two top-k passes.
    fn head(&mut self, w: &ResidentWeights) -> Result<Head> {
        let (c, b) = (self.c, &mut self.b);
        let s = |label: &str, dims: &[usize]| b.gpu.scratch_f32(label, dims);
        let xn = s("result_norm", &[c.n_embd])?;
        let logits = s("logits", &[c.n_vocab])?;
        let topk_wg = (c.n_vocab / ops::TOPK_SLICE).clamp(1, ops::TOPK_MAX_WG);
        let cand1_v = s("cand1_v", &[topk_wg, MAX_CANDIDATES])?;
        let cand1_i = s("cand1_i", &[topk_wg, MAX_CANDIDATES])?;
        let cand_v = s("cand_v", &[MAX_CANDIDATES])?;
        let cand_i = s("cand_i", &[MAX_CANDIDATES])?;
        let topk_wg = topk_wg as u32;
        let norm_params = b.uniform(
            "result_norm",
            &ops::RmsNormParams {
                n: c.n_embd as u32,
                eps: c.rms_eps,
                n_rows: 1,
                parts: 1,
            },
        );
        let norm = RmsNormBindings {
            p: &norm_params,
            x: &self.s.x,
            g: &w.output_norm,
            y: &xn,
        };
        b.lowered(&[ResultNorm], &xn, c.n_embd, |b| {
            b.push("result_norm".into(), Kernel::RmsNorm, &norm, [1, 1, 1])
        })?;
        b.lowered(&[ResultOutput], &logits, c.n_vocab, |b| {
            b.matvec(&w.output, Mv::plain(&xn, &logits))
        })?;
        let n_vocab = c.n_vocab as u32;
        let topk_params = [true, false].map(|first| {
            let p = super::topk_params(n_vocab, topk_wg, 1, first);
            b.uniform(if first { "topk1" } else { "topk2" }, &p)
        });
        let dummy = b.dummy.clone();
        let pass1 = TopkBindings {
            p: &topk_params[0],
            in_v: &logits,
            in_i: &dummy,
            out_v: &cand1_v,
            out_i: &cand1_i,
        };
        let pass2 = TopkBindings {
            p: &topk_params[1],
            in_v: &cand1_v,
            in_i: &cand1_i,
            out_v: &cand_v,
            out_i: &cand_i,
        };
        // Pass 1 keeps each slice's candidates, pass 2 the best of those.
        b.low.lower(&[Candidates]);
        for (first, bufs, wg, label) in
            [(true, pass1, topk_wg, "topk1"), (false, pass2, 1, "topk2")]
        {
            let d = Dispatch::with(
                b.gpu,
                b.pipes,
                Kernel::TopK,
                &TopkOverrides { first },
                &bufs,
                [wg, 1, 1],
            )?;
            b.add(d.named(label));
        }
        Ok(Head {
            logits,
            cand_v,
            cand_i,
            topk_params,
            topk_wg,
        })
    }
}

/// A gate+up matvec with ffn_norm fused: a dense block's or the shared
/// expert's gate, up and their product.
const NORMED_SWIGLU: &[Name] = &[FfnNorm, FfnGate, FfnUp, FfnSwiglu];

/// A gate+up matvec (silu(gate)·up) of x into y.
fn gate_up<'a>(
    x: &'a wgpu::Buffer,
    norm: Option<&'a wgpu::Buffer>,
    sel: Option<(&'a wgpu::Buffer, &'a wgpu::Buffer)>,
    slots: u32,
    y_stride: u32,
    y: &'a wgpu::Buffer,
) -> Mv<'a> {
    Mv {
        mode: MatvecMode::GateUp,
        norm,
        sel,
        slots,
        y_stride,
        ..Mv::plain(x, y)
    }
}
