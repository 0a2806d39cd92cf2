// How the prefill matmuls (matmul.wgsl, matmul_coop.wgsl) stage a weight
// unit in formats that split unit_load into its loads (`unit_raw`) and its
// arithmetic (`unit_of`): a step holds the raw words through its products
// (Q4_0: five registers rather than 32 floats; fewer registers, more
// workgroups resident) and dequantizes them as it stores them.

alias Staged = Raw;

fn stage_load(u: u32) -> Staged {
    return unit_raw(u);
}

fn stage_store(o: u32, w: Staged) {
    store_unit(o, unit_of(w));
}
