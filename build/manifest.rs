// The kernel list build.rs reads (it `include!`s this file): each kernel's
// WGSL parts, the values its host-set overrides may take, and the Rust
// structs that mirror its WGSL structs. Everything else about a kernel —
// its bindings, their declarations, override types, struct layouts — build.rs
// reads from the WGSL itself (naga) and writes into the generated table
// that src/gpu/kernels.rs includes. Plain data only: build.rs has no crate
// deps.

/// One kernel.
pub struct KernelDef {
    /// Its `Kernel` value in Rust (the generated enum's variant).
    pub kernel: &'static str,
    /// Pipeline label and profile name.
    pub name: &'static str,
    /// WGSL files concatenated in this order, then the reduction prelude.
    /// The first is the kernel's own file: its bindings become the named
    /// fields of the generated `XxxBindings`; bindings the others declare
    /// (a weight format's arrays) are the struct's `weights` slice.
    pub parts: &'static [&'static str],
    /// Every value each host-set override may take (build.rs translates
    /// each combination; the host may ask for no other).
    pub overrides: &'static [(&'static str, &'static [f64])],
    /// (WGSL struct, Rust struct under `crate::`): build.rs checks that the
    /// Rust struct has the WGSL members at the same offsets and types, and
    /// the same size.
    pub structs: &'static [(&'static str, &'static str)],
}

const MATVEC_OVERRIDES: &[(&str, &[f64])] = &[
    ("MODE", &[0.0, 1.0, 2.0]),
    ("NORM", &[0.0, 1.0]),
    ("ACCUM", &[0.0, 1.0]),
    ("TPR", &[4.0, 8.0, 16.0, 32.0]),
    ("COMBINE", &[0.0, 1.0]),
];

const MATMUL_OVERRIDES: &[(&str, &[f64])] = &[("GATE_UP", &[0.0, 1.0]), ("ACCUM", &[0.0, 1.0])];

