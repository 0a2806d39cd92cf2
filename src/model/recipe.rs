//! The model's computation stated once, as llama.cpp's deepseek2 graph
//! computes it: the input (the token's embedding row), each block (dense or
//! MoE feed-forward; q-LoRA or direct q) and the output head as ordered
//! lists of steps over named intermediates. Names are llama.cpp's callback
//! names (`attn_norm`, `kv_cmpr`, `ffn_moe_logits`, `l_out`, …), weights
//! the model's own (`model::Weights`, which `gpu::resident` keeps).
//!
//! The GPU plans lower this recipe, the decode plan into one token's
//! dispatches and the prefill plan into a chunk's. A lowering may fuse
//! adjacent steps into one dispatch (a norm into the product that reads
//! it, a residual add into the product that feeds it) and may order
//! independent steps as it likes, but each dispatch says which steps it
//! computes and `check` holds every lowering to the recipe when a plan is
//! built: each needed step computed, each after its inputs. Traced
//! intermediates take their names from here.
//!
//! It lives in `model`, not `gpu`: it is the model's graph and names no GPU
//! type (another backend would lower the same steps). The CPU reference
//! does not read it: it stays an oracle written independently from the
//! model's spec, so a mistake here cannot hide in both.

use super::Config;

/// A named intermediate of a block, the input or the head (one row per
/// token). Within a block the name is the value of that block.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Name {
    /// The token ids (the model's input).
    Token,
    InpEmbd,
    /// The residual stream entering a block: `inp_embd` or the previous
    /// block's `l_out` (llama.cpp's `inpL`).
    Inp,
    AttnNorm,
    /// q's low-rank projection and its norm (llama.cpp calls these `q`
    /// too; glmw's names tell the three apart, as the reference's trace
    /// does).
    QA,
    QANorm,
    Q,
    KvCmprPe,
    KvCmpr,
    KPe,
    /// The block's latent cache row [kv_cmpr ‖ k_pe] at the token's position.
    CacheK,
    QPe,
    QNopeAbsorbed,
    /// Attention's per-head result in the latent space (before attn_v_b).
    Kqv,
    KqvOut,
    AttnOut,
    FfnInp,
    FfnNorm,
    /// A dense block's, or the shared expert's, gate, up and silu(gate)·up.
    FfnGate,
    FfnUp,
    FfnSwiglu,
    FfnMoeLogits,
    FfnMoeProbs,
    FfnMoeTopk,
    FfnMoeWeights,
    FfnMoeGate,
    FfnMoeUp,
    FfnMoeSwiglu,
    FfnMoeDown,
    FfnMoeWeighted,
    FfnMoeOut,
    FfnShexp,
    FfnOut,
    LOut,
    ResultNorm,
    ResultOutput,
    /// The top-k (token, logit) pairs the sampler draws from (glmw's: llama.cpp
    /// samples on the CPU).
    Candidates,
}

impl Name {
    /// llama.cpp's callback name (GGML_SCHED / eval-callback dumps use it
    /// with `-{layer}` appended, as the reference's trace does).
    pub fn name(self) -> &'static str {
        use Name::*;
        match self {
            Token => "inp_tokens",
            InpEmbd => "inp_embd",
            Inp => "inpL",
            AttnNorm => "attn_norm",
            QA => "q_a",
            QANorm => "q_a_norm",
            Q => "q",
            KvCmprPe => "kv_cmpr_pe",
            KvCmpr => "kv_cmpr",
            KPe => "k_pe",
            CacheK => "cache_k",
            QPe => "q_pe",
            QNopeAbsorbed => "q_nope_absorbed",
            Kqv => "kqv",
            KqvOut => "kqv_out",
            AttnOut => "attn_out",
            FfnInp => "ffn_inp",
            FfnNorm => "ffn_norm",
            FfnGate => "ffn_gate",
            FfnUp => "ffn_up",
            FfnSwiglu => "ffn_swiglu",
            FfnMoeLogits => "ffn_moe_logits",
            FfnMoeProbs => "ffn_moe_probs",
            FfnMoeTopk => "ffn_moe_topk",
            FfnMoeWeights => "ffn_moe_weights",
            FfnMoeGate => "ffn_moe_gate",
            FfnMoeUp => "ffn_moe_up",
            FfnMoeSwiglu => "ffn_moe_swiglu",
            FfnMoeDown => "ffn_moe_down",
            FfnMoeWeighted => "ffn_moe_weighted",
            FfnMoeOut => "ffn_moe_out",
            FfnShexp => "ffn_shexp",
            FfnOut => "ffn_out",
            LOut => "l_out",
            ResultNorm => "result_norm",
            ResultOutput => "result_output",
            Candidates => "candidates",
        }
    }
}

