//! Model config rules, weight mapping, the synthetic presets, and the CPU
//! reference forward pass (determinism, absorbed vs naive MLA).

mod common;

use glmw::gguf::{GgufFile, GgufWriter, TensorSpec, Value};
use glmw::model::{Config, Gating, Model};
use glmw::quant::GgmlType;
use glmw::reference::{ops, MlaForm, Reference};
use glmw::synth::{self, Mix, Preset};

/// Write only the header of `md` + `specs`, then extend the file sparsely to
/// its full length: full-size layouts can be loaded without writing 17 GB.
fn sparse_file(tag: &str, md: &[(String, Value)], specs: &[TensorSpec]) -> std::path::PathBuf {
    let path = common::temp_dir(tag).join("m.gguf");
    let w = GgufWriter::create(&path, md, specs).unwrap();
    drop(w); // flushes the header; tensor data stays sparse
    let data: u64 = specs
        .iter()
        .map(|s| s.n_bytes().unwrap().div_ceil(32) * 32)
        .sum();
    let f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    let header = f.metadata().unwrap().len();
    f.set_len(header + data).unwrap();
    path
}

/// llama.cpp's Q4_K_M choices on the full-size layout: Q5_0 for attn_k_b
/// (192-weight rows), Q6_K for the output head and the ffn_down tensors of
/// the 23 layers `use_more_bits` picks (0-4, every third of 5-40, 41-46),
/// Q4_K for every other matrix, F32 as in the Q4_0 mix; Q5_K_M and Q6_K.
#[test]
fn glm_flash_k_mixes_follow_llama_quantize() {
    let (md, specs) = synth::plan(Preset::Glm47Flash, Mix::Q4KM, 0);
    let count = |t: GgmlType| specs.iter().filter(|s| s.ggml_type == t).count();
    assert_eq!(count(GgmlType::F32), 281);
    assert_eq!(count(GgmlType::Q5_0), 47);
    assert_eq!(count(GgmlType::Q6_K), 1 + 1 + 22 * 2);
    assert_eq!(count(GgmlType::Q4_K), 844 - 281 - 47 - 46);
    let ty = |name: &str| specs.iter().find(|s| s.name == name).unwrap().ggml_type;
    assert_eq!(ty("blk.0.attn_k_b.weight"), GgmlType::Q5_0);
    assert_eq!(ty("blk.0.ffn_down.weight"), GgmlType::Q6_K);
    assert_eq!(ty("blk.7.ffn_down_exps.weight"), GgmlType::Q6_K);
    assert_eq!(ty("blk.8.ffn_down_shexp.weight"), GgmlType::Q4_K);
    assert_eq!(ty("blk.41.ffn_down_shexp.weight"), GgmlType::Q6_K);
    assert_eq!(ty("blk.3.attn_v_b.weight"), GgmlType::Q4_K);
    assert_eq!(ty("token_embd.weight"), GgmlType::Q4_K);
    assert_eq!(ty("output.weight"), GgmlType::Q6_K);
    let ft = md.iter().find(|(k, _)| k == "general.file_type");
    assert!(matches!(ft, Some((_, Value::U32(15)))));
    let bytes: u64 = specs.iter().map(|s| s.n_bytes().unwrap()).sum();
    assert!((17.5e9..19.0e9).contains(&(bytes as f64)), "{bytes} bytes");
    // Q5_K_M: the same picks over Q5_K, whose fallback is Q5_1; Q6_K: every
    // matrix, attn_k_b falling back to Q8_0.
    let (_, specs) = synth::plan(Preset::Glm47Flash, Mix::Q5KM, 0);
    let count = |t: GgmlType| specs.iter().filter(|s| s.ggml_type == t).count();
    assert_eq!(
        [GgmlType::Q5_1, GgmlType::Q6_K, GgmlType::Q5_K].map(count),
        [47, 46, 844 - 281 - 47 - 46]
    );
    let (_, specs) = synth::plan(Preset::Glm47Flash, Mix::Q6K, 0);
    let count = |t: GgmlType| specs.iter().filter(|s| s.ggml_type == t).count();
    assert_eq!(
        [GgmlType::Q8_0, GgmlType::Q6_K].map(count),
        [47, 844 - 281 - 47]
    );
}

