//! The prefill plan: the prefill's lowering of the recipe
//! (`model::recipe`), the layer stack over a chunk of up to `ubatch` prompt
//! tokens at once, built once per session next to the decode plan and
//! sharing its weights and KV cache. Matrix products go through
//! matmul_coop.wgsl (cooperative matrices, where the adapter offers them)
//! or matmul.wgsl, which dequantize each weight unit once per tile of 64
//! tokens (`ops::matmul_tile`); routed experts are grouped by expert
//! (moe_group.wgsl) so each expert's weights are read once per tile of its
//! tokens, an expert's last run of 32 or fewer in a short tile of its own
//! shape (`ops::matmul_small_tile`). Attention is causal over the cache:
//! every token of the chunk appends its row first, then attends over the
//! positions up to its own:
//! the chunk's (token, head) pairs as the rows of matrix products on
//! cooperative matrices (attention_coop.wgsl) where
//! `ops::attention_coop_fits`, else attention.wgsl once per token, each
//! token's positions in the chunk's splits (`ops::prefill_splits`: many
//! for a short chunk deep in the context) joined by attention_merge.wgsl.
//!
//! Per MoE block: attn_norm, q_a, kv_a, q_a_norm, q_b ∥ kv_append, k_b,
//! attention (+ merge), v_b, attn_output (+ residual), ffn_norm, router logits, router
//! selection, grouping, experts gate+up ∥ shared gate+up, experts down,
//! the weighted sum (+ residual), shared down (+ residual): the norms are
//! dispatches of their own, since the matmuls read whole rows many times.
//! `a ∥ b`: no barrier before b (it reads buffers already in the read
//! state and writes only buffers first used there: its layer's cache, its
//! layer's shared activations).
//! Only the last token's logits are needed: the engine copies its residual
//! row into the decode plan and runs the decode lowering of the head (one
//! row is what that lowering is for); `head` lowers the head over every
//! row of a chunk, for perplexity.

mod attention;
mod buffers;
mod matmul;
mod parts;

use super::lower::{Lowered, Lowers, Traced};
use crate::error::{Error, Result};
use crate::gpu::context::Gpu;
use crate::gpu::kernels::{Bindings, Kernel, Pipelines};
use crate::gpu::ops::{
    self, Dispatch, MoeGroupBindings, MoeSumBindings, RmsNormBindings, RouterBindings,
};
use crate::gpu::resident::{FfnWeights, GateUpDown, MoeWeights, ResidentWeights};
use crate::model::recipe::{self, Name, Name::*, Recipe};
use crate::model::{Config, Model};
use buffers::{Acts, Splits, Uniforms};
use matmul::Mm;
use parts::part_ops;
pub use parts::PARTS;

/// How one dimension of a dispatch's grid follows the chunk's token count.
#[derive(Clone, Copy)]
enum Dim {
    Fixed(u32),
    Tokens,
    /// Tiles of `Prefill::tile` consecutive tokens.
    DenseTiles,
    /// The most expert tiles the chunk's assignments can make.
    RoutedTiles,
    /// attention_coop.wgsl's workgroups: the chunk's (token, head) rows
    /// for this many heads.
    HeadRows(u32),
    /// The chunk's attention splits.
    Splits,
}

/// What recording a chunk depends on: its token count and the position
/// splits of its tokens' attention. Only `Prefill::chunk` makes one, so
/// the splits always fit the partial buffers.
#[derive(Clone, Copy, Debug)]
pub struct Chunk {
    n_tok: u32,
    splits: u32,
}

impl Chunk {
    /// Position splits of every token's attention (its step record's
    /// `n_split`).
    pub fn splits(&self) -> u32 {
        self.splits
    }
}

struct Op {
    d: Dispatch,
    grid: [Dim; 3],
    when: When,
}

/// Which chunks an op runs in. Where a chunk's tokens attend in one split
/// the attention writes kqv itself; otherwise it writes its splits and
/// attention_merge.wgsl joins them (a merge of one split cost 1.5% of a
/// 512-token chunk on an H100).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum When {
    Always,
    OneSplit,
    Splits,
}

