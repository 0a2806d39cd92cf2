//! How a prefill chunk's ops are cut into the command buffers it is
//! submitted in, so the GPU starts before the host has recorded them all.

/// A chunk is submitted in three command buffers: the ops before
/// ceil(len / PART_DIVS[0]) (at least one), then those before
/// ceil(len / PART_DIVS[1]), then the rest (`Prefill::record`'s parts).
/// Recording costs the host ~3 µs a dispatch, ~2.5 ms for a 512-token
/// chunk's ~890, and a chunk submitted whole leaves the GPU idle for all
/// of it at the start of every prefill; a command buffer costs the GPU
/// ~50 µs (journal, session 35). H200, session 40, two parts (the first
/// sixteenth, ~3.5 ms of GPU work at 512 tokens, then the rest): pp512
/// +5.5%, @ d16384 +2.2%, `--no-coopmat` +1.5%; a thirty-second gained
/// less at 512 tokens. A short prompt's ops take the GPU less time each,
/// so its first sixteenth can end before the rest is recorded; three
/// parts (1/32, 1/8, the rest), session 41: pp32 +5%, @ d4096 +3%, pp128
/// +2.7%, pp512 equal.
const PART_DIVS: [usize; 2] = [32, 8];

/// Command buffers a chunk is submitted in.
pub const PARTS: usize = PART_DIVS.len() + 1;

/// The ops of part `part` of a plan of `n` ops (empty past the last part).
pub(super) fn part_ops(n: usize, part: usize) -> std::ops::Range<usize> {
    let end = |i: usize| PART_DIVS.get(i).map_or(n, |d| n.div_ceil(*d));
    let start = if part == 0 { 0 } else { end(part - 1) };
    start..end(part).max(start)
}

#[cfg(test)]
mod tests {
    use super::{part_ops, PARTS};

    /// The parts cover a plan's ops once each, in order, the first
    /// holding at least one; parts past the last are empty.
    #[test]
    fn parts_cover_every_op_once() {
        for n in [1, 2, 3, 8, 9, 31, 32, 33, 60, 888, 10_000] {
            let mut next = 0;
            for part in 0..PARTS {
                let r = part_ops(n, part);
                assert_eq!(r.start, next, "{n} ops, part {part}");
                assert!(r.end >= r.start);
                next = r.end;
            }
            assert_eq!(next, n, "{n} ops");
            assert!(!part_ops(n, 0).is_empty());
            assert!(part_ops(n, PARTS).is_empty());
            assert!(part_ops(n, PARTS + 5).is_empty());
        }
        assert_eq!(part_ops(888, 0), 0..28);
        assert_eq!(part_ops(888, 1), 28..111);
        assert_eq!(part_ops(888, 2), 111..888);
    }
}
