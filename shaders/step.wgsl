// The per-token step record shared by kv_append.wgsl and attention.wgsl,
// bound as an array (binding 1): one record for a decode token, one per
// token of a prefill chunk (src/gpu/ops/mod.rs `Step`, written by the host).

struct Step {
    pos: u32,
    n_pos: u32,
    // attention splits for this position (ops::attention_splits)
    n_split: u32,
    _pad: u32,
    // (cos, sin) of rope pair i at this position, in .xy
    rope: array<vec4<f32>, 64>,
}