/// A weight a step reads, by the model's tensor name (`name`: the GGUF
/// tensor is `blk.N.{name}.weight`, or `.bias` for `exp_probs_b`;
/// `model::LayerWeights` and `gpu::resident` keep each in the field of
/// that name, some without its `attn_` / `ffn_` prefix: `kv_a_mqa`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Weight {
    TokenEmbd,
    AttnNorm,
    AttnQA,
    AttnQANorm,
    AttnQB,
    AttnQ,
    AttnKvAMqa,
    AttnKvANorm,
    AttnKB,
    AttnVB,
    AttnOutput,
    FfnNorm,
    FfnGate,
    FfnUp,
    FfnDown,
    FfnGateInp,
    /// The selection bias (zeros where the file has none).
    ExpProbsB,
    FfnGateExps,
    FfnUpExps,
    FfnDownExps,
    FfnGateShexp,
    FfnUpShexp,
    FfnDownShexp,
    OutputNorm,
    Output,
}

impl Weight {
    /// The tensor's name without `blk.N.` and its suffix.
    pub fn name(self) -> &'static str {
        use Weight::*;
        match self {
            TokenEmbd => "token_embd",
            AttnNorm => "attn_norm",
            AttnQA => "attn_q_a",
            AttnQANorm => "attn_q_a_norm",
            AttnQB => "attn_q_b",
            AttnQ => "attn_q",
            AttnKvAMqa => "attn_kv_a_mqa",
            AttnKvANorm => "attn_kv_a_norm",
            AttnKB => "attn_k_b",
            AttnVB => "attn_v_b",
            AttnOutput => "attn_output",
            FfnNorm => "ffn_norm",
            FfnGate => "ffn_gate",
            FfnUp => "ffn_up",
            FfnDown => "ffn_down",
            FfnGateInp => "ffn_gate_inp",
            ExpProbsB => "exp_probs_b",
            FfnGateExps => "ffn_gate_exps",
            FfnUpExps => "ffn_up_exps",
            FfnDownExps => "ffn_down_exps",
            FfnGateShexp => "ffn_gate_shexp",
            FfnUpShexp => "ffn_up_shexp",
            FfnDownShexp => "ffn_down_shexp",
            OutputNorm => "output_norm",
            Output => "output",
        }
    }
}

/// What a step computes from its inputs (in `Step::ins` order) and weight.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// The weight's rows named by the token ids.
    GetRows,
    /// x / rms(x) · gain. kv_cmpr: over the first n_lora_kv values of its
    /// input only.
    RmsNorm,
    /// W · x.
    MatMul,
    /// W_h · x_h for each head h (attn_k_b over q's first n_embd_head_qk_nope
    /// per head, attn_v_b over kqv).
    MatMulHeads,
    /// W_e · x for each expert e of `ffn_moe_topk` (llama.cpp's mul_mat_id).
    MatMulId,
    /// Rotary embedding at the token's position (YaRN where the model says
    /// so) of the last n_embd_head_qk_rope values of the input (per head for
    /// q).
    Rope,
    /// Write the inputs, concatenated, into the block's cache at the token's
    /// position.
    Store,
    /// Per head: softmax(kq_scale · [q_nope_absorbed ‖ q_pe] · rowsᵀ) · rows
    /// over the cache rows up to the token (values: each row's first
    /// n_lora_kv entries).
    Attention,
    Add,
    /// silu(gate) · up.
    Swiglu,
    /// The gating function of the logits (sigmoid or softmax).
    Gating,
    /// The k largest entries (plus the selection bias, for the weight that
    /// has one), ties to the lower index.
    TopK,
    /// The probabilities of the chosen experts, renormalised and scaled as
    /// the model says (llama.cpp's ffn_moe_weights, _norm and _scaled in
    /// one).
    ExpertWeights,
    /// Each expert's output times its weight.
    Weighted,
    /// The sum over the chosen experts.
    SumExperts,
}

/// One step: `out` = `op`(`ins`, `weight`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Step {
    pub out: Name,
    pub op: Op,
    pub ins: &'static [Name],
    pub weight: Option<Weight>,
}

const fn step(out: Name, op: Op, ins: &'static [Name], weight: Option<Weight>) -> Step {
    Step {
        out,
        op,
        ins,
        weight,
    }
}