/// llama.cpp's Q2_K, Q3_K_M and IQ4_XS choices on the full-size layout
/// (64 experts: attn_output takes the non-8-expert rule): IQ4_NL for
/// attn_k_b, Q6_K output; Q2_K: Q3_K for the 93 ffn_down tensors and 47
/// attn_output; Q3_K_M: Q5_K ffn_down in layers 0-1 (47 / 16 = 2), Q4_K the
/// other ffn_down and attn_output.
#[test]
fn glm_flash_low_bit_mixes_follow_llama_quantize() {
    use GgmlType::*;
    for (mix, want) in [
        (
            Mix::Q2K,
            [(IQ4_NL, 47), (Q6_K, 1), (Q3_K, 140), (Q2_K, 375)],
        ),
        (
            Mix::Q3KM,
            [(IQ4_NL, 47), (Q5_K, 3), (Q4_K, 137), (Q3_K, 375)],
        ),
        (
            Mix::IQ4XS,
            [(IQ4_NL, 47), (Q6_K, 1), (IQ4_XS, 515), (F32, 281)],
        ),
    ] {
        let (md, specs) = synth::plan(Preset::Glm47Flash, mix, 0);
        for (t, n) in want {
            let got = specs.iter().filter(|s| s.ggml_type == t).count();
            assert_eq!(got, n, "{mix:?} {t}");
        }
        let ft = md.iter().find(|(k, _)| k == "general.file_type");
        assert!(matches!(ft, Some((_, Value::U32(f))) if *f == mix.file_type()));
    }
    let (_, specs) = synth::plan(Preset::Glm47Flash, Mix::Q3KM, 0);
    let ty = |name: &str| specs.iter().find(|s| s.name == name).unwrap().ggml_type;
    assert_eq!(ty("blk.1.ffn_down_shexp.weight"), Q5_K);
    assert_eq!(ty("blk.2.ffn_down_exps.weight"), Q4_K);
    assert_eq!(ty("blk.5.attn_output.weight"), Q4_K);
    assert_eq!(ty("token_embd.weight"), Q3_K);
}

#[test]
fn glm_flash_preset_has_the_real_layout() {
    let (md, specs) = synth::plan(Preset::Glm47Flash, Mix::Q4_0, 0);
    assert_eq!(specs.len(), 844, "13 + 46 x 18 + 3 tensors");
    let count = |t: GgmlType| specs.iter().filter(|s| s.ggml_type == t).count();
    assert_eq!(count(GgmlType::F32), 281);
    assert_eq!(count(GgmlType::Q8_0), 141);
    assert_eq!(count(GgmlType::Q5_K), 92);
    assert_eq!(count(GgmlType::Q6_K), 47);
    let bytes: u64 = specs.iter().map(|s| s.n_bytes().unwrap()).sum();
    assert!((16.0e9..18.5e9).contains(&(bytes as f64)), "{bytes} bytes");
    assert!(
        md.iter().all(|(k, _)| k != "deepseek2.expert_gating_func"),
        "real files carry no gating key"
    );

    let path = sparse_file("flash", &md, &specs);
    let model = Model::open(&path).unwrap();
    let c = &model.config;
    assert_eq!(
        (c.n_layer, c.n_embd, c.n_head, c.n_vocab),
        (47, 2048, 20, 154880)
    );
    assert_eq!(
        (
            c.n_lora_q,
            c.n_lora_kv,
            c.n_embd_head_qk_nope,
            c.n_embd_head_qk_rope,
            c.n_embd_head_v
        ),
        (768, 512, 192, 64, 256)
    );
    assert_eq!(
        (
            c.n_expert,
            c.n_expert_used,
            c.n_expert_shared,
            c.n_ff_exp,
            c.n_ff
        ),
        (64, 4, 1, 1536, 10240)
    );
    assert_eq!(
        c.gating,
        Gating::Sigmoid,
        "llama.cpp's 47-layer/154880-vocab rule"
    );
    assert_eq!(c.kq_scale(), 0.0625);
    assert_eq!(c.expert_weights_scale, 1.8);
    assert!(c.expert_weights_norm);
    assert_eq!(c.kv_row(), 576);
    assert_eq!(model.weights.layers.len(), 47);
    let tok = glmw::tokenizer::Tokenizer::from_gguf(&model.file).unwrap();
    for (s, id) in [
        ("<|endoftext|>", 154820),
        ("[gMASK]", 154822),
        ("<sop>", 154824),
        ("<|user|>", 154827),
        ("<|observation|>", 154829),
        ("<think>", 154841),
    ] {
        assert_eq!(tok.token_id(s), Some(id), "{s}");
    }
}

