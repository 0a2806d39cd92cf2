//! Multi-head latent attention for one token, in the two forms that must
//! agree (a test checks it):
//!
//! * absorbed (what llama.cpp and the GPU run): q_nope is multiplied into the
//!   latent space by attn_k_b, attention runs MQA-style over the cached
//!   [c_norm ‖ k_pe] rows (values = the first n_lora_kv entries of each row),
//!   and attn_v_b decompresses the 512-d result per head;
//! * naive (HF's formulation): every cached latent is decompressed into
//!   per-head k_nope and v, then ordinary multi-head attention.
//!
//! Both scale scores by kq_scale = mscale²/sqrt(n_embd_head_qk).

use super::{ops, Reference};
use crate::error::Result;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MlaForm {
    Absorbed,
    Naive,
}

/// Append this token's cache row, attend, and return attn_output · v.
pub(super) fn mla(r: &mut Reference, il: usize, h: &[f32], q: &[f32]) -> Result<Vec<f32>> {
    let m = r.model;
    let c = &m.config;
    let f = &m.file;
    let lw = &m.weights.layers[il];
    let (n_head, n_nope, n_rope, n_kv, n_v) = (
        c.n_head,
        c.n_embd_head_qk_nope,
        c.n_embd_head_qk_rope,
        c.n_lora_kv,
        c.n_embd_head_v,
    );
    let n_qk = n_nope + n_rope;
    let row = c.kv_row();

    // kv_a_mqa → [latent ‖ k_pe]; the norm applies only to the latent part.
    let ckv = ops::matvec(f, &lw.kv_a_mqa, 0, h)?;
    let cs = ops::rope_cos_sin(r.pos, n_rope, c.rope_freq_base, c.yarn.as_ref());
    let kv_cmpr = ops::rms_norm(&ckv[..n_kv], &ops::vector(f, &lw.kv_a_norm)?, c.rms_eps);
    let mut k_pe = ckv[n_kv..].to_vec();
    ops::rope_apply(&mut k_pe, &cs);
    r.record("kv_cmpr", Some(il), &kv_cmpr);
    r.record("k_pe", Some(il), &k_pe);
    let cache = &mut r.kv[il];
    cache.extend_from_slice(&kv_cmpr);
    cache.extend_from_slice(&k_pe);

    let mut q_pe = vec![0f32; n_head * n_rope];
    for hd in 0..n_head {
        let dst = &mut q_pe[hd * n_rope..(hd + 1) * n_rope];
        dst.copy_from_slice(&q[hd * n_qk + n_nope..(hd + 1) * n_qk]);
        ops::rope_apply(dst, &cs);
    }
    r.record("q_pe", Some(il), &q_pe);

    let n_pos = r.pos + 1;
    let scale = c.kq_scale();
    let cache = &r.kv[il];
    let mut v_heads = vec![0f32; n_head * n_v];
    match r.form {
        MlaForm::Absorbed => {
            let mut q_abs_all = Vec::with_capacity(n_head * n_kv);
            for hd in 0..n_head {
                // attn_k_b head hd: n_kv rows of n_nope → q_abs[j] = Σ_d K_b[j][d]·q_nope[d].
                let q_nope = &q[hd * n_qk..hd * n_qk + n_nope];
                let q_abs = ops::matvec(f, &lw.k_b, hd, q_nope)?;
                let qpe = &q_pe[hd * n_rope..(hd + 1) * n_rope];
                let mut s: Vec<f32> = (0..n_pos)
                    .map(|t| {
                        let kr = &cache[t * row..(t + 1) * row];
                        (ops::dot(&q_abs, &kr[..n_kv]) + ops::dot(qpe, &kr[n_kv..])) * scale
                    })
                    .collect();
                ops::softmax(&mut s);
                let mut o = vec![0f64; n_kv];
                for (t, &p) in s.iter().enumerate() {
                    for (acc, &cv) in o.iter_mut().zip(&cache[t * row..t * row + n_kv]) {
                        *acc += p as f64 * cv as f64;
                    }
                }
                let o: Vec<f32> = o.into_iter().map(|v| v as f32).collect();
                let v = ops::matvec(f, &lw.v_b, hd, &o)?;
                v_heads[hd * n_v..(hd + 1) * n_v].copy_from_slice(&v);
                q_abs_all.extend_from_slice(&q_abs);
            }
            r.record("q_nope_absorbed", Some(il), &q_abs_all);
        }
        MlaForm::Naive => naive(r, il, q, &q_pe, &mut v_heads)?,
    }
    r.record("kqv_out", Some(il), &v_heads);
    ops::matvec(f, &lw.attn_output, 0, &v_heads)
}

/// HF's form of the same attention: every cached latent decompressed into
/// each head's k_nope and v, then ordinary attention; heads' outputs into
/// `v_heads`.
fn naive(r: &Reference, il: usize, q: &[f32], q_pe: &[f32], v_heads: &mut [f32]) -> Result<()> {
    let (c, f) = (&r.model.config, &r.model.file);
    let lw = &r.model.weights.layers[il];
    let (n_head, n_nope, n_rope, n_kv, n_v) = (
        c.n_head,
        c.n_embd_head_qk_nope,
        c.n_embd_head_qk_rope,
        c.n_lora_kv,
        c.n_embd_head_v,
    );
    let (n_qk, row, n_pos, scale) = (n_nope + n_rope, c.kv_row(), r.pos + 1, c.kq_scale());
    let cache = &r.kv[il];
    for hd in 0..n_head {
        let q_nope = &q[hd * n_qk..hd * n_qk + n_nope];
        let qpe = &q_pe[hd * n_rope..(hd + 1) * n_rope];
        let kb = ops::dequant_slice(f, &lw.k_b, hd)?; // [n_kv][n_nope]
        let mut s = Vec::with_capacity(n_pos);
        let mut vs = Vec::with_capacity(n_pos);
        for t in 0..n_pos {
            let kr = &cache[t * row..(t + 1) * row];
            let lat = &kr[..n_kv];
            // k_nope[d] = Σ_j K_b[j][d] · c[j]
            let mut k_nope = vec![0f64; n_nope];
            for (j, &cj) in lat.iter().enumerate() {
                for (d, acc) in k_nope.iter_mut().enumerate() {
                    *acc += kb[j * n_nope + d] as f64 * cj as f64;
                }
            }
            let k_nope: Vec<f32> = k_nope.into_iter().map(|v| v as f32).collect();
            s.push((ops::dot(q_nope, &k_nope) + ops::dot(qpe, &kr[n_kv..])) * scale);
            vs.push(ops::matvec(f, &lw.v_b, hd, lat)?);
        }
        ops::softmax(&mut s);
        for (d, out) in v_heads[hd * n_v..(hd + 1) * n_v].iter_mut().enumerate() {
            *out = s
                .iter()
                .zip(&vs)
                .map(|(&p, v)| p as f64 * v[d] as f64)
                .sum::<f64>() as f32;
        }
    }
    Ok(())
}
