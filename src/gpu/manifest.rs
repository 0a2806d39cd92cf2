// The kernel table, shared word for word by build.rs (which `include!`s this
// file to validate and translate every kernel) and by src/gpu/kernels.rs
// (which builds the pipelines). Plain data only: build.rs has no crate deps.

/// One kernel: the WGSL files it is made of (concatenated in this order,
/// then the reduction prelude), and every value each override may take.
pub struct KernelDef {
    pub name: &'static str,
    pub parts: &'static [&'static str],
    pub overrides: &'static [(&'static str, &'static [f64])],
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
        name: "rms_norm",
        parts: &["rms_norm.wgsl"],
        overrides: &[],
    },
    KernelDef {
        name: "matvec_f32",
        parts: &["matvec.wgsl", "f32.wgsl"],
        overrides: MATVEC_OVERRIDES,
    },
    KernelDef {
        name: "matvec_q4_0",
        parts: &["matvec.wgsl", "q4_0.wgsl"],
        overrides: MATVEC_OVERRIDES,
    },
    KernelDef {
        name: "matvec_q8_0",
        parts: &["matvec.wgsl", "q8_0.wgsl"],
        overrides: MATVEC_OVERRIDES,
    },
    KernelDef {
        name: "matvec_q5_k",
        parts: &["matvec.wgsl", "q5_k.wgsl"],
        overrides: MATVEC_OVERRIDES,
    },
    KernelDef {
        name: "matvec_q6_k",
        parts: &["matvec.wgsl", "q6_k.wgsl"],
        overrides: MATVEC_OVERRIDES,
    },
    KernelDef {
        name: "matmul_f32",
        parts: &["matmul.wgsl", "f32.wgsl"],
        overrides: MATMUL_OVERRIDES,
    },
    KernelDef {
        name: "matmul_q4_0",
        parts: &["matmul.wgsl", "q4_0.wgsl"],
        overrides: MATMUL_OVERRIDES,
    },
    KernelDef {
        name: "matmul_q8_0",
        parts: &["matmul.wgsl", "q8_0.wgsl"],
        overrides: MATMUL_OVERRIDES,
    },
    KernelDef {
        name: "matmul_q5_k",
        parts: &["matmul.wgsl", "q5_k.wgsl"],
        overrides: MATMUL_OVERRIDES,
    },
    KernelDef {
        name: "matmul_q6_k",
        parts: &["matmul.wgsl", "q6_k.wgsl"],
        overrides: MATMUL_OVERRIDES,
    },
    KernelDef {
        name: "embed_f32",
        parts: &["embed.wgsl", "f32.wgsl"],
        overrides: &[],
    },
    KernelDef {
        name: "embed_q4_0",
        parts: &["embed.wgsl", "q4_0.wgsl"],
        overrides: &[],
    },
    KernelDef {
        name: "embed_q8_0",
        parts: &["embed.wgsl", "q8_0.wgsl"],
        overrides: &[],
    },
    KernelDef {
        name: "embed_q5_k",
        parts: &["embed.wgsl", "q5_k.wgsl"],
        overrides: &[],
    },
    KernelDef {
        name: "embed_q6_k",
        parts: &["embed.wgsl", "q6_k.wgsl"],
        overrides: &[],
    },
    KernelDef {
        name: "moe_group",
        parts: &["moe_group.wgsl"],
        overrides: &[],
    },
    KernelDef {
        name: "moe_sum",
        parts: &["moe_sum.wgsl"],
        overrides: &[],
    },
    KernelDef {
        name: "kv_append",
        parts: &["kv_append.wgsl", "step.wgsl"],
        overrides: &[],
    },
    KernelDef {
        name: "attention",
        parts: &["attention.wgsl", "step.wgsl"],
        // every latent width plan::check accepts
        overrides: &[(
            "N_KV",
            &[64.0, 128.0, 192.0, 256.0, 320.0, 384.0, 448.0, 512.0],
        )],
    },
    KernelDef {
        name: "attention_head",
        parts: &["attention_head.wgsl", "step.wgsl"],
        overrides: &[],
    },
    KernelDef {
        name: "router",
        parts: &["router.wgsl"],
        overrides: &[],
    },
    KernelDef {
        name: "read_bandwidth",
        parts: &["read_bandwidth.wgsl"],
        overrides: &[],
    },
    KernelDef {
        name: "topk",
        parts: &["topk.wgsl"],
        overrides: &[("FIRST", &[0.0, 1.0])],
    },
];