impl When {
    fn holds(self, chunk: Chunk) -> bool {
        match self {
            When::Always => true,
            When::OneSplit => chunk.splits == 1,
            When::Splits => chunk.splits > 1,
        }
    }
}

pub struct Prefill {
    /// Most tokens per chunk.
    pub ubatch: usize,
    /// Tokens per matmul tile (`ops::matmul_tile`), and per short routed
    /// tile (`ops::matmul_small_tile`).
    tile: u32,
    small_tile: u32,
    /// The attention runs on attention_coop.wgsl (`ops::attention_coop_fits`).
    coop_attention: bool,
    /// (token, split) rows the attention's partial buffers hold
    /// (`ops::prefill_split_rows`); a chunk's splits stay within them.
    split_rows: u32,
    n_head: u32,
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
    routed_rows: wgpu::Buffer,
    group_params: wgpu::Buffer,
    /// The attention's and its merge's params (`n_tok` and the split
    /// stride set per chunk).
    attn: (wgpu::Buffer, ops::AttentionParams),
    attn_coop: (wgpu::Buffer, ops::AttentionCoopParams),
    attn_merge: (wgpu::Buffer, ops::AttentionMergeParams),
    /// RMSNorm params over n_embd-wide chunk rows (layer norms and the head).
    norm_embd: wgpu::Buffer,
    /// The chunk's output-norm rows (`head`).
    result_norm: wgpu::Buffer,
    /// Each MoE layer's shared-expert activations: a buffer a layer, so
    /// that the shared gate+up runs beside the experts' with no barrier
    /// (a buffer's first use in the chunk's encoder needs none).
    _shexp_act: Vec<wgpu::Buffer>,
    /// The recipe's intermediates the chunk leaves in buffers of their own,
    /// `len` floats per token (rows of `ubatch`), in dispatch order.
    pub traced: Vec<Traced>,
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
    fn count(&self, d: Dim, chunk: Chunk) -> u32 {
        let n_tok = chunk.n_tok;
        match d {
            Dim::Fixed(n) => n,
            Dim::Tokens => n_tok,
            Dim::DenseTiles => n_tok.div_ceil(self.tile),
            Dim::RoutedTiles => ops::max_tiles(n_tok * self.n_used, self.n_expert, self.tile),
            Dim::HeadRows(n_head) => ops::attention_coop_groups(n_tok, n_head),
            Dim::Splits => chunk.splits,
        }
    }

    /// The chunk of `n_tok` tokens (at most `ubatch`) that starts at
    /// position `pos`: its tokens' attention splits (`ops::prefill_splits`,
    /// the same for all of them; each token's step record carries it).
    pub fn chunk(&self, n_tok: usize, pos: usize) -> Chunk {
        let n = n_tok.clamp(1, self.ubatch) as u32;
        let n_pos = pos.saturating_add(n_tok);
        let splits =
            ops::prefill_splits(self.coop_attention, n, self.n_head, n_pos, self.split_rows);
        Chunk { n_tok: n, splits }
    }

    /// Write the per-chunk tables: the dense tiles, the grouping's and the
    /// attention's params. (Embeddings and steps are the engine's.)
    pub fn write_chunk(&self, gpu: &Gpu, chunk: Chunk) {
        let n_tok = chunk.n_tok;
        let tiles = ops::dense_tiles(n_tok, self.tile);
        gpu.queue
            .write_buffer(&self.dense_tiles, 0, bytemuck::cast_slice(&tiles));
        let n_assign = n_tok * self.n_used;
        let gp = ops::MoeGroupParams {
            n_assign,
            n_expert: self.n_expert,
            tile: self.tile,
            max_tiles: ops::max_tiles(n_assign, self.n_expert, self.tile),
            small: self.small_tile,
            _pad: [0; 3],
        };
        gpu.queue
            .write_buffer(&self.group_params, 0, bytemuck::bytes_of(&gp));
        let split_stride = chunk.splits;
        let (buf, ap) = &self.attn;
        let ap = ops::AttentionParams {
            split_stride,
            ..*ap
        };
        gpu.queue.write_buffer(buf, 0, bytemuck::bytes_of(&ap));
        let (buf, ap) = &self.attn_coop;
        let ap = ops::AttentionCoopParams {
            n_tok,
            split_stride,
            ..*ap
        };
        gpu.queue.write_buffer(buf, 0, bytemuck::bytes_of(&ap));
        let (buf, ap) = &self.attn_merge;
        let ap = ops::AttentionMergeParams {
            split_stride,
            ..*ap
        };
        gpu.queue.write_buffer(buf, 0, bytemuck::bytes_of(&ap));
    }

