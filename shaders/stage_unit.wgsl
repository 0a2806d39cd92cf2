// How matmul_coop.wgsl stages a weight unit, for formats without a staging
// of their own: the unit is loaded as f32 (`unit_load`) and rounded to
// f16 as it is stored into wa.

alias Staged = Unit;

fn stage_load(u: u32) -> Staged {
    return unit_load(u);
}

// Unit element i holds weights 4i..4i+4; constant indices only.
fn stage_store(o: u32, w: Staged) {
    put4(o, 0u, w[0]);
    put4(o, 1u, w[1]);
    put4(o, 2u, w[2]);
    put4(o, 3u, w[3]);
    put4(o, 4u, w[4]);
    put4(o, 5u, w[5]);
    put4(o, 6u, w[6]);
    put4(o, 7u, w[7]);
}
