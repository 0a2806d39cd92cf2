//! The CPU reference forward pass: plain f32 Rust, one token at a time, that
//! every GPU kernel and the whole GPU engine are tested against. It follows
//! llama.cpp's deepseek2 graph (`model-spec.md` §4) step by step and can
//! record each intermediate under llama.cpp's name (`attn_norm-3`, `q_pe-3`,
//! `kv_cmpr-3`, `ffn_moe_out-3`, …) so a failing comparison points at the
//! first op that diverged.

mod attention;
mod ffn;
pub mod ops;

use crate::error::{Error, Result};
use crate::model::{Model, QProj};

pub use attention::MlaForm;
pub use ffn::route;

/// Named intermediates of one forward call, in execution order.
#[derive(Default, Debug, Clone)]
pub struct Trace {
    pub entries: Vec<(String, Vec<f32>)>,
}

impl Trace {
    pub fn get(&self, name: &str) -> Option<&[f32]> {
        self.entries
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_slice())
    }
}

/// A reference session: the model, a latent KV cache in f32 and a position.
pub struct Reference<'m> {
    model: &'m Model,
    form: MlaForm,
    n_ctx: usize,
    /// Per layer: `pos` rows of [c_norm (n_lora_kv) ‖ roped k_pe (n_rot)].
    kv: Vec<Vec<f32>>,
    pos: usize,
    trace: Option<Trace>,
}

impl<'m> Reference<'m> {
    pub fn new(model: &'m Model, n_ctx: usize, form: MlaForm) -> Reference<'m> {
        // The caches grow with the tokens: reserving n_ctx rows up front
        // would let a file's row width and a large context ask for
        // gigabytes before a token runs.
        Reference {
            model,
            form,
            n_ctx,
            kv: vec![Vec::new(); model.config.n_layer],
            pos: 0,
            trace: None,
        }
    }

    /// Tokens processed so far (the position of the next token).
    pub fn pos(&self) -> usize {
        self.pos
    }

    /// Record intermediates during the next `forward` calls (each call
    /// replaces the previous trace).
    pub fn set_tracing(&mut self, on: bool) {
        self.trace = on.then(Trace::default);
    }

    pub fn trace(&self) -> Option<&Trace> {
        self.trace.as_ref()
    }

    pub fn reset(&mut self) {
        self.pos = 0;
        self.kv.iter_mut().for_each(Vec::clear);
    }

    fn record(&mut self, name: &str, il: Option<usize>, v: &[f32]) {
        if let Some(t) = &mut self.trace {
            let key = match il {
                Some(il) => format!("{name}-{il}"),
                None => name.to_string(),
            };
            t.entries.push((key, v.to_vec()));
        }
    }

    /// Run one token at the current position and return the logits.
    pub fn forward(&mut self, token: u32) -> Result<Vec<f32>> {
        let m = self.model;
        let c = &m.config;
        let f = &m.file;
        let w = &m.weights;
        if token as usize >= c.n_vocab {
            return Err(Error::InvalidArgument(format!(
                "token id {token} is outside the vocabulary (0..{})",
                c.n_vocab
            )));
        }
        if self.pos >= self.n_ctx {
            return Err(Error::ContextFull { n_ctx: self.n_ctx });
        }
        if let Some(t) = &mut self.trace {
            t.entries.clear();
        }
        let mut x = ops::row(f, &w.token_embd, token as usize)?;
        self.record("inp_embd", None, &x);
        for il in 0..c.n_layer {
            let lw = &w.layers[il];
            let h = ops::rms_norm(&x, &ops::vector(f, &lw.attn_norm)?, c.rms_eps);
            self.record("attn_norm", Some(il), &h);
            let q = match &lw.q {
                QProj::Lora { q_a, q_a_norm, q_b } => {
                    let qa = ops::matvec(f, q_a, 0, &h)?;
                    let qa = ops::rms_norm(&qa, &ops::vector(f, q_a_norm)?, c.rms_eps);
                    self.record("q_a_norm", Some(il), &qa);
                    ops::matvec(f, q_b, 0, &qa)?
                }
                QProj::Direct { q } => ops::matvec(f, q, 0, &h)?,
            };
            self.record("q", Some(il), &q);
            let attn = attention::mla(self, il, &h, &q)?;
            self.record("attn_out", Some(il), &attn);
            x.iter_mut().zip(&attn).for_each(|(a, b)| *a += b);
            self.record("ffn_inp", Some(il), &x);
            let h2 = ops::rms_norm(&x, &ops::vector(f, &lw.ffn_norm)?, c.rms_eps);
            self.record("ffn_norm", Some(il), &h2);
            let out = ffn::ffn(self, il, &h2)?;
            self.record("ffn_out", Some(il), &out);
            x.iter_mut().zip(&out).for_each(|(a, b)| *a += b);
            self.record("l_out", Some(il), &x);
        }
        let xn = ops::rms_norm(&x, &ops::vector(f, &w.output_norm)?, c.rms_eps);
        self.record("result_norm", None, &xn);
        let logits = ops::matvec(f, &w.output, 0, &xn)?;
        self.pos += 1;
        crate::error::check_finite(&logits)?;
        Ok(logits)
    }

    /// Run several tokens, returning the logits of each position.
    pub fn forward_all(&mut self, tokens: &[u32]) -> Result<Vec<Vec<f32>>> {
        tokens.iter().map(|&t| self.forward(t)).collect()
    }
}
