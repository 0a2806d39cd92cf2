// How the prefill matmuls (matmul.wgsl, matmul_coop.wgsl) stage a weight
// unit in formats whose unit has no raw form (stage_raw.wgsl): loaded as
// f32 (`unit_load`), held through the step's products, stored into the
// workgroup's weight tile (matmul_coop rounds it to f16).

alias Staged = Unit;

fn stage_load(u: u32) -> Staged {
    return unit_load(u);
}

fn stage_store(o: u32, w: Staged) {
    store_unit(o, w);
}
