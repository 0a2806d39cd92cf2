//! The prefill's lowering of a block's attention half: the norm and the
//! q / kv projections, the cache append, the absorbed attention over the
//! chunk's causal prefixes in the chunk's splits (`Prefill::chunk`), and
//! the output projection into the residual.

use super::buffers::{Acts, Uniforms};
use super::matmul::Mm;
use super::{Builder, Dim, When, ROWS};
use crate::error::Result;
use crate::gpu::kernels::Kernel;
use crate::gpu::ops::{
    self, AttentionBindings, AttentionMergeBindings, Dispatch, KvAppendBindings, RmsNormBindings,
};
use crate::gpu::plan::lower::Lowers;
use crate::gpu::resident::{LayerWeights, QWeights};
use crate::model::recipe::{Name, Name::*};
use crate::model::Config;

impl Builder<'_> {
    /// A block's attention half over the chunk: attn_norm, q (q_a, its
    /// norm, q_b; or q), kv_a, kv_append, k_b absorb, attention (`attend`),
    /// v_b, attn_output (+ residual).
    pub(super) fn attention(
        &mut self,
        c: &Config,
        a: &Acts,
        p: &Uniforms,
        il: usize,
        lw: &LayerWeights,
        cache: &wgpu::Buffer,
    ) -> Result<()> {
        let name = |op: &str| format!("blk.{il}.{op}");
        let (e, n_qk, n_lat, n_v) = (c.n_embd, c.n_embd_head_qk(), c.n_lora_kv, c.n_embd_head_v);
        let (n_head, n_q) = (c.n_head as u32, c.n_head * n_qk);
        let norm = RmsNormBindings {
            p: &p.norm_embd,
            x: &a.x,
            g: &lw.attn_norm,
            y: &a.xn,
        };
        self.lowered(&[AttnNorm], &a.xn, e, |b| {
            b.push(name("attn_norm"), Kernel::RmsNorm, &norm, ROWS)
        })?;
        // q_a and kv_a leave partial sums where they are split, both in
        // qkv_a (kv_a's from kv_off on): q_a_norm adds q_a's, kv_append
        // kv_a's. q_a_norm's read moves qkv_a to the read state, so
        // kv_append, which writes only its layer's cache, runs after q_b
        // with no barrier between them.
        const KV: &[Name] = &[KvCmprPe, KvCmpr, KPe, CacheK];
        let kv_a = Mm {
            y_off: a.kv_off,
            ..Mm::split_k(
                &a.xn,
                e,
                (&a.qkv_a, c.kv_row()),
                a.k.kv_a,
                a.k.plane(c.kv_row()),
            )
        };
        let append = KvAppendBindings {
            p: &p.kv,
            steps: &a.steps,
            ckv: &a.qkv_a,
            g: &lw.kv_a_norm,
            cache,
        };
        match &lw.q {
            QWeights::Lora { q_a, q_a_norm, q_b } => {
                let nq = c.n_lora_q;
                let norm = RmsNormBindings {
                    p: &p.norm_q,
                    x: &a.qkv_a,
                    g: q_a_norm,
                    y: &a.qan,
                };
                self.low.lower(&[QA]);
                self.matmul(
                    q_a,
                    Mm::split_k(&a.xn, e, (&a.qkv_a, nq), a.k.q_a, a.k.plane(nq)),
                )?;
                self.low.lower(KV);
                self.matmul(&lw.kv_a_mqa, kv_a)?;
                self.lowered(&[QANorm], &a.qan, nq, |b| {
                    b.push(name("q_a_norm"), Kernel::RmsNorm, &norm, ROWS)
                })?;
                self.lowered(&[Q], &a.q, n_q, |b| {
                    b.matmul(q_b, Mm::new(&a.qan, nq, &a.q, n_q))
                })?;
            }
            QWeights::Direct(wq) => {
                self.lowered(&[Q], &a.q, n_q, |b| {
                    b.matmul(wq, Mm::new(&a.xn, e, &a.q, n_q))
                })?;
                self.low.lower(KV);
                self.matmul(&lw.kv_a_mqa, kv_a)?;
            }
        }
        self.low.lower(KV);
        self.push(name("kv_append"), Kernel::KvAppend, &append, ROWS)?;
        let k_b = Mm {
            heads: (n_head, n_qk, n_lat),
            ..Mm::new(&a.q, n_q, &a.q_abs, c.n_head * n_lat)
        };
        self.lowered(&[QNopeAbsorbed], &a.q_abs, c.n_head * n_lat, |b| {
            b.matmul(&lw.k_b, k_b)
        })?;
        self.attend(c, a, p, il, cache)?;
        let v_b = Mm {
            heads: (n_head, n_lat, n_v),
            ..Mm::new(&a.o, c.n_head * n_lat, &a.v_heads, c.n_head * n_v)
        };
        self.lowered(&[KqvOut], &a.v_heads, c.n_head * n_v, |b| {
            b.matmul(&lw.v_b, v_b)
        })?;
        let out = Mm {
            accum: true,
            ..Mm::new(&a.v_heads, c.n_head * n_v, &a.x, e)
        };
        self.lowered(&[AttnOut, FfnInp], &a.x, e, |b| {
            b.matmul(&lw.attn_output, out)
        })
    }

    /// The attention itself, each token over its causal prefix, into kqv
    /// (`a.o`): attention_coop (rows of 32 (token, head) pairs) or
    /// attention.wgsl (a token's heads in blocks of ATTENTION_HEADS). A
    /// chunk whose tokens attend in one split writes kqv directly; one in
    /// several (`Dim::Splits`) writes the splits, which the merge joins.
    fn attend(
        &mut self,
        c: &Config,
        a: &Acts,
        p: &Uniforms,
        il: usize,
        cache: &wgpu::Buffer,
    ) -> Result<()> {
        let name = |op: &str| format!("blk.{il}.{op}");
        let (n_head, n_lat) = (c.n_head as u32, c.n_lora_kv);
        let coop = self.coop_attention;
        let attention = |o: &wgpu::Buffer| -> Result<(Dispatch, [Dim; 3])> {
            let (steps, q_abs, q, ml) = (&a.steps, &a.q_abs, &a.q, &a.ml);
            Ok(match coop {
                true => {
                    let b = ops::AttentionCoopBindings {
                        p: &p.attn_coop,
                        steps,
                        q_abs,
                        q,
                        cache,
                        o,
                        ml,
                    };
                    let d = ops::attention_coop(self.gpu, self.pipes, n_lat, &b, [1, 1, 1])?;
                    (d, [Dim::Splits, Dim::HeadRows(n_head), Dim::Fixed(1)])
                }
                false => {
                    let b = AttentionBindings {
                        p: &p.attn,
                        steps,
                        q_abs,
                        q,
                        cache,
                        o,
                        ml,
                    };
                    let d = ops::attention(self.gpu, self.pipes, n_lat, &b, [1, 1, 1])?;
                    let heads = Dim::Fixed(ops::attention_head_blocks(c.n_head));
                    (d, [Dim::Splits, heads, Dim::Tokens])
                }
            })
        };
        let (whole, whole_grid) = attention(&a.o)?;
        let (split, split_grid) = attention(&a.o_part)?;
        let merge = AttentionMergeBindings {
            p: &p.attn_merge,
            part: &a.o_part,
            ml: &a.ml,
            o: &a.o,
        };
        let merge = Dispatch::new(
            self.gpu,
            self.pipes,
            Kernel::AttentionMerge,
            &merge,
            [1, 1, 1],
        )?;
        self.lowered(&[QPe, Kqv], &a.o, c.n_head * n_lat, |b| {
            b.add_when(whole.named(name("attention")), whole_grid, When::OneSplit);
            b.add_when(split.named(name("attention")), split_grid, When::Splits);
            let heads = [Dim::Fixed(n_head), Dim::Tokens, Dim::Fixed(1)];
            b.add_when(merge.named(name("attention_merge")), heads, When::Splits);
            Ok(())
        })?;
        Ok(())
    }
}
