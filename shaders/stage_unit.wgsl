// How matmul_coop.wgsl stages a weight unit in formats whose unit has no
// raw form (stage_raw.wgsl): loaded as f32 (`unit_load`), held through
// the step's products, rounded to f16 as it is stored into wa.

alias Staged = Unit;

fn stage_load(u: u32) -> Staged {
    return unit_load(u);
}

fn stage_store(o: u32, w: Staged) {
    store_unit(o, w);
}