/// A whole model: the input, one step list per block, the head.
#[derive(Clone, Debug)]
pub struct Recipe {
    pub input: Vec<Step>,
    pub blocks: Vec<Vec<Step>>,
    pub head: Vec<Step>,
}

impl Recipe {
    pub fn new(c: &Config) -> Recipe {
        Recipe {
            input: input(),
            blocks: (0..c.n_layer).map(|il| block(Kind::of(c, il))).collect(),
            head: head(),
        }
    }
}

/// The variants of a block the config allows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Kind {
    /// q through the low-rank q_a / q_a_norm / q_b (GLM-4.7-Flash), else
    /// one attn_q (DeepSeek-V2-Lite).
    pub q_lora: bool,
    pub ffn: FfnKind,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FfnKind {
    Dense,
    Moe { shared: bool },
}

impl Kind {
    /// Block `il`'s kind under `c`.
    pub fn of(c: &Config, il: usize) -> Kind {
        Kind {
            q_lora: c.n_lora_q > 0,
            ffn: match c.is_moe_layer(il) {
                true => FfnKind::Moe {
                    shared: c.n_expert_shared > 0,
                },
                false => FfnKind::Dense,
            },
        }
    }
}

/// The token's embedding row.
pub fn input() -> Vec<Step> {
    use Name::*;
    vec![step(
        InpEmbd,
        Op::GetRows,
        &[Token],
        Some(Weight::TokenEmbd),
    )]
}

/// A block of kind `k`: its attention half, then its dense or MoE
/// feed-forward half. Reads `Inp`, leaves `LOut`.
pub fn block(k: Kind) -> Vec<Step> {
    let mut out = attention(k.q_lora);
    match k.ffn {
        FfnKind::Dense => out.extend(dense_ffn()),
        FfnKind::Moe { shared } => out.extend(moe_ffn(shared)),
    }
    out
}

/// Multi-head latent attention, absorbed form (llama.cpp's `is_mla`).
fn attention(q_lora: bool) -> Vec<Step> {
    use Name::*;
    use Op::*;
    use Weight as W;
    let mut out = vec![step(AttnNorm, RmsNorm, &[Inp], Some(W::AttnNorm))];
    if q_lora {
        out.extend([
            step(QA, MatMul, &[AttnNorm], Some(W::AttnQA)),
            step(QANorm, RmsNorm, &[QA], Some(W::AttnQANorm)),
            step(Q, MatMul, &[QANorm], Some(W::AttnQB)),
        ]);
    } else {
        out.push(step(Q, MatMul, &[AttnNorm], Some(W::AttnQ)));
    }
    out.extend([
        step(KvCmprPe, MatMul, &[AttnNorm], Some(W::AttnKvAMqa)),
        step(KvCmpr, RmsNorm, &[KvCmprPe], Some(W::AttnKvANorm)),
        step(KPe, Rope, &[KvCmprPe], None),
        step(CacheK, Store, &[KvCmpr, KPe], None),
        step(QPe, Rope, &[Q], None),
        step(QNopeAbsorbed, MatMulHeads, &[Q], Some(W::AttnKB)),
        step(Kqv, Attention, &[QNopeAbsorbed, QPe, CacheK], None),
        step(KqvOut, MatMulHeads, &[Kqv], Some(W::AttnVB)),
        step(AttnOut, MatMul, &[KqvOut], Some(W::AttnOutput)),
        step(FfnInp, Add, &[AttnOut, Inp], None),
        step(FfnNorm, RmsNorm, &[FfnInp], Some(W::FfnNorm)),
    ]);
    out
}

/// A SwiGLU feed-forward's gate, up and product (dense or shared expert).
fn swiglu(gate: Weight, up: Weight) -> [Step; 3] {
    use Name::*;
    [
        step(FfnGate, Op::MatMul, &[FfnNorm], Some(gate)),
        step(FfnUp, Op::MatMul, &[FfnNorm], Some(up)),
        step(FfnSwiglu, Op::Swiglu, &[FfnGate, FfnUp], None),
    ]
}

fn dense_ffn() -> Vec<Step> {
    use Name::*;
    let mut out = swiglu(Weight::FfnGate, Weight::FfnUp).to_vec();
    out.extend([
        step(FfnOut, Op::MatMul, &[FfnSwiglu], Some(Weight::FfnDown)),
        step(LOut, Op::Add, &[FfnOut, FfnInp], None),
    ]);
    out
}

