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
//! odd), and every load is aligned.

use crate::error::{Error, Result};

/// Split GGUF Q4_0 blocks into (scales, nibbles) byte arrays as drawn above.
pub fn repack_q4_0(blocks: &[u8]) -> Result<(Vec<u8>, Vec<u8>)> {
    if blocks.len() % 18 != 0 {
        return Err(Error::InvalidArgument(format!(
            "{} bytes is not a whole number of Q4_0 blocks",
            blocks.len()
        )));
    }
    let n = blocks.len() / 18;
    let mut scales = Vec::with_capacity(2 * n.next_multiple_of(2));
    let mut nibbles = Vec::with_capacity(16 * n);
    for b in blocks.chunks_exact(18) {
        scales.extend_from_slice(&b[..2]);
        nibbles.extend_from_slice(&b[2..]);
    }
    scales.resize(2 * n.next_multiple_of(2), 0);
    Ok((scales, nibbles))
}

/// Split GGUF Q8_0 blocks (f16 scale + 32 signed bytes, 34 B) into scales
/// (two f16 per word, as for Q4_0) and quants (32 bytes per block, unchanged).
pub fn repack_q8_0(blocks: &[u8]) -> Result<(Vec<u8>, Vec<u8>)> {
    if blocks.len() % 34 != 0 {
        return Err(Error::InvalidArgument(format!(
            "{} bytes is not a whole number of Q8_0 blocks",
            blocks.len()
        )));
    }
    let n = blocks.len() / 34;
    let mut scales = Vec::with_capacity(2 * n.next_multiple_of(2));
    let mut quants = Vec::with_capacity(32 * n);
    for b in blocks.chunks_exact(34) {
        scales.extend_from_slice(&b[..2]);
        quants.extend_from_slice(&b[2..]);
    }
    scales.resize(2 * n.next_multiple_of(2), 0);
    Ok((scales, quants))
}

/// Pad each 210-byte Q6_K super-block to 212 bytes so every block starts on
/// a word (shaders/q6_k.wgsl reads it as array<u32>).
pub fn pad_q6_k(blocks: &[u8]) -> Result<Vec<u8>> {
    if blocks.len() % 210 != 0 {
        return Err(Error::InvalidArgument(format!(
            "{} bytes is not a whole number of Q6_K blocks",
            blocks.len()
        )));
    }
    let mut out = Vec::with_capacity(blocks.len() / 210 * 212);
    for b in blocks.chunks_exact(210) {
        out.extend_from_slice(b);
        out.extend_from_slice(&[0, 0]);
    }
    Ok(out)
}
