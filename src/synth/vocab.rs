//! A synthetic byte-level BPE vocabulary with GLM's layout, for synthetic
//! GGUF files: 256 byte symbols, merged tokens, GLM's 36 special tokens at
//! `first_special`, then padding. The first merges are learnt from a small
//! English sample with the real glm4 pre-tokenizer, so English text
//! tokenizes into word-like pieces ("Ġthe", "ing") as with the real
//! vocabulary; the rest are seeded merges of word-like tokens.

use std::collections::{HashMap, HashSet};

use crate::tokenizer::bytes::byte_symbols_in_vocab_order;
use crate::tokenizer::token_type;

pub struct SynthVocab {
    pub tokens: Vec<String>,
    pub token_types: Vec<i32>,
    pub merges: Vec<String>,
}

/// GLM-4.x's added tokens in id order (model-spec §5.2).
pub const GLM_SPECIALS: [&str; 36] = [
    "<|endoftext|>",
    "[MASK]",
    "[gMASK]",
    "[sMASK]",
    "<sop>",
    "<eop>",
    "<|system|>",
    "<|user|>",
    "<|assistant|>",
    "<|observation|>",
    "<|begin_of_image|>",
    "<|end_of_image|>",
    "<|begin_of_video|>",
    "<|end_of_video|>",
    "<|begin_of_audio|>",
    "<|end_of_audio|>",
    "<|begin_of_transcription|>",
    "<|end_of_transcription|>",
    "<|code_prefix|>",
    "<|code_middle|>",
    "<|code_suffix|>",
    "<think>",
    "</think>",
    "<tool_call>",
    "</tool_call>",
    "<tool_response>",
    "</tool_response>",
    "<arg_key>",
    "</arg_key>",
    "<arg_value>",
    "</arg_value>",
    "/nothink",
    "<|begin_of_box|>",
    "<|end_of_box|>",
    "<|image|>",
    "<|video|>",
];

/// Training text for the first merges (written for this purpose). It has
/// no `<` or `|`, and learnt tokens equal to a special are refused anyway.
const SAMPLE: &str = "\
The river runs through the middle of the town, and on warm evenings the people who live there walk along its banks.
There is a bridge of old stone, a market that opens every morning at seven, and a small library with a green door.
In the spring the water rises, and the children watch the boats carry wood, grain and letters down to the sea.

It's a quiet place, but it isn't a sleepy one. The baker starts work before the sun is up; by 6:30 the first bread
is ready, and by 9 o'clock there is nothing left but a few rolls. People say they've never tasted better bread,
and they'll tell you so whether you ask them or not. We'd like to think that's true, and we're probably right.

The town council meets on the first Monday of each month. In 2023 it met 12 times, spent 145,000 on the roads,
and planted 1,250 new trees along the northern edge of the park. The mayor said that the trees would give shade
to the paths within ten years, and that the next project would be a new school for the growing number of families.

A teacher at the school explained the plan: \"We want every student to learn how things work. How does a clock
keep time? Why does ice float on water? What makes the weather change from one day to the next?\" She believes
that questions are more important than answers, because a good question keeps you thinking long after the lesson.

Cooking is another thing the town does well. A simple recipe for soup:
  1. Cut two onions, three carrots and a potato into small pieces.
  2. Warm some oil in a large pot and cook the onions until they are soft.
  3. Add the other vegetables, four cups of water, salt and pepper.
  4. Let it simmer for forty minutes, then serve it with fresh bread.

Numbers matter in the market too. A kilogram of apples costs 3.50, a dozen eggs 4.20, and a bottle of milk 1.10.
The traders write their prices on small boards, and they change them when the weather is good or the harvest is poor.

def count_words(text):
    counts = {}
    for word in text.split():
        counts[word] = counts.get(word, 0) + 1
    return counts

Some of the older buildings were built more than three hundred years ago. Their walls are thick, their windows are
small, and their roofs are covered with dark red tiles. Visitors often stop to take pictures, and the owners don't mind.
In the evening the lights come on one by one, the streets become quiet, and the sound of the river is all you can hear.
Everyone agrees that the best time to visit is early autumn, when the air is clear and the leaves begin to turn.
";

struct Rng(u64);