    /// Record `op` with its grid for `chunk`, if it runs in it.
    fn record_one(&self, op: &Op, pass: &mut wgpu::ComputePass<'_>, chunk: Chunk) {
        if op.when.holds(chunk) {
            op.d.record_grid(pass, op.grid.map(|d| self.count(d, chunk)));
        }
    }

    /// Record part `part` (< PARTS) of the layer stack for `chunk` (after
    /// `write_chunk`): the ops between `PART_DIVS`' cuts. Submit each part
    /// but the last on its own, so the GPU runs it while the host records
    /// the next.
    pub fn record(&self, pass: &mut wgpu::ComputePass<'_>, chunk: Chunk, part: usize) {
        for op in &self.ops[part_ops(self.ops.len(), part)] {
            self.record_one(op, pass, chunk);
        }
    }

    /// Record only op `i` of the plan, if it runs in `chunk` (profiling,
    /// tracing).
    pub fn record_op(&self, pass: &mut wgpu::ComputePass<'_>, i: usize, chunk: Chunk) {
        self.record_one(&self.ops[i], pass, chunk);
    }

    /// Op `i`'s label without the layer, and its kernel.
    pub fn op_info(&self, i: usize) -> (&str, &'static str) {
        (self.ops[i].d.op(), self.ops[i].d.kernel.name())
    }

    /// The plan's ops that run in `chunk`, by index.
    pub fn chunk_ops(&self, chunk: Chunk) -> Vec<usize> {
        (0..self.ops.len())
            .filter(|&i| self.ops[i].when.holds(chunk))
            .collect()
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
        let xn = &self.result_norm;
        let logits = gpu.scratch_f32("pf.logits", &[u, c.n_vocab])?;
        let mut b = Builder {
            gpu,
            pipes,
            ops: Vec::new(),
            dense_tiles: &self.dense_tiles,
            identity: &self.identity,
            routed_tiles: &self.routed_tiles,
            routed_order: &self.routed_order,
            routed_rows: &self.routed_rows,
            coop_attention: self.coop_attention,
            low: Lowered::default(),
            shexp_act: Vec::new(),
        };
        b.low.lower(&[ResultNorm]);
        b.push(
            "result_norm".into(),
            Kernel::RmsNorm,
            &RmsNormBindings {
                p: &self.norm_embd,
                x: &self.x,
                g: &w.output_norm,
                y: xn,
            },
            ROWS,
        )?;
        b.low.lower(&[ResultOutput]);
        b.matmul(&w.output, Mm::new(xn, c.n_embd, &logits, c.n_vocab))?;
        let steps = recipe::head();
        b.low
            .check("the prefill head", 0, &steps, &[ResultOutput])?;
        let readback = gpu.readback("pf.logits readback", logits.size())?;
        Ok(Head {
            ops: b.ops,
            logits,
            readback,
        })
    }

    /// Record `head` for `chunk` (after `record`).
    pub fn record_head(&self, head: &Head, pass: &mut wgpu::ComputePass<'_>, chunk: Chunk) {
        for op in &head.ops {
            self.record_one(op, pass, chunk);
        }
    }

    /// Ops in the plan (`record_op`'s indices).
    pub fn ops(&self) -> usize {
        self.ops.len()
    }

    /// `chunk`'s dispatches in recording order (for counting barriers).
    pub fn dispatch_list(&self, chunk: Chunk) -> impl Iterator<Item = &Dispatch> {
        self.ops
            .iter()
            .filter(move |op| op.when.holds(chunk))
            .map(|op| &op.d)
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
    /// Each assignment's row of the experts' down output (its tile slot).
    routed_rows: &'a wgpu::Buffer,
    /// The attention runs on attention_coop.wgsl: decided once in `build`,
    /// where the split buffers are sized for it.
    coop_attention: bool,
    low: Lowered,
    /// Each MoE layer's shared-expert activations (`Builder::moe`).
    shexp_act: Vec<wgpu::Buffer>,
}

impl Lowers for Builder<'_> {
    fn low(&mut self) -> &mut Lowered {
        &mut self.low
    }
}

