//! The barriers wgpu 30 records between the dispatches of one command
//! encoder, counted from a plan's buffer uses without running it
//! (docs/performance.md, "What wgpu does between dispatches"). wgpu-core
//! tracks each whole buffer: a dispatch's state for it is the union of how
//! its bindings declare it (uniform, read-only or read_write storage); the
//! first use in the encoder is free; a use is free when the state is the
//! same as the previous dispatch's and holds no write (`skip_barrier` in
//! wgpu-core's track/mod.rs, with Vulkan's, Metal's and DX12's ordered
//! uses: every read-only use); anything else — read_write after read_write
//! of the same buffer too — is a transition. On Vulkan all of a dispatch's
//! transitions become one pipeline barrier that waits for all earlier work,
//! so a dispatch with any transition is one barrier.

use std::collections::HashMap;
use std::hash::Hash;

use super::kernels::Bind;
use super::ops::Dispatch;

/// Dispatches and barriers of a dispatch sequence recorded into one encoder.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Barriers {
    pub dispatches: usize,
    /// Dispatches preceded by at least one buffer transition (one pipeline
    /// barrier each on Vulkan).
    pub barriers: usize,
    /// Buffer transitions in all (a barrier may carry several).
    pub transitions: usize,
}

/// wgpu's buffer state bits for the three binding declarations.
const UNIFORM: u8 = 1;
const READ: u8 = 2;
const WRITE: u8 = 4;

fn state(b: Bind) -> u8 {
    match b {
        Bind::Uniform => UNIFORM,
        Bind::Read => READ,
        Bind::Write => WRITE,
    }
}

impl Barriers {
    /// The counts of dispatches with these transitions each.
    pub fn of(transitions: &[usize]) -> Barriers {
        Barriers {
            dispatches: transitions.len(),
            barriers: transitions.iter().filter(|&&t| t > 0).count(),
            transitions: transitions.iter().sum(),
        }
    }
}

/// Buffer transitions before each dispatch, the dispatches given as their
/// (buffer, declaration) uses; `K` identifies a buffer (`wgpu::Buffer`
/// compares by identity).
pub fn transitions_of<'a, K, I, U>(dispatches: I) -> Vec<usize>
where
    K: Eq + Hash + Clone + 'a,
    I: IntoIterator<Item = U>,
    U: IntoIterator<Item = &'a (K, Bind)>,
{
    let mut last: HashMap<K, u8> = HashMap::new();
    let mut out = Vec::new();
    for uses in dispatches {
        let mut now: Vec<(&K, u8)> = Vec::new();
        for (k, b) in uses {
            match now.iter_mut().find(|(n, _)| *n == k) {
                Some((_, s)) => *s |= state(*b),
                None => now.push((k, state(*b))),
            }
        }
        let mut transitions = 0;
        for (k, s) in now {
            if let Some(prev) = last.insert(k.clone(), s) {
                if prev != s || prev & WRITE != 0 {
                    transitions += 1;
                }
            }
        }
        out.push(transitions);
    }
    out
}

/// Buffer transitions before each of `dispatches`, recorded in order into
/// one encoder.
pub fn transitions<'a>(dispatches: impl IntoIterator<Item = &'a Dispatch>) -> Vec<usize> {
    transitions_of(dispatches.into_iter().map(|d| d.uses()))
}

/// Count over `dispatches` recorded in order into one encoder.
pub fn count<'a>(dispatches: impl IntoIterator<Item = &'a Dispatch>) -> Barriers {
    Barriers::of(&transitions(dispatches))
}

#[cfg(test)]
mod tests {
    use super::*;
    use Bind::{Read as R, Uniform as U, Write as W};

    fn n(seq: &[&[(u32, Bind)]]) -> (usize, usize) {
        let b = Barriers::of(&transitions_of(seq.iter().map(|d| d.iter())));
        (b.barriers, b.transitions)
    }

    #[test]
    fn first_use_is_free() {
        assert_eq!(n(&[&[(0, U), (1, R), (2, W)]]), (0, 0));
    }

    #[test]
    fn read_after_read_is_free_but_a_changed_read_state_is_not() {
        assert_eq!(n(&[&[(1, R)], &[(1, R)]]), (0, 0));
        assert_eq!(n(&[&[(1, U)], &[(1, U)]]), (0, 0));
        // uniform then storage-read: a state change, so a transition
        assert_eq!(n(&[&[(1, U)], &[(1, R)]]), (1, 1));
    }

    #[test]
    fn write_after_write_of_the_same_buffer_is_a_barrier() {
        assert_eq!(n(&[&[(2, W)], &[(2, W)]]), (1, 1));
        assert_eq!(n(&[&[(2, W)], &[(2, R)]]), (1, 1));
        assert_eq!(n(&[&[(2, R)], &[(2, W)]]), (1, 1));
    }

    #[test]
    fn independent_buffers_do_not_wait_and_one_barrier_carries_several() {
        assert_eq!(n(&[&[(1, W)], &[(2, W)], &[(3, R), (4, W)]]), (0, 0));
        assert_eq!(n(&[&[(1, W), (2, W)], &[(1, R), (2, R)]]), (1, 2));
    }

    #[test]
    fn tracking_spans_the_whole_sequence_not_neighbours() {
        // buffer 1 written, then untouched, then read two dispatches later
        assert_eq!(n(&[&[(1, W)], &[(2, W)], &[(1, R)]]), (1, 1));
    }

    #[test]
    fn a_buffer_bound_twice_in_one_dispatch_has_the_union_state() {
        assert_eq!(n(&[&[(1, U), (1, R)], &[(1, U), (1, R)]]), (0, 0));
        assert_eq!(n(&[&[(1, U), (1, R)], &[(1, R)]]), (1, 1));
    }
}