/// llama.cpp's build_moe_ffn, then the shared expert (if the model has
/// one) added to the routed experts' sum.
fn moe_ffn(shared: bool) -> Vec<Step> {
    use Name::*;
    use Op::*;
    use Weight as W;
    let mut out = vec![
        step(FfnMoeLogits, MatMul, &[FfnNorm], Some(W::FfnGateInp)),
        step(FfnMoeProbs, Gating, &[FfnMoeLogits], None),
        step(FfnMoeTopk, TopK, &[FfnMoeProbs], Some(W::ExpProbsB)),
        step(
            FfnMoeWeights,
            ExpertWeights,
            &[FfnMoeProbs, FfnMoeTopk],
            None,
        ),
        step(
            FfnMoeGate,
            MatMulId,
            &[FfnNorm, FfnMoeTopk],
            Some(W::FfnGateExps),
        ),
        step(
            FfnMoeUp,
            MatMulId,
            &[FfnNorm, FfnMoeTopk],
            Some(W::FfnUpExps),
        ),
        step(FfnMoeSwiglu, Swiglu, &[FfnMoeGate, FfnMoeUp], None),
        step(
            FfnMoeDown,
            MatMulId,
            &[FfnMoeSwiglu, FfnMoeTopk],
            Some(W::FfnDownExps),
        ),
        step(FfnMoeWeighted, Weighted, &[FfnMoeDown, FfnMoeWeights], None),
        step(FfnMoeOut, SumExperts, &[FfnMoeWeighted], None),
    ];
    if shared {
        out.extend(swiglu(W::FfnGateShexp, W::FfnUpShexp));
        out.extend([
            step(FfnShexp, MatMul, &[FfnSwiglu], Some(W::FfnDownShexp)),
            step(FfnOut, Add, &[FfnMoeOut, FfnShexp], None),
            step(LOut, Add, &[FfnOut, FfnInp], None),
        ]);
    } else {
        out.push(step(LOut, Add, &[FfnMoeOut, FfnInp], None));
    }
    out
}

/// The output head over the last block's `l_out`: norm, logits, the
/// candidates.
pub fn head() -> Vec<Step> {
    use Name::*;
    vec![
        step(ResultNorm, Op::RmsNorm, &[LOut], Some(Weight::OutputNorm)),
        step(
            ResultOutput,
            Op::MatMul,
            &[ResultNorm],
            Some(Weight::Output),
        ),
        step(Candidates, Op::TopK, &[ResultOutput], None),
    ]
}

/// Check a lowering of `steps`: `covers` lists, dispatch by dispatch in
/// recording order, the steps each computes (by output name, fused steps
/// in their order; empty for a dispatch of the lowering's own, such as a
/// regrouping). Every step that `wanted` depends on must be computed, each
/// after its inputs (or earlier in the same dispatch); a step may be
/// computed more than once (a norm fused into each product that reads it).
pub fn check(steps: &[Step], covers: &[&[Name]], wanted: &[Name]) -> Result<(), String> {
    let made = |n: &Name| steps.iter().any(|s| s.out == *n);
    let mut have: Vec<Name> = steps
        .iter()
        .flat_map(|s| s.ins.iter().copied())
        .filter(|n| !made(n))
        .collect();
    for (i, names) in covers.iter().enumerate() {
        for &n in names.iter() {
            let s = steps.iter().find(|s| s.out == n).ok_or_else(|| {
                format!("dispatch {i} computes {}, which no step makes", n.name())
            })?;
            if let Some(m) = s.ins.iter().find(|m| !have.contains(m)) {
                return Err(format!(
                    "dispatch {i} computes {} before its input {}",
                    n.name(),
                    m.name()
                ));
            }
            have.push(n);
        }
    }
    let mut need: Vec<Name> = wanted.to_vec();
    while let Some(n) = need.pop() {
        if let Some(s) = steps.iter().find(|s| s.out == n) {
            if !have.contains(&n) {
                return Err(format!("no dispatch computes {}", n.name()));
            }
            need.extend(s.ins.iter().copied());
        }
    }
    Ok(())
}

