//! Weight layouts on the GPU. GGUF's Q4_0 block is 18 bytes (f16 scale +
//! 16 nibble bytes), so blocks are not 4-byte aligned and a kernel would
//! need byte-address arithmetic to read them. At load each Q4_0 matrix is
//! split into two aligned arrays, block i of the matrix (row-major) going to:
//!
//! ```text
//!  GGUF:     | d0 | q0 (16 B) | d1 | q1 (16 B) | d2 | q2 ... |   18 B/block
//!
//!  scales:   | d0 d1 | d2 d3 | ...      array<u32>, two f16 per word
//!             word i/2, half i%2           (low half = even block)
//!  nibbles:  | q0 (16 B) | q1 (16 B) |    array<vec4<u32>>, one 16-byte
//!                                          load per block, bytes unchanged
//! ```
//!
//! Total size stays 18 bytes per block (plus 2 bytes when the block count is
//! odd), and every load is aligned. Q8_0 (34 B) and Q5_0 (22 B: f16 d, then
//! qh and qs) split the same way after their 2-byte scale, Q4_1 (20 B) and
//! Q5_1 (24 B) after their 4-byte scale and min; IQ4_NL has Q4_0's block
//! (its nibbles index a codebook) and splits as Q4_0 does. Q6_K's 210-byte
//! super-blocks are rearranged into 224 with each unit's bytes together
//! (`repack_q6_k`) and Q3_K's 110-byte ones padded to 112; IQ4_XS's
//! 136-byte ones move their 8-byte head behind the nibbles and pad to 144
//! (every unit's nibbles one vec4). The other formats need nothing: floats,
//! Q4_K / Q5_K, whose 144- and 176-byte super-blocks are whole vec4s, and
//! Q2_K (84 bytes, whole words).

use crate::error::{Error, Result};

/// Bytes of each array `repack_*` makes from `n` blocks split as
/// (head, tail): heads padded to whole words.
pub fn split_sizes(n: usize, head: usize, tail: usize) -> [usize; 2] {
    [(head * n).next_multiple_of(4), tail * n]
}

/// Split every `head + tail`-byte block of `blocks` into its first `head`
/// bytes (appended to `heads`) and the rest (to `tails`), on all cores:
/// loading a full-size model repacks gigabytes.
pub fn split_into(blocks: &[u8], head: usize, tail: usize, heads: &mut [u8], tails: &mut [u8]) {
    let block = head + tail;
    let n = blocks.len() / block;
    heads[head * n..].fill(0);
    let per = n.div_ceil(threads_for(n)).max(1);
    std::thread::scope(|s| {
        let parts = blocks
            .chunks(per * block)
            .zip(heads.chunks_mut(per * head))
            .zip(tails.chunks_mut(per * tail));
        for ((src, h), t) in parts {
            s.spawn(move || {
                let dst = h.chunks_exact_mut(head).zip(t.chunks_exact_mut(tail));
                for (b, (hh, tt)) in src.chunks_exact(block).zip(dst) {
                    hh.copy_from_slice(&b[..head]);
                    tt.copy_from_slice(&b[head..]);
                }
            });
        }
    });
}

/// `f(block, out block)` for every `from`-byte block of `blocks` and its
/// `to`-byte place in `out`, on all cores.
fn map_blocks(
    blocks: &[u8],
    from: usize,
    to: usize,
    out: &mut [u8],
    f: impl Fn(&[u8], &mut [u8]) + Sync,
) {
    let n = blocks.len() / from;
    let per = n.div_ceil(threads_for(n)).max(1);
    let f = &f;
    std::thread::scope(|s| {
        for (src, dst) in blocks.chunks(per * from).zip(out.chunks_mut(per * to)) {
            s.spawn(move || {
                for (b, o) in src.chunks_exact(from).zip(dst.chunks_exact_mut(to)) {
                    f(b, o);
                }
            });
        }
    });
}

