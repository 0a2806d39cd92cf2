//! Feed-forward halves: the dense SwiGLU block and the MoE block (router,
//! routed experts, shared expert), as llama.cpp's build_moe_ffn computes them.

use super::{ops, Reference};
use crate::error::Result;
use crate::gguf::GgufFile;
use crate::model::{Config, DenseFfn, ExpertsGateUp, Ffn, Gating};

pub(super) fn ffn(r: &mut Reference, il: usize, h2: &[f32]) -> Result<Vec<f32>> {
    let m = r.model;
    let c = &m.config;
    let f = &m.file;
    match &m.weights.layers[il].ffn {
        Ffn::Dense(d) => dense(f, d, h2),
        Ffn::Moe {
            gate_inp,
            exp_probs_b,
            gate_up_exps,
            down_exps,
            shared,
        } => {
            let logits = ops::matvec(f, gate_inp, 0, h2)?;
            r.record("ffn_moe_logits", Some(il), &logits);
            let bias = match exp_probs_b {
                Some(b) => Some(ops::vector(f, b)?),
                None => None,
            };
            let (sel, weights) = route(&logits, bias.as_deref(), c);
            r.record("ffn_moe_weights", Some(il), &weights);
            let mut out = vec![0f32; c.n_embd];
            for (&e, &wt) in sel.iter().zip(&weights) {
                let act = match gate_up_exps {
                    ExpertsGateUp::Separate { gate, up } => {
                        swiglu(&ops::matvec(f, gate, e, h2)?, &ops::matvec(f, up, e, h2)?)
                    }
                    ExpertsGateUp::Merged { gate_up } => {
                        let gu = ops::matvec(f, gate_up, e, h2)?;
                        swiglu(&gu[..c.n_ff_exp], &gu[c.n_ff_exp..])
                    }
                };
                let y = ops::matvec(f, down_exps, e, &act)?;
                out.iter_mut().zip(&y).for_each(|(o, v)| *o += wt * v);
            }
            r.record("ffn_moe_out", Some(il), &out);
            if let Some(sh) = shared {
                let s = dense(f, sh, h2)?;
                r.record("ffn_shexp", Some(il), &s);
                out.iter_mut().zip(&s).for_each(|(o, v)| *o += v);
            }
            Ok(out)
        }
    }
}

fn swiglu(gate: &[f32], up: &[f32]) -> Vec<f32> {
    gate.iter()
        .zip(up)
        .map(|(&g, &u)| ops::silu(g) * u)
        .collect()
}

fn dense(f: &GgufFile, d: &DenseFfn, x: &[f32]) -> Result<Vec<f32>> {
    let act = swiglu(
        &ops::matvec(f, &d.gate, 0, x)?,
        &ops::matvec(f, &d.up, 0, x)?,
    );
    ops::matvec(f, &d.down, 0, &act)
}

/// Expert selection and weights from router logits: probabilities by the
/// gating function; the bias (when present) only decides WHICH experts win;
/// the chosen un-biased probabilities are renormalised (if the model says so,
/// with llama.cpp's 6.1e-5 floor) and scaled. Ties go to the lower expert id.
pub fn route(logits: &[f32], bias: Option<&[f32]>, c: &Config) -> (Vec<usize>, Vec<f32>) {
    let mut probs = logits.to_vec();
    match c.gating {
        Gating::Sigmoid => probs.iter_mut().for_each(|p| *p = ops::sigmoid(*p)),
        Gating::Softmax => ops::softmax(&mut probs),
    }
    let score = |e: usize| probs[e] + bias.map_or(0.0, |b| b[e]);
    let mut order: Vec<usize> = (0..probs.len()).collect();
    order.sort_by(|&a, &b| score(b).total_cmp(&score(a)).then(a.cmp(&b)));
    let sel: Vec<usize> = order[..c.n_expert_used].to_vec();
    let mut w: Vec<f32> = sel.iter().map(|&e| probs[e]).collect();
    if c.expert_weights_norm {
        let sum: f32 = w.iter().sum();
        w.iter_mut().for_each(|v| *v /= sum.max(6.103_515_6e-5));
    }
    w.iter_mut().for_each(|v| *v *= c.expert_weights_scale);
    (sel, w)
}