#[test]
fn deepseek_v2_lite_preset_uses_softmax_yarn_and_direct_q() {
    let (md, specs) = synth::plan(Preset::DeepseekV2Lite, Mix::Q4_0, 0);
    let path = sparse_file("v2lite", &md, &specs);
    let model = Model::open(&path).unwrap();
    let c = &model.config;
    assert_eq!(c.gating, Gating::Softmax);
    assert_eq!(c.n_lora_q, 0);
    assert!(matches!(
        model.weights.layers[3].q,
        glmw::model::QProj::Direct { .. }
    ));
    let y = c.yarn.expect("yarn");
    assert!((1.0 / y.freq_scale - 40.0).abs() < 1e-6);
    // mscale = 1 + 0.0707·ln 40 ≈ 1.2608; kq_scale = mscale² / sqrt(192) ≈ 0.1147
    assert!((c.kq_scale() - 0.1147).abs() < 2e-4, "{}", c.kq_scale());
}

fn metadata_only(edit: impl Fn(&mut Vec<(String, Value)>)) -> glmw::Result<Config> {
    let (mut md, _) = synth::plan(Preset::Tiny, Mix::Q4_0, 0);
    edit(&mut md);
    let dir = common::temp_dir("cfg");
    let path = dir.join("c.gguf");
    GgufWriter::create(&path, &md, &[])
        .unwrap()
        .finish()
        .unwrap();
    Config::from_gguf(&GgufFile::open(&path).unwrap())
}

fn set(md: &mut Vec<(String, Value)>, key: &str, v: Value) {
    md.retain(|(k, _)| k != key);
    md.push((key.to_string(), v));
}

#[test]
fn config_rules_and_errors() {
    assert_eq!(metadata_only(|_| {}).unwrap().gating, Gating::Sigmoid);
    let softmax =
        metadata_only(|md| md.retain(|(k, _)| k != "deepseek2.expert_gating_func")).unwrap();
    assert_eq!(
        softmax.gating,
        Gating::Softmax,
        "no key and not 47 layers/154880 vocab: softmax"
    );

    let e = metadata_only(|md| set(md, "general.architecture", Value::Str("llama".into())))
        .unwrap_err();
    assert!(
        e.to_string()
            .contains("unsupported: architecture \"llama\""),
        "{e}"
    );
    let e = metadata_only(|md| md.retain(|(k, _)| k != "deepseek2.attention.key_length_mla"))
        .unwrap_err();
    assert!(e.to_string().contains("legacy"), "{e}");
    let e =
        metadata_only(|md| set(md, "deepseek2.block_count", Value::Str("3".into()))).unwrap_err();
    assert!(
        e.to_string().contains("block_count should be integer"),
        "{e}"
    );
    let e = metadata_only(|md| set(md, "deepseek2.expert_used_count", Value::U32(99))).unwrap_err();
    assert!(e.to_string().contains("expert_used_count 99"), "{e}");
    let e = metadata_only(|md| set(md, "deepseek2.expert_gating_func", Value::U32(7))).unwrap_err();
    assert!(e.to_string().contains("expert_gating_func = 7"), "{e}");
    let e = metadata_only(|md| md.retain(|(k, _)| k != "deepseek2.block_count")).unwrap_err();
    assert!(e.to_string().contains("block_count is missing"), "{e}");
}

