//! The prefill plan: the layer stack over a chunk of up to `ubatch` prompt
//! tokens at once, built once per session next to the decode plan and
//! sharing its weights and KV cache. Matrix products go through
//! matmul.wgsl, which dequantizes each weight unit once per tile of 8
//! tokens; routed experts are grouped by expert (moe_group.wgsl) so each
//! expert's weights are read once per tile of its tokens. Attention is
//! causal over the cache: every token of the chunk appends its row first,
//! then attends over the positions up to its own in one split.
//!
//! Per MoE block: attn_norm, q_a, q_a_norm, q_b, kv_a, kv_append, k_b,
//! attention, v_b, attn_output (+ residual), ffn_norm, router logits, router
//! selection, grouping, experts gate+up, experts down, the weighted sum
//! (+ residual), shared gate+up, shared down (+ residual). Only the last
//! token's logits are needed: the engine copies its residual row into the
//! decode plan and runs the decode plan's output head.

use crate::error::{Error, Result};
use crate::gpu::context::Gpu;
use crate::gpu::kernels::{Kernel, Pipelines};
use crate::gpu::ops::{self, Dispatch, MATMUL_ROWS, MATMUL_TILE};
use crate::gpu::resident::{FfnWeights, QWeights, ResidentWeights};
use crate::gpu::weights::Matrix;
use crate::model::Model;

/// How one dimension of a dispatch's grid follows the chunk's token count.
#[derive(Clone, Copy)]
enum Dim {
    Fixed(u32),
    Tokens,
    /// Tiles of MATMUL_TILE consecutive tokens.
    DenseTiles,
    /// The most expert tiles the chunk's assignments can make.
    RoutedTiles,
}

struct Op {
    d: Dispatch,
    grid: [Dim; 3],
}

pub struct Prefill {
    /// Most tokens per chunk.
    pub ubatch: usize,
    ops: Vec<Op>,
    n_used: u32,
    n_expert: u32,
    /// The chunk's token ids (the engine writes them; the plan gathers
    /// their embeddings into `x`).
    pub tokens: wgpu::Buffer,
    /// The chunk's residual rows.
    pub x: wgpu::Buffer,
    /// One `ops::Step` per token of the chunk.
    pub steps: wgpu::Buffer,
    dense_tiles: wgpu::Buffer,
    identity: wgpu::Buffer,
    routed_tiles: wgpu::Buffer,
    routed_order: wgpu::Buffer,
    group_params: wgpu::Buffer,
    /// RMSNorm params over n_embd-wide chunk rows (layer norms and the head).
    norm_embd: wgpu::Buffer,
}

/// The output head over every row of a chunk (perplexity wants the logits
/// of each position): output norm, then the output matmul into `logits`,
/// one row of n_vocab floats per token.
pub struct Head {
    ops: Vec<Op>,
    pub logits: wgpu::Buffer,
    /// Mappable copy of `logits`, the same size.
    pub readback: wgpu::Buffer,
}

impl Prefill {
    fn count(&self, d: Dim, n_tok: u32) -> u32 {
        match d {
            Dim::Fixed(n) => n,
            Dim::Tokens => n_tok,
            Dim::DenseTiles => n_tok.div_ceil(MATMUL_TILE),
            Dim::RoutedTiles => ops::max_tiles(n_tok * self.n_used, self.n_expert),
        }
    }

    /// Write the per-chunk tables for `n_tok` tokens: the dense tiles and
    /// the grouping's params. (Embeddings and steps are the engine's.)
    pub fn write_chunk(&self, gpu: &Gpu, n_tok: u32) {
        let tiles: Vec<[u32; 4]> = (0..n_tok.div_ceil(MATMUL_TILE))
            .map(|i| {
                [
                    0,
                    i * MATMUL_TILE,
                    MATMUL_TILE.min(n_tok - i * MATMUL_TILE),
                    0,
                ]
            })
            .collect();
        gpu.queue
            .write_buffer(&self.dense_tiles, 0, bytemuck::cast_slice(&tiles));
        let n_assign = n_tok * self.n_used;
        let gp = ops::MoeGroupParams {
            n_assign,
            n_expert: self.n_expert,
            tile: MATMUL_TILE,
            max_tiles: ops::max_tiles(n_assign, self.n_expert),
        };
        gpu.queue
            .write_buffer(&self.group_params, 0, bytemuck::bytes_of(&gp));
    }