/// `from`-byte blocks into `out` with `to`-byte strides, on all cores:
/// each block's bytes from `rot` on, then its first `rot`, then zeros.
fn pad_into(blocks: &[u8], from: usize, to: usize, rot: usize, out: &mut [u8]) {
    map_blocks(blocks, from, to, out, |b, o| {
        o[..from - rot].copy_from_slice(&b[rot..]);
        o[from - rot..from].copy_from_slice(&b[..rot]);
        o[from..].fill(0);
    });
}

/// Threads worth starting for `n` blocks (one per 64 Ki blocks, at most
/// one per core).
/// `pieces` (of one length) back to back into `out`, on all cores: the
/// gather of gate and up rows into one matrix.
pub fn gather_parallel(pieces: &[&[u8]], out: &mut [u8]) {
    let len = pieces.first().map_or(0, |p| p.len()).max(1);
    let per = pieces.len().div_ceil(threads_for(out.len() / 64)).max(1);
    std::thread::scope(|s| {
        for (ps, dst) in pieces.chunks(per).zip(out.chunks_mut(per * len)) {
            s.spawn(move || {
                for (p, d) in ps.iter().zip(dst.chunks_mut(len)) {
                    d.copy_from_slice(p);
                }
            });
        }
    });
}

fn threads_for(n: usize) -> usize {
    let cores = std::thread::available_parallelism().map_or(1, |c| c.get());
    (n / 65536).clamp(1, cores)
}

fn whole(blocks: &[u8], size: usize, what: &str) -> Result<usize> {
    if blocks.len() % size != 0 {
        return Err(Error::InvalidArgument(format!(
            "{} bytes is not a whole number of {what} blocks",
            blocks.len()
        )));
    }
    Ok(blocks.len() / size)
}

fn split(blocks: &[u8], head: usize, tail: usize, what: &str) -> Result<(Vec<u8>, Vec<u8>)> {
    let n = whole(blocks, head + tail, what)?;
    let [hs, ts] = split_sizes(n, head, tail);
    let (mut h, mut t) = (vec![0u8; hs], vec![0u8; ts]);
    split_into(blocks, head, tail, &mut h, &mut t);
    Ok((h, t))
}

/// Split GGUF Q4_0 blocks into (scales, nibbles) byte arrays as drawn above.
pub fn repack_q4_0(blocks: &[u8]) -> Result<(Vec<u8>, Vec<u8>)> {
    split(blocks, 2, 16, "Q4_0")
}

/// Split GGUF IQ4_NL blocks (f16 scale + 16 bytes of 4-bit codebook
/// indices, 18 B: Q4_0's layout) into (scales, nibbles) as for Q4_0.
pub fn repack_iq4_nl(blocks: &[u8]) -> Result<(Vec<u8>, Vec<u8>)> {
    split(blocks, 2, 16, "IQ4_NL")
}

/// Split GGUF Q8_0 blocks (f16 scale + 32 signed bytes, 34 B) into scales
/// (two f16 per word, as for Q4_0) and quants (32 bytes per block, unchanged).
pub fn repack_q8_0(blocks: &[u8]) -> Result<(Vec<u8>, Vec<u8>)> {
    split(blocks, 2, 32, "Q8_0")
}

/// Split GGUF Q4_1 blocks (f16 scale, f16 min, 16 nibble bytes: 20 B) into
/// scales (d and m in one word per block) and nibbles (as for Q4_0).
pub fn repack_q4_1(blocks: &[u8]) -> Result<(Vec<u8>, Vec<u8>)> {
    split(blocks, 4, 16, "Q4_1")
}

/// Split GGUF Q5_0 blocks (f16 scale, 4 bytes qh, 16 bytes qs: 22 B) into
/// scales (two f16 per word, as for Q4_0) and quants (qh then qs, 20 bytes:
/// five words per block, bytes unchanged). attn_k_b is the only Q5_0 matrix
/// of a Q4_K_M file and it is small, so five word loads a unit cost less
/// than padding every block to a vec4 boundary would.
pub fn repack_q5_0(blocks: &[u8]) -> Result<(Vec<u8>, Vec<u8>)> {
    split(blocks, 2, 20, "Q5_0")
}