#[test]
fn missing_or_misshapen_tensors_are_reported() {
    let (md, mut specs) = synth::plan(Preset::Tiny, Mix::Q4_0, 0);
    specs.retain(|s| s.name != "blk.1.ffn_down_exps.weight");
    let e = Model::open(sparse_file("missing", &md, &specs))
        .err()
        .unwrap();
    assert!(
        e.to_string()
            .contains("tensor blk.1.ffn_down_exps.weight is missing"),
        "{e}"
    );

    let (md, mut specs) = synth::plan(Preset::Tiny, Mix::Q4_0, 0);
    let t = specs
        .iter_mut()
        .find(|s| s.name == "blk.2.attn_k_b.weight")
        .unwrap();
    t.dims = vec![32, 64, 5];
    let e = Model::open(sparse_file("shape", &md, &specs))
        .err()
        .unwrap();
    assert!(
        e.to_string()
            .contains("blk.2.attn_k_b.weight has shape [32, 64, 5]"),
        "{e}"
    );

    let (md, mut specs) = synth::plan(Preset::Tiny, Mix::Q4_0, 0);
    specs
        .iter_mut()
        .find(|s| s.name == "blk.0.attn_norm.weight")
        .unwrap()
        .ggml_type = GgmlType::F16;
    let e = Model::open(sparse_file("type", &md, &specs)).err().unwrap();
    assert!(e.to_string().contains("expected F32"), "{e}");
}

#[test]
fn synth_is_deterministic_per_seed() {
    let dir = common::temp_dir("det");
    let (a, b, c) = (dir.join("a.gguf"), dir.join("b.gguf"), dir.join("c.gguf"));
    synth::synth(&a, Preset::Tiny, Mix::Q4_0, 7, &mut |_, _| {}).unwrap();
    synth::synth(&b, Preset::Tiny, Mix::Q4_0, 7, &mut |_, _| {}).unwrap();
    synth::synth(&c, Preset::Tiny, Mix::Q4_0, 8, &mut |_, _| {}).unwrap();
    let (a, b, c) = (
        std::fs::read(a).unwrap(),
        std::fs::read(b).unwrap(),
        std::fs::read(c).unwrap(),
    );
    assert!(a == b, "same seed, same file");
    assert!(a != c, "different seed, different weights");
}

#[test]
fn tiny_has_every_structural_feature_and_sane_weights() {
    let model = Model::open(common::tiny_model()).unwrap();
    let c = &model.config;
    assert!(c.n_layer_dense_lead == 1 && c.n_layer > 1 && c.n_lora_q > 0 && c.n_expert_shared == 1);
    assert!(matches!(
        model.weights.layers[1].ffn,
        glmw::model::Ffn::Moe {
            exp_probs_b: Some(_),
            ..
        }
    ));
    let mut types: Vec<GgmlType> = model.file.tensors().iter().map(|t| t.ggml_type).collect();
    types.sort();
    types.dedup();
    assert_eq!(
        types,
        vec![
            GgmlType::F32,
            GgmlType::Q4_0,
            GgmlType::Q8_0,
            GgmlType::Q5_K,
            GgmlType::Q6_K
        ]
    );
    // Weights dequantize to roughly N(0, 0.02), never all zero.
    for name in [
        "blk.1.ffn_gate_exps.weight",
        "blk.1.ffn_up_shexp.weight",
        "output.weight",
        "blk.0.attn_k_b.weight",
    ] {
        let t = model.file.tensor(name).unwrap();
        let v = glmw::quant::dequantize_vec(
            t.ggml_type,
            model.file.tensor_data(t),
            t.n_elements() as usize,
        )
        .unwrap();
        let mean = v.iter().map(|&x| x as f64).sum::<f64>() / v.len() as f64;
        let std =
            (v.iter().map(|&x| (x as f64 - mean).powi(2)).sum::<f64>() / v.len() as f64).sqrt();
        assert!(
            mean.abs() < 2e-3 && (0.015..0.025).contains(&std),
            "{name}: mean {mean} std {std}"
        );
    }
}