    /// Record `op` with its grid for a chunk of `n_tok` tokens.
    fn record_one(&self, op: &Op, pass: &mut wgpu::ComputePass<'_>, n_tok: u32) {
        op.d.record_grid(pass, op.grid.map(|d| self.count(d, n_tok)));
    }

    /// Record the layer stack for a chunk of `n_tok` tokens.
    pub fn record(&self, pass: &mut wgpu::ComputePass<'_>, n_tok: u32) {
        for op in &self.ops {
            self.record_one(op, pass, n_tok);
        }
    }

    /// Record only dispatch `i` (profiling).
    pub fn record_op(&self, pass: &mut wgpu::ComputePass<'_>, i: usize, n_tok: u32) {
        self.record_one(&self.ops[i], pass, n_tok);
    }

    /// Dispatch `i`'s op (label without the layer) and kernel.
    pub fn op_info(&self, i: usize) -> (&str, &'static str) {
        (self.ops[i].d.op(), self.ops[i].d.kernel.name())
    }

    /// The all-rows output head for this plan's chunks (built on first use
    /// by the engine: its logits buffer is ubatch × n_vocab floats).
    pub fn head(
        &self,
        gpu: &Gpu,
        pipes: &Pipelines,
        model: &Model,
        w: &ResidentWeights,
    ) -> Result<Head> {
        let c = &model.config;
        let u = self.ubatch;
        let xn = gpu.scratch_f32("pf.result_norm", &[u, c.n_embd])?;
        let logits = gpu.scratch_f32("pf.logits", &[u, c.n_vocab])?;
        let mut b = Builder {
            gpu,
            pipes,
            ops: Vec::new(),
            dense_tiles: &self.dense_tiles,
            identity: &self.identity,
            routed_tiles: &self.routed_tiles,
            routed_order: &self.routed_order,
        };
        b.push(
            "result_norm".into(),
            Kernel::RmsNorm,
            &[&self.norm_embd, &self.x, &w.output_norm, &xn],
            [Dim::Tokens, Dim::Fixed(1), Dim::Fixed(1)],
        )?;
        b.matmul(&w.output, Mm::new(&xn, c.n_embd, &logits, c.n_vocab))?;
        let readback = gpu.readback("pf.logits readback", logits.size())?;
        Ok(Head {
            ops: b.ops,
            logits,
            readback,
        })
    }

    /// Record `head` for a chunk of `n_tok` tokens (after `record`).
    pub fn record_head(&self, head: &Head, pass: &mut wgpu::ComputePass<'_>, n_tok: u32) {
        for op in &head.ops {
            self.record_one(op, pass, n_tok);
        }
    }

    /// Dispatches per chunk.
    pub fn dispatches(&self) -> usize {
        self.ops.len()
    }

    /// The chunk's dispatches in recording order (for counting barriers).
    pub fn dispatch_list(&self) -> impl Iterator<Item = &Dispatch> {
        self.ops.iter().map(|op| &op.d)
    }
}

/// One matmul's inputs and layout besides the matrix.
#[derive(Clone, Copy)]
struct Mm<'a> {
    x: &'a wgpu::Buffer,
    y: &'a wgpu::Buffer,
    gate_up: bool,
    accum: bool,
    /// Through the expert tiles (else dense tiles over the chunk).
    routed: bool,
    /// floats per row of x and y
    x_row: usize,
    y_row: usize,
    x_div: u32,
    /// Batched heads: (count, floats between heads' x, between heads' y).
    heads: (u32, usize, usize),
}

impl<'a> Mm<'a> {
    fn new(x: &'a wgpu::Buffer, x_row: usize, y: &'a wgpu::Buffer, y_row: usize) -> Mm<'a> {
        Mm {
            x,
            y,
            gate_up: false,
            accum: false,
            routed: false,
            x_row,
            y_row,
            x_div: 1,
            heads: (1, 0, 0),
        }
    }
}