/// Whether a dispatch computing `covers` may read the matrix `tensor`
/// (named without `blk.N.` and `.weight`): the weight of one of those
/// steps, or a gate and its up merged into one matrix as llama.cpp names
/// the merged tensor (`ffn_gate_up_exps`), both steps being there.
pub fn reads(steps: &[Step], covers: &[Name], tensor: &str) -> bool {
    let weights: Vec<Weight> = covers
        .iter()
        .filter_map(|n| steps.iter().find(|s| s.out == *n)?.weight)
        .collect();
    let merged = |gate: Weight, up: Weight| {
        let g = gate.name();
        g.contains("gate")
            && g.replacen("gate", "up", 1) == up.name()
            && g.replacen("gate", "gate_up", 1) == tensor
    };
    weights
        .iter()
        .any(|&w| w.name() == tensor || weights.iter().any(|&u| merged(w, u)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use Name::*;

    fn kinds() -> Vec<Kind> {
        let ffns = [
            FfnKind::Dense,
            FfnKind::Moe { shared: false },
            FfnKind::Moe { shared: true },
        ];
        [false, true]
            .into_iter()
            .flat_map(|q_lora| ffns.map(|ffn| Kind { q_lora, ffn }))
            .collect()
    }

    /// Each step reads only the list's inputs or earlier steps, and each
    /// name is made once.
    #[test]
    fn every_recipe_is_in_dependency_order() {
        let blocks = kinds().into_iter().map(block);
        for steps in [input(), head()].into_iter().chain(blocks) {
            let mut have = vec![Token, Inp, LOut];
            for s in &steps {
                for i in s.ins {
                    assert!(
                        have.contains(i),
                        "{:?} reads {i:?} before it is made",
                        s.out
                    );
                }
                assert!(
                    !have.contains(&s.out) || s.out == LOut,
                    "{:?} made twice",
                    s.out
                );
                have.push(s.out);
            }
        }
    }

    #[test]
    fn kinds_choose_the_steps() {
        for k in kinds() {
            let b = block(k);
            let has = |w: Weight| b.iter().any(|s| s.weight == Some(w));
            assert_eq!(has(Weight::AttnQ), !k.q_lora);
            assert_eq!(has(Weight::AttnQB), k.q_lora);
            assert_eq!(has(Weight::FfnGateInp), k.ffn != FfnKind::Dense);
            assert_eq!(
                has(Weight::FfnDownShexp),
                k.ffn == FfnKind::Moe { shared: true }
            );
            assert_eq!(b.last().map(|s| s.out), Some(LOut));
        }
    }

    #[test]
    fn steps_in_recipe_order_one_per_dispatch_are_a_lowering() {
        for steps in kinds().into_iter().map(block) {
            let covers: Vec<[Name; 1]> = steps.iter().map(|s| [s.out]).collect();
            let covers: Vec<&[Name]> = covers.iter().map(|v| &v[..]).collect();
            assert_eq!(check(&steps, &covers, &[LOut]), Ok(()));
            // Without its last dispatch the block leaves no l_out.
            let short = &covers[..covers.len() - 1];
            assert!(check(&steps, short, &[LOut]).is_err());
        }
    }

    #[test]
    fn a_missing_or_early_step_is_named() {
        let h = head();
        let early: [&[Name]; 2] = [&[ResultOutput], &[ResultNorm]];
        assert_eq!(
            check(&h, &early, &[Candidates]),
            Err("dispatch 0 computes result_output before its input result_norm".into())
        );
        let fused: [&[Name]; 1] = [&[ResultNorm, ResultOutput]];
        assert_eq!(check(&h, &fused, &[ResultOutput]), Ok(()));
        assert_eq!(
            check(&h, &fused, &[Candidates]),
            Err("no dispatch computes candidates".into())
        );
        let unknown: [&[Name]; 1] = [&[FfnOut]];
        assert!(check(&h, &unknown, &[])
            .unwrap_err()
            .contains("no step makes"));
    }

    #[test]
    fn a_dispatch_reads_its_steps_weights_or_gate_and_up_merged() {
        let b = block(Kind {
            q_lora: true,
            ffn: FfnKind::Moe { shared: true },
        });
        assert!(reads(&b, &[AttnNorm, QA], "attn_q_a"));
        assert!(!reads(&b, &[AttnNorm, QA], "attn_q_b"));
        let gate_up = [FfnMoeGate, FfnMoeUp, FfnMoeSwiglu];
        assert!(reads(&b, &gate_up, "ffn_gate_up_exps"));
        assert!(!reads(&b, &gate_up[..1], "ffn_gate_up_exps"));
        assert!(reads(&b, &[FfnGate, FfnUp], "ffn_gate_up_shexp"));
        assert!(!reads(&b, &[FfnGate, FfnUp], "ffn_gate_up"));
        assert!(!reads(&b, &[FfnMoeLogits], "ffn_up_inp"));
    }
}
