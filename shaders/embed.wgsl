// Token embedding gather, for every weight format (built with the same
// format files as matvec.wgsl, through `unit_load`): the rows of
// token_embd named by `tokens` become the residual stream's rows. The
// embedding lives on the GPU like every other weight, so a token costs a
// 4-byte write and no read of the mapped file.
//
// Bindings: 0 params (uniform), 1 tokens (array<u32>), 2 x (array<vec4<f32>>,
// n_tok rows of units·8 vec4s, out), 3-5 unused (the format files bind at 6
// and 7), 6 (and 7) the weights of the format file.
// Dispatch: (ceil(units / WG), n_tok, 1); one dispatch per part of a
// matrix split by rows, each writing the tokens whose row it holds.
// Invocation (u, t) owns unit u of token t's row: one unit_load, eight vec4
// stores.

/// host: gpu::ops::EMBED_WG
const WG: u32 = 64u;

alias Unit = array<vec4<f32>, 8>;

struct Params {
    // 32-weight units per row
    units: u32,
    // this part's rows: [row0, row0 + rows)
    row0: u32,
    rows: u32,
    _pad: u32,
}

@group(0) @binding(0) var<uniform> p: Params;
@group(0) @binding(1) var<storage, read> tokens: array<u32>;
@group(0) @binding(2) var<storage, read_write> x: array<vec4<f32>>;

// The format files' unit_dot reads x through xv; the gather never calls it.
fn xv(i: u32) -> vec4<f32> {
    return vec4<f32>(0.0);
}

// The four bytes of `w`, low first.
fn bytes4(w: u32) -> vec4<u32> {
    return (vec4<u32>(w) >> vec4<u32>(0u, 8u, 16u, 24u)) & vec4<u32>(0xFFu);
}

@compute @workgroup_size(WG)
fn main(ids: Ids, @builtin(workgroup_id) wid: vec3<u32>) {
    let u = wid.x * WG + ids.lid;
    let t = wid.y;
    let row = tokens[t];
    if u >= p.units || row < p.row0 || row >= p.row0 + p.rows {
        return;
    }
    let w = unit_load((row - p.row0) * p.units + u);
    let o = (t * p.units + u) * 8u;
    x[o] = w[0];
    x[o + 1u] = w[1];
    x[o + 2u] = w[2];
    x[o + 3u] = w[3];
    x[o + 4u] = w[4];
    x[o + 5u] = w[5];
    x[o + 6u] = w[6];
    x[o + 7u] = w[7];
}