struct Builder<'a> {
    gpu: &'a Gpu,
    pipes: &'a Pipelines,
    ops: Vec<Op>,
    dense_tiles: &'a wgpu::Buffer,
    identity: &'a wgpu::Buffer,
    routed_tiles: &'a wgpu::Buffer,
    routed_order: &'a wgpu::Buffer,
}

impl Builder<'_> {
    fn push(
        &mut self,
        label: String,
        k: Kernel,
        bufs: &[&wgpu::Buffer],
        grid: [Dim; 3],
    ) -> Result<()> {
        let d = Dispatch::new(self.gpu, self.pipes, k, &[], bufs, [1, 1, 1])?.named(label);
        self.ops.push(Op { d, grid });
        Ok(())
    }

    fn matmul(&mut self, m: &Matrix, v: Mm) -> Result<()> {
        for part in &m.parts {
            let params = ops::MatmulParams {
                rows: part.rows,
                units: m.units,
                mat_units: m.mat_units(part),
                x_div: v.x_div,
                x_tok: (v.x_row / 4) as u32,
                y_tok: v.y_row as u32,
                x_stride: (v.heads.1 / 4) as u32,
                y_stride: v.heads.2 as u32,
                y_off: part.row0,
                _pad: [0; 3],
            };
            let pb = self.gpu.uniform(&m.name, &params);
            let (tiles, order) = match v.routed {
                true => (self.routed_tiles, self.routed_order),
                false => (self.dense_tiles, self.identity),
            };
            let bufs = ops::MatmulBuffers {
                params: &pb,
                x: v.x,
                y: v.y,
                tiles,
                order,
                unused: tiles,
                weights: &part.buffers,
            };
            let d = ops::matmul(self.gpu, self.pipes, m.format, v.gate_up, v.accum, &bufs)?
                .named(m.name.trim_end_matches(".weight"));
            let tiles = if v.routed {
                Dim::RoutedTiles
            } else {
                Dim::DenseTiles
            };
            self.ops.push(Op {
                d,
                grid: [
                    Dim::Fixed(part.rows.div_ceil(MATMUL_ROWS)),
                    tiles,
                    Dim::Fixed(v.heads.0),
                ],
            });
        }
        Ok(())
    }
}