impl Builder<'_> {
    fn push(
        &mut self,
        label: String,
        k: Kernel,
        bufs: &dyn Bindings,
        grid: [Dim; 3],
    ) -> Result<()> {
        let d = Dispatch::new(self.gpu, self.pipes, k, bufs, [1, 1, 1])?.named(label);
        self.add(d, grid);
        Ok(())
    }

    /// Append `d` with its grid, lowering the steps last given to
    /// `low.lower`.
    fn add(&mut self, d: Dispatch, grid: [Dim; 3]) {
        self.add_when(d, grid, When::Always);
    }

    /// `add`, for the chunks `when` holds in.
    fn add_when(&mut self, d: Dispatch, grid: [Dim; 3], when: When) {
        self.low.added(&d);
        self.ops.push(Op { d, grid, when });
    }
}

/// One row per token of the chunk.
const ROWS: [Dim; 3] = [Dim::Tokens, Dim::Fixed(1), Dim::Fixed(1)];

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
    let (n_expert, n_used, _, _) = c.moe_dims();
    let n_used = n_used.max(1);
    let n_assign = u
        .checked_mul(n_used)
        .and_then(|n| u32::try_from(n).ok())
        .ok_or_else(|| Error::InvalidArgument(format!("ubatch {u} is too large")))?;
    let tile = ops::matmul_tile(gpu.caps.coop);
    let max_tiles = ops::max_tiles(n_assign, n_expert.max(1) as u32, tile);
    let k = Splits::new(c, gpu.caps.coop, u);
    let coop_attention = ops::attention_coop_fits(gpu, c.n_embd_head_qk_rope);
    let split_rows = ops::prefill_split_rows(coop_attention, u as u32);
    let slot_rows = ops::routed_slot_rows(max_tiles, tile) as usize;
    let a = Acts::new(gpu, c, u, n_used, (split_rows as usize, slot_rows), k)?;
    let p = Uniforms::new(gpu, c, u, n_used, k, a.kv_off);
    let routed_tiles = gpu.scratch_f32("pf.tiles", &[4, max_tiles as usize])?;
    let routed_order = gpu.scratch_f32("pf.order", &[u, n_used])?;
    let routed_rows = gpu.scratch_f32("pf.rows", &[u, n_used])?;
    let dense_tiles = gpu.scratch_f32("pf.dense_tiles", &[4, u.div_ceil(tile as usize)])?;
    let ids: Vec<u32> = (0..u as u32).collect();
    let identity = gpu.storage("pf.identity", bytemuck::cast_slice(&ids))?;
    let mut b = Builder {
        gpu,
        pipes,
        ops: Vec::new(),
        dense_tiles: &dense_tiles,
        identity: &identity,
        routed_tiles: &routed_tiles,
        routed_order: &routed_order,
        routed_rows: &routed_rows,
        coop_attention,
        low: Lowered::default(),
        shexp_act: Vec::new(),
    };
    b.layers(c, w, caches, &a, &p)?;
    let Builder {
        ops,
        low,
        shexp_act,
        ..
    } = b;
    Ok(Prefill {
        ubatch,
        tile,
        small_tile: ops::matmul_small_tile(gpu.caps.coop),
        coop_attention,
        split_rows,
        n_head: c.n_head as u32,
        ops,
        n_used: n_used as u32,
        n_expert: c.n_expert.max(1) as u32,
        tokens: a.tokens,
        x: a.x,
        steps: a.steps,
        dense_tiles,
        identity,
        routed_tiles,
        routed_order,
        routed_rows,
        group_params: p.group,
        attn: (p.attn, ops::AttentionParams::new(c, 1)),
        attn_coop: (p.attn_coop, ops::AttentionCoopParams::new(c, 0, 1)),
        attn_merge: (p.attn_merge, ops::AttentionMergeParams::new(c, 1)),
        norm_embd: p.norm_embd,
        result_norm: a.result_norm,
        traced: low.traced,
        _shexp_act: shexp_act,
    })
}