#[test]
fn reference_logits_are_deterministic_and_finite() {
    let model = Model::open(common::tiny_model()).unwrap();
    let tokens = [480u32, 482, 10, 200, 33, 7];
    let a = Reference::new(&model, 64, MlaForm::Absorbed)
        .forward_all(&tokens)
        .unwrap();
    let b = Reference::new(&model, 64, MlaForm::Absorbed)
        .forward_all(&tokens)
        .unwrap();
    assert_eq!(a, b);
    assert!(a.iter().flatten().all(|x| x.is_finite()));
    assert_eq!(a[0].len(), model.config.n_vocab);
    // Logits differ between positions (the cache is used).
    assert!(ops::rel_l2(&a[4], &a[5]) > 1e-3);
}

#[test]
fn absorbed_and_naive_mla_agree() {
    let model = Model::open(common::tiny_model()).unwrap();
    let tokens = [480u32, 482, 10, 200, 33, 7, 90, 91, 300, 5];
    let mut abs = Reference::new(&model, 64, MlaForm::Absorbed);
    let mut naive = Reference::new(&model, 64, MlaForm::Naive);
    abs.set_tracing(true);
    naive.set_tracing(true);
    for &t in &tokens {
        let la = abs.forward(t).unwrap();
        let ln = naive.forward(t).unwrap();
        for il in 0..model.config.n_layer {
            let name = format!("kqv_out-{il}");
            let e = ops::rel_l2(
                naive.trace().unwrap().get(&name).unwrap(),
                abs.trace().unwrap().get(&name).unwrap(),
            );
            assert!(e < 1e-5, "{name} at pos {}: rel L2 {e}", abs.pos() - 1);
        }
        let e = ops::rel_l2(&ln, &la);
        assert!(e < 1e-5, "logits at pos {}: rel L2 {e}", abs.pos() - 1);
    }
}

#[test]
fn trace_names_follow_llama_cpp() {
    let model = Model::open(common::tiny_model()).unwrap();
    let mut r = Reference::new(&model, 8, MlaForm::Absorbed);
    r.set_tracing(true);
    r.forward(3).unwrap();
    let t = r.trace().unwrap();
    for name in [
        "inp_embd",
        "attn_norm-0",
        "q_pe-1",
        "kv_cmpr-1",
        "k_pe-1",
        "ffn_moe_logits-1",
        "ffn_moe_out-2",
        "ffn_shexp-2",
        "l_out-2",
        "result_norm",
    ] {
        assert!(t.get(name).is_some(), "{name} missing from trace");
    }
}

#[test]
fn bad_tokens_and_full_context_are_errors() {
    let model = Model::open(common::tiny_model()).unwrap();
    let mut r = Reference::new(&model, 2, MlaForm::Absorbed);
    let e = r.forward(100_000).unwrap_err();
    assert!(e.to_string().contains("outside the vocabulary"), "{e}");
    r.forward(1).unwrap();
    r.forward(2).unwrap();
    let e = r.forward(3).unwrap_err();
    assert!(matches!(e, glmw::Error::ContextFull { n_ctx: 2 }), "{e}");
}

#[test]
fn router_bias_selects_but_does_not_weight() {
    let (md, _) = synth::plan(Preset::Tiny, Mix::Q4_0, 0);
    let dir = common::temp_dir("route");
    let p = dir.join("r.gguf");
    GgufWriter::create(&p, &md, &[]).unwrap().finish().unwrap();
    let c = Config::from_gguf(&GgufFile::open(&p).unwrap()).unwrap();
    let logits = [0.0f32, 1.0, 2.0, -1.0, 0.5, -2.0, 3.0, 0.1];
    let bias = [5.0f32, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0];
    let (sel, w) = glmw::reference::route(&logits, Some(&bias), &c);
    assert_eq!(sel, vec![0, 6, 2, 1], "bias pulls expert 0 in");
    let s: Vec<f32> = sel.iter().map(|&e| ops::sigmoid(logits[e])).collect();
    let sum: f32 = s.iter().sum();
    for (wi, si) in w.iter().zip(&s) {
        assert!(
            (wi - si / sum * 1.8).abs() < 1e-6,
            "weights use unbiased scores, renormalised, x1.8"
        );
    }
}
