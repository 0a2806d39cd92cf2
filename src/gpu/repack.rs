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