pub const KERNELS: &[KernelDef] = &[
    KernelDef {
        kernel: "RmsNorm",
        name: "rms_norm",
        parts: &["rms_norm.wgsl"],
        overrides: &[],
        structs: &[("Params", "gpu::ops::RmsNormParams")],
    },
    KernelDef {
        kernel: "Matvec(Format::F32)",
        name: "matvec_f32",
        parts: &["matvec.wgsl", "f32.wgsl"],
        overrides: MATVEC_OVERRIDES,
        structs: &[("Params", "gpu::ops::MatvecParams")],
    },
    KernelDef {
        kernel: "Matvec(Format::Q4_0)",
        name: "matvec_q4_0",
        parts: &["matvec.wgsl", "q4_0.wgsl"],
        overrides: MATVEC_OVERRIDES,
        structs: &[("Params", "gpu::ops::MatvecParams")],
    },
    KernelDef {
        kernel: "Matvec(Format::Q8_0)",
        name: "matvec_q8_0",
        parts: &["matvec.wgsl", "q8_0.wgsl"],
        overrides: MATVEC_OVERRIDES,
        structs: &[("Params", "gpu::ops::MatvecParams")],
    },
    KernelDef {
        kernel: "Matvec(Format::Q5K)",
        name: "matvec_q5_k",
        parts: &["matvec.wgsl", "q5_k.wgsl", "k_scales.wgsl"],
        overrides: MATVEC_OVERRIDES,
        structs: &[("Params", "gpu::ops::MatvecParams")],
    },
    KernelDef {
        kernel: "Matvec(Format::Q6K)",
        name: "matvec_q6_k",
        parts: &["matvec.wgsl", "q6_k.wgsl"],
        overrides: MATVEC_OVERRIDES,
        structs: &[("Params", "gpu::ops::MatvecParams")],
    },
    KernelDef {
        kernel: "Matvec(Format::Q4K)",
        name: "matvec_q4_k",
        parts: &["matvec.wgsl", "q4_k.wgsl", "k_scales.wgsl"],
        overrides: MATVEC_OVERRIDES,
        structs: &[("Params", "gpu::ops::MatvecParams")],
    },
    KernelDef {
        kernel: "Matvec(Format::Q5_0)",
        name: "matvec_q5_0",
        parts: &["matvec.wgsl", "q5_0.wgsl", "q5_unit.wgsl"],
        overrides: MATVEC_OVERRIDES,
        structs: &[("Params", "gpu::ops::MatvecParams")],
    },
    KernelDef {
        kernel: "Matvec(Format::Q4_1)",
        name: "matvec_q4_1",
        parts: &["matvec.wgsl", "q4_1.wgsl"],
        overrides: MATVEC_OVERRIDES,
        structs: &[("Params", "gpu::ops::MatvecParams")],
    },
    KernelDef {
        kernel: "Matvec(Format::Q5_1)",
        name: "matvec_q5_1",
        parts: &["matvec.wgsl", "q5_1.wgsl", "q5_unit.wgsl"],
        overrides: MATVEC_OVERRIDES,
        structs: &[("Params", "gpu::ops::MatvecParams")],
    },
    KernelDef {
        kernel: "Matvec(Format::F16)",
        name: "matvec_f16",
        parts: &["matvec.wgsl", "f16.wgsl", "halves.wgsl"],
        overrides: MATVEC_OVERRIDES,
        structs: &[("Params", "gpu::ops::MatvecParams")],
    },
    KernelDef {
        kernel: "Matvec(Format::BF16)",
        name: "matvec_bf16",
        parts: &["matvec.wgsl", "bf16.wgsl", "halves.wgsl"],
        overrides: MATVEC_OVERRIDES,
        structs: &[("Params", "gpu::ops::MatvecParams")],
    },
    KernelDef {
        kernel: "Matvec(Format::Q2K)",
        name: "matvec_q2_k",
        parts: &["matvec.wgsl", "q2_k.wgsl"],
        overrides: MATVEC_OVERRIDES,
        structs: &[("Params", "gpu::ops::MatvecParams")],
    },
    KernelDef {
        kernel: "Matvec(Format::Q3K)",
        name: "matvec_q3_k",
        parts: &["matvec.wgsl", "q3_k.wgsl"],
        overrides: MATVEC_OVERRIDES,
        structs: &[("Params", "gpu::ops::MatvecParams")],
    },
    KernelDef {
        kernel: "Matvec(Format::IQ4NL)",
        name: "matvec_iq4_nl",
        parts: &["matvec.wgsl", "iq4_nl.wgsl", "iq4_values.wgsl"],
        overrides: MATVEC_OVERRIDES,
        structs: &[("Params", "gpu::ops::MatvecParams")],
    },
    KernelDef {
        kernel: "Matvec(Format::IQ4XS)",
        name: "matvec_iq4_xs",
        parts: &["matvec.wgsl", "iq4_xs.wgsl", "iq4_values.wgsl"],
        overrides: MATVEC_OVERRIDES,
        structs: &[("Params", "gpu::ops::MatvecParams")],
    },
    KernelDef {
        kernel: "Matmul(Format::F32)",
        name: "matmul_f32",
        parts: &["matmul.wgsl", "f32.wgsl"],
        overrides: MATMUL_OVERRIDES,
        structs: &[("Params", "gpu::ops::MatmulParams")],
    },
    KernelDef {
        kernel: "Matmul(Format::Q4_0)",
        name: "matmul_q4_0",
        parts: &["matmul.wgsl", "q4_0.wgsl"],
        overrides: MATMUL_OVERRIDES,
        structs: &[("Params", "gpu::ops::MatmulParams")],
    },
    KernelDef {
        kernel: "Matmul(Format::Q8_0)",
        name: "matmul_q8_0",
        parts: &["matmul.wgsl", "q8_0.wgsl"],
        overrides: MATMUL_OVERRIDES,
        structs: &[("Params", "gpu::ops::MatmulParams")],
    },
    KernelDef {
        kernel: "Matmul(Format::Q5K)",
        name: "matmul_q5_k",
        parts: &["matmul.wgsl", "q5_k.wgsl", "k_scales.wgsl"],
        overrides: MATMUL_OVERRIDES,
        structs: &[("Params", "gpu::ops::MatmulParams")],
    },
    KernelDef {
        kernel: "Matmul(Format::Q6K)",
        name: "matmul_q6_k",
        parts: &["matmul.wgsl", "q6_k.wgsl"],
        overrides: MATMUL_OVERRIDES,
        structs: &[("Params", "gpu::ops::MatmulParams")],
    },
    KernelDef {
        kernel: "Matmul(Format::Q4K)",
        name: "matmul_q4_k",
        parts: &["matmul.wgsl", "q4_k.wgsl", "k_scales.wgsl"],
        overrides: MATMUL_OVERRIDES,
        structs: &[("Params", "gpu::ops::MatmulParams")],
    },
    KernelDef {
        kernel: "Matmul(Format::Q5_0)",
        name: "matmul_q5_0",
        parts: &["matmul.wgsl", "q5_0.wgsl", "q5_unit.wgsl"],
        overrides: MATMUL_OVERRIDES,
        structs: &[("Params", "gpu::ops::MatmulParams")],
    },
    KernelDef {
        kernel: "Matmul(Format::Q4_1)",
        name: "matmul_q4_1",
        parts: &["matmul.wgsl", "q4_1.wgsl"],
        overrides: MATMUL_OVERRIDES,
        structs: &[("Params", "gpu::ops::MatmulParams")],
    },
    KernelDef {
        kernel: "Matmul(Format::Q5_1)",
        name: "matmul_q5_1",
        parts: &["matmul.wgsl", "q5_1.wgsl", "q5_unit.wgsl"],
        overrides: MATMUL_OVERRIDES,
        structs: &[("Params", "gpu::ops::MatmulParams")],
    },
    KernelDef {
        kernel: "Matmul(Format::F16)",
        name: "matmul_f16",
        parts: &["matmul.wgsl", "f16.wgsl", "halves.wgsl"],
        overrides: MATMUL_OVERRIDES,
        structs: &[("Params", "gpu::ops::MatmulParams")],
    },
    KernelDef {
        kernel: "Matmul(Format::BF16)",
        name: "matmul_bf16",
        parts: &["matmul.wgsl", "bf16.wgsl", "halves.wgsl"],
        overrides: MATMUL_OVERRIDES,
        structs: &[("Params", "gpu::ops::MatmulParams")],
    },
    KernelDef {
        kernel: "Matmul(Format::Q2K)",
        name: "matmul_q2_k",
        parts: &["matmul.wgsl", "q2_k.wgsl"],
        overrides: MATMUL_OVERRIDES,
        structs: &[("Params", "gpu::ops::MatmulParams")],
    },
    KernelDef {
        kernel: "Matmul(Format::Q3K)",
        name: "matmul_q3_k",
        parts: &["matmul.wgsl", "q3_k.wgsl"],
        overrides: MATMUL_OVERRIDES,
        structs: &[("Params", "gpu::ops::MatmulParams")],
    },
    KernelDef {
        kernel: "Matmul(Format::IQ4NL)",
        name: "matmul_iq4_nl",
        parts: &["matmul.wgsl", "iq4_nl.wgsl", "iq4_values.wgsl"],
        overrides: MATMUL_OVERRIDES,
        structs: &[("Params", "gpu::ops::MatmulParams")],
    },
    KernelDef {
        kernel: "Matmul(Format::IQ4XS)",
        name: "matmul_iq4_xs",
        parts: &["matmul.wgsl", "iq4_xs.wgsl", "iq4_values.wgsl"],
        overrides: MATMUL_OVERRIDES,
        structs: &[("Params", "gpu::ops::MatmulParams")],
    },
    KernelDef {
        kernel: "Embed(Format::F32)",
        name: "embed_f32",
        parts: &["embed.wgsl", "f32.wgsl"],
        overrides: &[],
        structs: &[("Params", "gpu::ops::EmbedParams")],
    },
    KernelDef {
        kernel: "Embed(Format::Q4_0)",
        name: "embed_q4_0",
        parts: &["embed.wgsl", "q4_0.wgsl"],
        overrides: &[],
        structs: &[("Params", "gpu::ops::EmbedParams")],
    },
    KernelDef {
        kernel: "Embed(Format::Q8_0)",
        name: "embed_q8_0",
        parts: &["embed.wgsl", "q8_0.wgsl"],
        overrides: &[],
        structs: &[("Params", "gpu::ops::EmbedParams")],
    },
    KernelDef {
        kernel: "Embed(Format::Q5K)",
        name: "embed_q5_k",
        parts: &["embed.wgsl", "q5_k.wgsl", "k_scales.wgsl"],
        overrides: &[],
        structs: &[("Params", "gpu::ops::EmbedParams")],
    },
    KernelDef {
        kernel: "Embed(Format::Q6K)",
        name: "embed_q6_k",
        parts: &["embed.wgsl", "q6_k.wgsl"],
        overrides: &[],
        structs: &[("Params", "gpu::ops::EmbedParams")],
    },
    KernelDef {
        kernel: "Embed(Format::Q4K)",
        name: "embed_q4_k",
        parts: &["embed.wgsl", "q4_k.wgsl", "k_scales.wgsl"],
        overrides: &[],
        structs: &[("Params", "gpu::ops::EmbedParams")],
    },
    KernelDef {
        kernel: "Embed(Format::Q5_0)",
        name: "embed_q5_0",
        parts: &["embed.wgsl", "q5_0.wgsl", "q5_unit.wgsl"],
        overrides: &[],
        structs: &[("Params", "gpu::ops::EmbedParams")],
    },
    KernelDef {
        kernel: "Embed(Format::Q4_1)",
        name: "embed_q4_1",
        parts: &["embed.wgsl", "q4_1.wgsl"],
        overrides: &[],
        structs: &[("Params", "gpu::ops::EmbedParams")],
    },
    KernelDef {
        kernel: "Embed(Format::Q5_1)",
        name: "embed_q5_1",
        parts: &["embed.wgsl", "q5_1.wgsl", "q5_unit.wgsl"],
        overrides: &[],
        structs: &[("Params", "gpu::ops::EmbedParams")],
    },
    KernelDef {
        kernel: "Embed(Format::F16)",
        name: "embed_f16",
        parts: &["embed.wgsl", "f16.wgsl", "halves.wgsl"],
        overrides: &[],
        structs: &[("Params", "gpu::ops::EmbedParams")],
    },
    KernelDef {
        kernel: "Embed(Format::BF16)",
        name: "embed_bf16",
        parts: &["embed.wgsl", "bf16.wgsl", "halves.wgsl"],
        overrides: &[],
        structs: &[("Params", "gpu::ops::EmbedParams")],
    },
    KernelDef {
        kernel: "Embed(Format::Q2K)",
        name: "embed_q2_k",
        parts: &["embed.wgsl", "q2_k.wgsl"],
        overrides: &[],
        structs: &[("Params", "gpu::ops::EmbedParams")],
    },
    KernelDef {
        kernel: "Embed(Format::Q3K)",
        name: "embed_q3_k",
        parts: &["embed.wgsl", "q3_k.wgsl"],
        overrides: &[],
        structs: &[("Params", "gpu::ops::EmbedParams")],
    },
    KernelDef {
        kernel: "Embed(Format::IQ4NL)",
        name: "embed_iq4_nl",
        parts: &["embed.wgsl", "iq4_nl.wgsl", "iq4_values.wgsl"],
        overrides: &[],
        structs: &[("Params", "gpu::ops::EmbedParams")],
    },
    KernelDef {
        kernel: "Embed(Format::IQ4XS)",
        name: "embed_iq4_xs",
        parts: &["embed.wgsl", "iq4_xs.wgsl", "iq4_values.wgsl"],
        overrides: &[],
        structs: &[("Params", "gpu::ops::EmbedParams")],
    },
    KernelDef {
        kernel: "MoeGroup",
        name: "moe_group",
        parts: &["moe_group.wgsl"],
        overrides: &[],
        structs: &[("Params", "gpu::ops::MoeGroupParams")],
    },
    KernelDef {
        kernel: "MoeSum",
        name: "moe_sum",
        parts: &["moe_sum.wgsl"],
        overrides: &[],
        structs: &[("Params", "gpu::ops::MoeSumParams")],
    },
    KernelDef {
        kernel: "KvAppend",
        name: "kv_append",
        parts: &["kv_append.wgsl", "step.wgsl"],
        overrides: &[],
        structs: &[("Params", "gpu::ops::KvAppendParams"), ("Step", "gpu::ops::Step")],
    },
        // every latent width plan::check accepts
    KernelDef {
        kernel: "Attention",
        name: "attention",
        parts: &["attention.wgsl", "step.wgsl"],
        overrides: &[("N_KV", &[64.0, 128.0, 192.0, 256.0, 320.0, 384.0, 448.0, 512.0])],
        structs: &[("Params", "gpu::ops::AttentionParams"), ("Step", "gpu::ops::Step")],
    },
    KernelDef {
        kernel: "AttentionHead",
        name: "attention_head",
        parts: &["attention_head.wgsl", "step.wgsl"],
        overrides: &[],
        structs: &[("Params", "gpu::ops::AttentionHeadParams"), ("Step", "gpu::ops::Step")],
    },
    KernelDef {
        kernel: "Router",
        name: "router",
        parts: &["router.wgsl"],
        overrides: &[],
        structs: &[("Params", "gpu::ops::RouterParams")],
    },
    KernelDef {
        kernel: "ReadBandwidth",
        name: "read_bandwidth",
        parts: &["read_bandwidth.wgsl"],
        overrides: &[],
        structs: &[("Params", "bench::ReadParams")],
    },
    KernelDef {
        kernel: "TopK",
        name: "topk",
        parts: &["topk.wgsl"],
        overrides: &[("FIRST", &[0.0, 1.0])],
        structs: &[("Params", "gpu::ops::TopKParams")],
    },
];
