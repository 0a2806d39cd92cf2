// The per-token step uniform shared by kv_append.wgsl and attention.wgsl;
// the host writes it before each token (src/gpu/ops.rs `Step`).

struct Step {
    pos: u32,
    n_pos: u32,
    // attention splits for this position (ops::attention_splits)
    n_split: u32,
    _pad: u32,
    // (cos, sin) of rope pair i at this position, in .xy
    rope: array<vec4<f32>, 64>,
}