impl Rng {
    /// SplitMix64: small, fast and good enough to pick merge pairs.
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
    /// An index below `n`, biased toward 0: early tokens are the frequent
    /// ones, and real merges mostly extend frequent pieces.
    fn skewed(&mut self, n: usize) -> usize {
        let u = self.unit();
        ((u * u * n as f64) as usize).min(n - 1)
    }
}

/// Vocabulary of exactly `n_vocab` tokens: the 256 byte symbols in GPT-2
/// order, merged tokens up to `first_special`, GLM's 36 specials as CONTROL,
/// then `[PAD{id}]` fillers as UNUSED (type 5), which is what llama.cpp's
/// converter writes for ids the HF vocabulary leaves empty. Every token
/// string is unique, and every merge "a b" joins two tokens that exist
/// before it into a token made by it or by an earlier merge, so the result
/// loads in any BPE implementation. There can be a few more merges than
/// merged tokens (a merge may land on an existing string, as in real BPE
/// training). Deterministic in `seed`.
///
/// Panics unless `256 <= first_special` and `first_special + 36 <= n_vocab`
/// (callers pick these from a preset, not from user input).
pub fn synthetic_vocab(n_vocab: usize, first_special: usize, seed: u64) -> SynthVocab {
    assert!(
        first_special >= 256 && first_special + GLM_SPECIALS.len() <= n_vocab,
        "synthetic_vocab: need 256 <= first_special ({first_special}) and first_special + 36 <= n_vocab ({n_vocab})"
    );
    let mut b = Builder {
        tokens: Vec::with_capacity(n_vocab),
        index: HashMap::new(),
        merges: Vec::new(),
    };
    for c in byte_symbols_in_vocab_order() {
        b.add(c.to_string());
    }
    let reserved: HashSet<&str> = GLM_SPECIALS.iter().copied().collect();
    b.train(first_special, &reserved);
    b.random_merges(first_special, &reserved, seed);

    let mut token_types = vec![token_type::NORMAL; first_special];
    let mut tokens = b.tokens;
    for s in GLM_SPECIALS {
        tokens.push(s.to_string());
        token_types.push(token_type::CONTROL);
    }
    while tokens.len() < n_vocab {
        tokens.push(format!("[PAD{}]", tokens.len()));
        token_types.push(token_type::UNUSED);
    }
    SynthVocab {
        tokens,
        token_types,
        merges: b.merges,
    }
}

struct Builder {
    tokens: Vec<String>,
    index: HashMap<String, u32>,
    merges: Vec<String>,
}

impl Builder {
    fn add(&mut self, s: String) -> u32 {
        let id = self.tokens.len() as u32;
        self.index.insert(s.clone(), id);
        self.tokens.push(s);
        id
    }

    /// Record merge (a, b); returns the id of a+b, adding it if new. A merge
    /// may land on an existing token ("ab"+"c" after "a"+"bc"), as in real
    /// BPE training; the merge is kept and no duplicate string is made.
    fn merge(&mut self, a: u32, b: u32) -> u32 {
        let (sa, sb) = (&self.tokens[a as usize], &self.tokens[b as usize]);
        self.merges.push(format!("{sa} {sb}"));
        let joined = format!("{sa}{sb}");
        match self.index.get(&joined) {
            Some(&id) => id,
            None => self.add(joined),
        }
    }

    /// Plain BPE training on `SAMPLE`: repeatedly merge the most frequent
    /// adjacent pair (ties: lowest ids) until every sample word is one token
    /// or the token budget is used up.
    fn train(&mut self, limit: usize, reserved: &HashSet<&str>) {
        let pieces =
            crate::tokenizer::pre_tokenize("glm4", SAMPLE).expect("glm4 pre-tokenizer is built in");
        let mut counts: HashMap<String, u64> = HashMap::new();
        for p in pieces {
            *counts.entry(p).or_default() += 1;
        }
        let mut words: Vec<(Vec<u32>, u64)> = counts
            .into_iter()
            .map(|(w, c)| (w.chars().map(|ch| self.index[&ch.to_string()]).collect(), c))
            .collect();
        words.sort();
        while self.tokens.len() < limit {
            let mut pairs: HashMap<(u32, u32), u64> = HashMap::new();
            for (w, c) in &words {
                for p in w.windows(2) {
                    *pairs.entry((p[0], p[1])).or_default() += c;
                }
            }
            let Some((&(a, b), _)) = pairs
                .iter()
                .max_by_key(|&(&(a, b), &n)| (n, std::cmp::Reverse((a, b))))
            else {
                break;
            };
            let joined = format!("{}{}", self.tokens[a as usize], self.tokens[b as usize]);
            if reserved.contains(joined.as_str()) {
                break;
            }
            let id = self.merge(a, b);
            for (w, _) in &mut words {
                let mut i = 0;
                while i + 1 < w.len() {
                    if w[i] == a && w[i + 1] == b {
                        w[i] = id;
                        w.remove(i + 1);
                    }
                    i += 1;
                }
            }
        }
    }