impl Builder<'_> {
    /// The embedding gather and every block, each checked against its
    /// recipe.
    fn layers(
        &mut self,
        c: &Config,
        w: &ResidentWeights,
        caches: &[wgpu::Buffer],
        a: &Acts,
        p: &Uniforms,
    ) -> Result<()> {
        let recipe = Recipe::new(c);
        self.low.lower(&[InpEmbd]);
        for d in ops::embed(self.gpu, self.pipes, &w.token_embd, &a.tokens, &a.x)? {
            let per_token = Dim::Fixed(d.workgroups[0]);
            self.add(d, [per_token, Dim::Tokens, Dim::Fixed(1)]);
        }
        self.low.leaves(InpEmbd, &a.x, c.n_embd);
        self.low
            .check("the prefill input", 0, &recipe.input, &[InpEmbd])?;
        for (il, (lw, cache)) in w.layers.iter().zip(caches).enumerate() {
            let start = self.ops.len();
            self.low.block(Some(il));
            self.attention(c, a, p, il, lw, cache)?;
            let norm = RmsNormBindings {
                p: &p.norm_embd,
                x: &a.x,
                g: &lw.ffn_norm,
                y: &a.h2,
            };
            self.lowered(&[FfnNorm], &a.h2, c.n_embd, |b| {
                b.push(format!("blk.{il}.ffn_norm"), Kernel::RmsNorm, &norm, ROWS)
            })?;
            match &lw.ffn {
                FfnWeights::Dense(d) => self.ffn(a, d, c.n_embd, c.n_ff)?,
                FfnWeights::Moe(m) => self.moe(c, a, p, il, m)?,
            }
            let what = format!("the prefill blk.{il}");
            self.low.check(&what, start, &recipe.blocks[il], &[LOut])?;
        }
        Ok(())
    }

    /// A dense FFN over the normed rows: gate+up, down (+ residual).
    fn ffn(&mut self, a: &Acts, d: &GateUpDown, e: usize, n_ff: usize) -> Result<()> {
        self.gate_up(a, d, e, (&a.act, n_ff))?;
        self.down(a, d, e, (&a.act, n_ff), &[FfnOut, LOut])
    }

    /// A dense or shared FFN's gate+up over the normed rows into `act`
    /// (`n_ff` floats a token).
    fn gate_up(
        &mut self,
        a: &Acts,
        d: &GateUpDown,
        e: usize,
        act: (&wgpu::Buffer, usize),
    ) -> Result<()> {
        let (y, n_ff) = act;
        let gate_up = Mm {
            gate_up: true,
            ..Mm::new(&a.h2, e, y, n_ff)
        };
        self.lowered(&[FfnGate, FfnUp, FfnSwiglu], y, n_ff, |b| {
            b.matmul(&d.gate_up, gate_up)
        })
    }

    /// Its down from `act`, added into the residual: the recipe's `steps`.
    fn down(
        &mut self,
        a: &Acts,
        d: &GateUpDown,
        e: usize,
        act: (&wgpu::Buffer, usize),
        steps: &'static [Name],
    ) -> Result<()> {
        let down = Mm {
            accum: true,
            ..Mm::new(act.0, act.1, &a.x, e)
        };
        self.lowered(steps, &a.x, e, |b| b.matmul(&d.down, down))
    }

    /// A MoE block's routing over the chunk: the router logits, the
    /// selection, and each expert's tokens as tiles (moe_group).
    fn route(
        &mut self,
        c: &Config,
        a: &Acts,
        p: &Uniforms,
        il: usize,
        m: &MoeWeights,
    ) -> Result<()> {
        let n_used = c.n_expert_used.max(1);
        let name = |op: &str| format!("blk.{il}.{op}");
        let e = c.n_embd;
        // The logits are partial sums where they are split: the router adds them.
        self.low.lower(&[FfnMoeLogits]);
        let y = (&a.moe_logits, c.n_expert);
        let logits = Mm::split_k(&a.h2, e, y, a.k.logits, a.k.plane(c.n_expert));
        self.matmul(&m.gate_inp, logits)?;
        let router = RouterBindings {
            p: &p.router,
            logits: &a.moe_logits,
            bias: m.exp_probs_b.as_ref().unwrap_or(&a.zero_bias),
            sel: &a.sel,
            sel_w: &a.sel_w,
        };
        let d = Dispatch::new(self.gpu, self.pipes, Kernel::Router, &router, [1, 1, 1])?;
        let steps = &[FfnMoeProbs, FfnMoeTopk, FfnMoeWeights];
        self.lowered(steps, &a.sel_w, n_used, |b| {
            b.add(d.named(name("router")), ROWS);
            Ok(())
        })?;
        // The lowering's own step: each expert's tokens as tiles.
        let group = MoeGroupBindings {
            p: &p.group,
            sel: &a.sel,
            order: self.routed_order,
            tiles: self.routed_tiles,
            rows: self.routed_rows,
        };
        self.low.lower(&[]);
        self.push(
            name("moe_group"),
            Kernel::MoeGroup,
            &group,
            [Dim::Fixed(1); 3],
        )
    }

    /// A MoE block's FFN over the chunk: the routing (`route`), routed
    /// gate+up (beside the shared expert's) and down over the groups'
    /// tiles, their weighted sum (+ residual), the shared down.
    fn moe(&mut self, c: &Config, a: &Acts, p: &Uniforms, il: usize, m: &MoeWeights) -> Result<()> {
        self.route(c, a, p, il, m)?;
        let n_used = c.n_expert_used.max(1);
        let name = |op: &str| format!("blk.{il}.{op}");
        let (e, n_ff) = (c.n_embd, c.n_ff_exp);
        let gate_up = Mm {
            gate_up: true,
            routed: true,
            x_div: n_used as u32,
            ..Mm::new(&a.h2, e, &a.act_r, n_ff)
        };
        let steps = &[FfnMoeGate, FfnMoeUp, FfnMoeSwiglu];
        self.lowered(steps, &a.act_r, n_used * n_ff, |b| {
            b.matmul(&m.gate_up_exps, gate_up)
        })?;
        // The shared expert's gate+up runs beside the experts': its
        // workgroups fill the SMs the routed tiles' last wave leaves idle.
        // Its output is a buffer of this layer's, first used here, so
        // wgpu puts no barrier between the two.
        let shared = match &m.shared {
            Some(sh) => {
                let n_sh = n_ff * c.n_expert_shared;
                let act = self
                    .gpu
                    .scratch_f32(&format!("pf.act_shexp.{il}"), &[a.k.plane(n_sh)])?;
                self.gate_up(a, sh, e, (&act, n_sh))?;
                Some((sh, act, n_sh))
            }
            None => None,
        };
        let down = Mm {
            routed: true,
            ..Mm::new(&a.act_r, n_ff, &a.part, e)
        };
        self.lowered(&[FfnMoeDown], &a.part, n_used * e, |b| {
            b.matmul(&m.down_exps, down)
        })?;
        let grid = [
            Dim::Fixed(ops::moe_sum_groups(e)),
            Dim::Tokens,
            Dim::Fixed(1),
        ];
        let sum = MoeSumBindings {
            p: &p.sum,
            part: &a.part,
            sel_w: &a.sel_w,
            y: &a.x,
            rows: self.routed_rows,
        };
        // The weighted sum adds into the residual; the shared expert's
        // down adds the rest.
        let steps: &'static [Name] = match m.shared {
            Some(_) => &[FfnMoeWeighted, FfnMoeOut],
            None => &[FfnMoeWeighted, FfnMoeOut, LOut],
        };
        self.low.lower(steps);
        self.push(name("moe_sum"), Kernel::MoeSum, &sum, grid)?;
        match shared {
            Some((sh, act, n_sh)) => {
                self.down(a, sh, e, (&act, n_sh), &[FfnShexp, FfnOut, LOut])?;
                self.shexp_act.push(act);
                Ok(())
            }
            None => {
                self.low.leaves(LOut, &a.x, e);
                Ok(())
            }
        }
    }
}