/// The prefill plan of `model` for chunks of up to `ubatch` tokens, over
/// the resident weights `w` and the session's `caches`.
pub fn build(
    gpu: &Gpu,
    pipes: &Pipelines,
    model: &Model,
    w: &ResidentWeights,
    caches: &[wgpu::Buffer],
    ubatch: usize,
) -> Result<Prefill> {
    let c = &model.config;
    let u = ubatch;
    let n_qk = c.n_embd_head_qk();
    let (n_expert, n_used, n_ff_exp, n_ff_sh) = c.moe_dims();
    let n_used = n_used.max(1);
    let n_assign = u
        .checked_mul(n_used)
        .and_then(|n| u32::try_from(n).ok())
        .ok_or_else(|| Error::InvalidArgument(format!("ubatch {u} is too large")))?;
    let scratch = |label: &str, dims: &[usize]| gpu.scratch_f32(label, dims);

    let x = scratch("pf.x", &[u, c.n_embd])?;
    let xn = scratch("pf.attn_norm", &[u, c.n_embd])?;
    let qa = scratch("pf.q_a", &[u, c.n_lora_q.max(1)])?;
    let qan = scratch("pf.q_a_norm", &[u, c.n_lora_q.max(1)])?;
    let q = scratch("pf.q", &[u, c.n_head, n_qk])?;
    let ckv = scratch("pf.kv_a", &[u, c.kv_row()])?;
    let q_abs = scratch("pf.q_abs", &[u, c.n_head, c.n_lora_kv])?;
    let o = scratch("pf.attn_out", &[u, c.n_head, c.n_lora_kv])?;
    let ml = scratch("pf.ml", &[u, c.n_head, 2])?;
    let v_heads = scratch("pf.v_heads", &[u, c.n_head, c.n_embd_head_v])?;
    let h2 = scratch("pf.ffn_norm", &[u, c.n_embd])?;
    let h_router = scratch("pf.router_h", &[u, c.n_embd])?;
    let moe_logits = scratch("pf.moe_logits", &[u, n_expert.max(1)])?;
    let sel = scratch("pf.sel", &[u, n_used])?;
    let sel_w = scratch("pf.sel_w", &[u, n_used])?;
    let act = scratch("pf.act", &[u, c.n_ff.max(n_ff_sh).max(1)])?;
    let act_r = scratch("pf.act_exps", &[u, n_used, n_ff_exp.max(1)])?;
    let part = scratch("pf.down_exps", &[u, n_used, c.n_embd])?;
    let max_tiles = ops::max_tiles(n_assign, n_expert.max(1) as u32);
    let routed_tiles = scratch("pf.tiles", &[4, max_tiles as usize])?;
    let routed_order = scratch("pf.order", &[u, n_used])?;
    let dense_tiles = scratch("pf.dense_tiles", &[4, u.div_ceil(MATMUL_TILE as usize)])?;
    let ids: Vec<u32> = (0..u as u32).collect();
    let identity = gpu.storage("pf.identity", bytemuck::cast_slice(&ids))?;
    let steps = gpu.scratch_f32("pf.steps", &[u, std::mem::size_of::<ops::Step>() / 4])?;
    let zeros = scratch("pf.zero_bias", &[n_expert.max(4)])?;
    let group_params = gpu.uniform(
        "pf.moe_group",
        &ops::MoeGroupParams {
            n_assign,
            n_expert: c.n_expert as u32,
            tile: MATMUL_TILE,
            max_tiles,
        },
    );
    let norm = |n: usize| {
        gpu.uniform(
            "pf.rms_norm",
            &ops::RmsNormParams {
                n: n as u32,
                eps: c.rms_eps,
                n_rows: u as u32,
                _pad: 0,
            },
        )
    };
    let (norm_embd, norm_q) = (norm(c.n_embd), norm(c.n_lora_q.max(1)));
    let kv_params = gpu.uniform("pf.kv_append", &ops::KvAppendParams::new(c));
    let attn_params = gpu.uniform("pf.attention", &ops::AttentionParams::new(c, 1));
    let router_params = gpu.uniform("pf.router", &ops::RouterParams::new(c));
    let sum_params = gpu.uniform(
        "pf.moe_sum",
        &ops::MoeSumParams {
            n: c.n_embd as u32,
            n_used: n_used as u32,
            _pad: [0; 2],
        },
    );

    let mut b = Builder {
        gpu,
        pipes,
        ops: Vec::new(),
        dense_tiles: &dense_tiles,
        identity: &identity,
        routed_tiles: &routed_tiles,
        routed_order: &routed_order,
    };
    let tokens = scratch("pf.tokens", &[u])?;
    for d in ops::embed(gpu, pipes, &w.token_embd, &tokens, &x)? {
        let per_token = Dim::Fixed(d.workgroups[0]);
        b.ops.push(Op {
            d,
            grid: [per_token, Dim::Tokens, Dim::Fixed(1)],
        });
    }
    let rows = [Dim::Tokens, Dim::Fixed(1), Dim::Fixed(1)];
    let n_head = c.n_head as u32;
    let e = c.n_embd;
    for (il, lw) in w.layers.iter().enumerate() {
        let name = |op: &str| format!("blk.{il}.{op}");
        b.push(
            name("attn_norm"),
            Kernel::RmsNorm,
            &[&norm_embd, &x, &lw.attn_norm, &xn],
            rows,
        )?;
        match &lw.q {
            QWeights::Lora { q_a, q_a_norm, q_b } => {
                let nq = c.n_lora_q;
                b.matmul(q_a, Mm::new(&xn, e, &qa, nq))?;
                b.push(
                    name("q_a_norm"),
                    Kernel::RmsNorm,
                    &[&norm_q, &qa, q_a_norm, &qan],
                    rows,
                )?;
                b.matmul(q_b, Mm::new(&qan, nq, &q, c.n_head * n_qk))?;
            }
            QWeights::Direct(wq) => b.matmul(wq, Mm::new(&xn, e, &q, c.n_head * n_qk))?,
        }
        b.matmul(&lw.kv_a_mqa, Mm::new(&xn, e, &ckv, c.kv_row()))?;
        b.push(
            name("kv_append"),
            Kernel::KvAppend,
            &[&kv_params, &steps, &ckv, &lw.kv_a_norm, &caches[il]],
            rows,
        )?;
        let n_lat = c.n_lora_kv;
        b.matmul(
            &lw.k_b,
            Mm {
                heads: (n_head, n_qk, n_lat),
                ..Mm::new(&q, c.n_head * n_qk, &q_abs, c.n_head * n_lat)
            },
        )?;
        let attn = [&attn_params, &steps, &q_abs, &q, &caches[il], &o, &ml];
        b.ops.push(Op {
            d: ops::attention(gpu, pipes, n_lat, &attn, [1, 1, 1])?.named(name("attention")),
            grid: [
                Dim::Fixed(1),
                Dim::Fixed(ops::attention_head_blocks(c.n_head)),
                Dim::Tokens,
            ],
        });
        let n_v = c.n_embd_head_v;
        b.matmul(
            &lw.v_b,
            Mm {
                heads: (n_head, n_lat, n_v),
                ..Mm::new(&o, c.n_head * n_lat, &v_heads, c.n_head * n_v)
            },
        )?;
        b.matmul(
            &lw.attn_output,
            Mm {
                accum: true,
                ..Mm::new(&v_heads, c.n_head * n_v, &x, e)
            },
        )?;
        b.push(
            name("ffn_norm"),
            Kernel::RmsNorm,
            &[&norm_embd, &x, &lw.ffn_norm, &h2],
            rows,
        )?;
        let ffn = |b: &mut Builder, d: &crate::gpu::resident::GateUpDown, n_ff: usize| {
            b.matmul(
                &d.gate_up,
                Mm {
                    gate_up: true,
                    ..Mm::new(&h2, e, &act, n_ff)
                },
            )?;
            b.matmul(
                &d.down,
                Mm {
                    accum: true,
                    ..Mm::new(&act, n_ff, &x, e)
                },
            )
        };
        match &lw.ffn {
            FfnWeights::Dense(d) => ffn(&mut b, d, c.n_ff)?,
            FfnWeights::Moe {
                gate_inp,
                exp_probs_b,
                gate_up_exps,
                down_exps,
                shared,
            } => {
                b.matmul(gate_inp, Mm::new(&h2, e, &moe_logits, c.n_expert))?;
                b.push(
                    name("router"),
                    Kernel::Router,
                    &[
                        &router_params,
                        &x,
                        &lw.ffn_norm,
                        &moe_logits,
                        exp_probs_b.as_ref().unwrap_or(&zeros),
                        &h_router,
                        &sel,
                        &sel_w,
                    ],
                    rows,
                )?;
                b.push(
                    name("moe_group"),
                    Kernel::MoeGroup,
                    &[&group_params, &sel, &routed_order, &routed_tiles],
                    [Dim::Fixed(1); 3],
                )?;
                let n_ff = c.n_ff_exp;
                b.matmul(
                    gate_up_exps,
                    Mm {
                        gate_up: true,
                        routed: true,
                        x_div: n_used as u32,
                        ..Mm::new(&h2, e, &act_r, n_ff)
                    },
                )?;
                b.matmul(
                    down_exps,
                    Mm {
                        routed: true,
                        ..Mm::new(&act_r, n_ff, &part, e)
                    },
                )?;
                b.push(
                    name("moe_sum"),
                    Kernel::MoeSum,
                    &[&sum_params, &part, &sel_w, &x],
                    [
                        Dim::Fixed((e as u32).div_ceil(ops::MOE_SUM_WG)),
                        Dim::Tokens,
                        Dim::Fixed(1),
                    ],
                )?;
                if let Some(sh) = shared {
                    ffn(&mut b, sh, c.n_ff_exp * c.n_expert_shared)?;
                }
            }
        }
    }
    Ok(Prefill {
        ubatch,
        ops: b.ops,
        n_used: n_used as u32,
        n_expert: c.n_expert.max(1) as u32,
        tokens,
        x,
        steps,
        dense_tiles,
        identity,
        routed_tiles,
        routed_order,
        group_params,
        norm_embd,
    })
}