    /// Fill the rest with seeded merges that extend word-like tokens by short
    /// lowercase ones, so new tokens look like (pseudo-)words.
    fn random_merges(&mut self, limit: usize, reserved: &HashSet<&str>, seed: u64) {
        let lower = |s: &str| !s.is_empty() && s.bytes().all(|c| c.is_ascii_lowercase());
        // Left parts: an optional leading Ġ (space), a letter, lowercase after it.
        let word_like = |s: &str| {
            let w = s.strip_prefix('Ġ').unwrap_or(s);
            w.bytes().next().is_some_and(|c| c.is_ascii_alphabetic())
                && (w.len() == 1 || lower(&w[1..]))
        };
        // Right parts: short lowercase runs, like the suffixes and syllables
        // real merges append.
        let suffix = |s: &str| lower(s) && s.len() <= 4;
        // Learnt tokens first (in merge order, i.e. by frequency), then single
        // letters by English frequency: `skewed` favours the front.
        let learnt = 256..self.tokens.len() as u32;
        let letters = b"etaoinshrdlcumwfgypbvkjxqz"
            .iter()
            .map(|&c| self.index[&(c as char).to_string()]);
        let mut left: Vec<u32> = learnt
            .clone()
            .filter(|&i| word_like(&self.tokens[i as usize]))
            .collect();
        let spaced: Vec<u32> = letters
            .clone()
            .filter_map(|i| {
                self.index
                    .get(&format!("Ġ{}", self.tokens[i as usize]))
                    .copied()
            })
            .collect();
        left.extend(letters.clone().chain(spaced));
        let mut right: Vec<u32> = learnt
            .filter(|&i| suffix(&self.tokens[i as usize]))
            .collect();
        right.extend(letters);
        let mut rng = Rng(seed ^ 0x676C_6D77_766F_6362);
        let mut max_len = 12;
        let mut misses = 0u32;
        let mut joined = String::new();
        while self.tokens.len() < limit {
            let a = left[rng.skewed(left.len())];
            let b = right[rng.skewed(right.len())];
            let (sa, sb) = (&self.tokens[a as usize], &self.tokens[b as usize]);
            joined.clear();
            joined.push_str(sa);
            joined.push_str(sb);
            let fresh = joined.chars().count() <= max_len
                && !self.index.contains_key(&joined)
                && !reserved.contains(joined.as_str());
            if !fresh {
                misses += 1;
                // Small alphabets run out of short new strings: allow longer ones.
                if misses > 10_000 {
                    max_len *= 2;
                    misses = 0;
                }
                continue;
            }
            misses = 0;
            let id = self.merge(a, b);
            if word_like(&self.tokens[id as usize]) {
                left.push(id);
            }
            if suffix(&self.tokens[id as usize]) {
                right.push(id);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_and_uniqueness() {
        for (n, first) in [(512, 476), (300, 264), (1000, 900)] {
            let v = synthetic_vocab(n, first, 7);
            assert_eq!(v.tokens.len(), n);
            assert_eq!(v.token_types.len(), n);
            assert_eq!(v.tokens[first], "<|endoftext|>");
            assert_eq!(v.tokens[first + 35], "<|video|>");
            let set: HashSet<&String> = v.tokens.iter().collect();
            assert_eq!(set.len(), n, "duplicate token strings");
            assert!(v.merges.len() >= first - 256);
        }
    }

    #[test]
    fn deterministic_in_seed() {
        let a = synthetic_vocab(4000, 3900, 1);
        let b = synthetic_vocab(4000, 3900, 1);
        let c = synthetic_vocab(4000, 3900, 2);
        assert_eq!(a.tokens, b.tokens);
        assert_eq!(a.merges, b.merges);
        assert_ne!(a.tokens, c.tokens);
    }
}