/// Split GGUF Q5_1 blocks (f16 scale, f16 min, qh, qs: 24 B) into scales (d
/// and m in one word per block) and quants (five words, as for Q5_0; a
/// Q5_K_M file's attn_k_b).
pub fn repack_q5_1(blocks: &[u8]) -> Result<(Vec<u8>, Vec<u8>)> {
    split(blocks, 4, 20, "Q5_1")
}

/// Each 210-byte Q6_K super-block rearranged into 224 bytes (14 vec4s) so
/// that each unit's bytes lie together, as shaders/q6_k.wgsl draws it: per
/// unit its 32 low nibbles in one vec4 (Q4_0's order) and its 32 high
/// pairs in two words; then the 16 scale bytes and d unchanged.
pub fn repack_q6_k(blocks: &[u8]) -> Result<Vec<u8>> {
    let n = whole(blocks, 210, "Q6_K")?;
    let mut out = vec![0u8; 224 * n];
    map_blocks(blocks, 210, 224, &mut out, q6_k_units);
    Ok(out)
}

/// One Q6_K super-block `b` (GGUF: ql[128], qh[64], sc[16], d) into `o`.
/// Unit j = 4h + k holds weights 128h + 32k + i (i < 32): low nibble in
/// ql[64h + 32(k & 1) + i] (high half when k >= 2), high pair in bits 2k of
/// qh[32h + i].
fn q6_k_units(b: &[u8], o: &mut [u8]) {
    let (ql, qh) = (&b[..128], &b[128..192]);
    for j in 0..8 {
        let (h, k) = (j / 4, j % 4);
        let nib = |i: usize| (ql[64 * h + 32 * (k & 1) + i] >> (4 * (k >> 1))) & 0xF;
        let pair = |i: usize| (qh[32 * h + i] >> (2 * k)) & 3;
        for p in 0..16 {
            o[16 * j + p] = nib(p) | nib(p + 16) << 4;
        }
        for w in 0..2 {
            for c in 0..4 {
                let i = 8 * w + c;
                o[128 + 8 * j + 4 * w + c] =
                    pair(i) | pair(i + 16) << 2 | pair(i + 4) << 4 | pair(i + 20) << 6;
            }
        }
    }
    o[192..210].copy_from_slice(&b[192..210]);
    o[210..].fill(0);
}

/// Each 136-byte IQ4_XS super-block with its 8-byte head (d, the scales)
/// moved behind its 128 bytes of nibbles and padded to 144 bytes, so
/// every block and every unit's nibbles start on a vec4
/// (shaders/iq4_xs.wgsl reads it as `array<vec4<u32>>`).
pub fn rotate_iq4_xs(blocks: &[u8]) -> Result<Vec<u8>> {
    pad_rotated(blocks, 136, 144, 8, "IQ4_XS")
}

/// Pad each 110-byte Q3_K super-block to 112 bytes (7 vec4s) so every
/// block starts on a vec4 (shaders/q3_k.wgsl reads it as `array<vec4<u32>>`).
pub fn pad_q3_k(blocks: &[u8]) -> Result<Vec<u8>> {
    pad(blocks, 110, 112, "Q3_K")
}

fn pad(blocks: &[u8], from: usize, to: usize, what: &str) -> Result<Vec<u8>> {
    pad_rotated(blocks, from, to, 0, what)
}

fn pad_rotated(blocks: &[u8], from: usize, to: usize, rot: usize, what: &str) -> Result<Vec<u8>> {
    let n = whole(blocks, from, what)?;
    let mut out = vec![0u8; to * n];
    pad_into(blocks, from, to, rot, &mut out);
    Ok(out)
}
