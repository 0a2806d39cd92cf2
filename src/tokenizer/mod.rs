//! Text <-> token ids for byte-level BPE GGUF vocabularies (model-spec §5).
//!
//! Pipeline, in llama.cpp's order: special tokens are cut out of the text
//! literally first (`tokenizer_st_partition`), each remaining stretch is
//! split by the pre-tokenizer regex(es) of `tokenizer.ggml.pre`, mapped to
//! the GPT-2 byte alphabet, and BPE-merged by rank. The regex split, the
//! byte mapping and the merging are the `tokenizers` crate's; the special
//! partition is done here because its `parse_special = false` behaviour
//! (control tokens become plain text, user-defined ones are still split
//! out) has no per-call switch in `tokenizers`.

pub mod bytes;
pub mod chat;
mod pre;
mod prefix;
mod template;

use tokenizers::models::bpe::{Vocab, BPE};
use tokenizers::pre_tokenizers::sequence::Sequence;
use tokenizers::{Model, OffsetReferential, OffsetType, PreTokenizedString, PreTokenizer};

pub use bytes::StreamDecoder;
pub use chat::{render_chat, render_chat_parts, ChatMessage, ChatPart, Role};
pub use pre::pre_tokenize;
use pre::{build_pre_tokenizer, pre_spec, ACCEPTED_PRE};
pub use template::{ChatTemplate, GLM_TEMPLATE};

use crate::error::{Error, Result};
use crate::model::config::MAX_VOCAB;

/// llama.cpp `llama_token_type` values (`tokenizer.ggml.token_type`).
pub mod token_type {
    pub const UNDEFINED: i32 = 0;
    pub const NORMAL: i32 = 1;
    pub const UNKNOWN: i32 = 2;
    pub const CONTROL: i32 = 3;
    pub const USER_DEFINED: i32 = 4;
    pub const UNUSED: i32 = 5;
    pub const BYTE: i32 = 6;
}
use token_type as tt;

/// Everything the tokenizer is built from, as stored in `tokenizer.ggml.*`.
#[derive(Clone, Debug, Default)]
pub struct TokenizerParts {
    /// `tokenizer.ggml.model`; only "gpt2" (byte-level BPE) is supported.
    pub model: String,
    /// `tokenizer.ggml.pre`, e.g. "glm4".
    pub pre: String,
    pub tokens: Vec<String>,
    /// One `token_type` per token; empty means "all NORMAL" (llama.cpp's
    /// default when the key is absent).
    pub token_types: Vec<i32>,
    /// "left right", index = rank.
    pub merges: Vec<String>,
    pub bos: Option<u32>,
    pub eos: Option<u32>,
    pub eot: Option<u32>,
    pub eom: Option<u32>,
    pub pad: Option<u32>,
}

/// A byte-level BPE tokenizer. Cheap to share: `&self` methods only, and
/// `Send + Sync`.
pub struct Tokenizer {
    bpe: BPE,
    pre_tok: Sequence,
    pre: String,
    tokens: Vec<String>,
    types: Vec<i32>,
    /// The bytes each token stands for, flattened: token i is
    /// `piece_data[piece_off[i]..piece_off[i + 1]]`.
    piece_data: Vec<u8>,
    piece_off: Vec<u32>,
    /// Tokens cut out of the text before BPE, longest text first (the order
    /// llama.cpp tries them in).
    specials: Vec<u32>,
    /// Tokens left out of the BPE vocabulary (see `in_bpe`).
    not_bpe: Vec<u32>,
    eog: Vec<u32>,
    bos: Option<u32>,
    eos: Option<u32>,
    eot: Option<u32>,
    eom: Option<u32>,
    pad: Option<u32>,
    /// The file's chat template, else GLM's.
    template: ChatTemplate,
}

impl std::fmt::Debug for Tokenizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tokenizer")
            .field("pre", &self.pre)
            .field("n_vocab", &self.tokens.len())
            .field("n_special", &self.specials.len())
            .field("eog", &self.eog)
            .finish()
    }
}

fn tok_err(what: &str, e: impl std::fmt::Display) -> Error {
    Error::Tokenizer(format!("{what}: {e}"))
}

/// Split a GGUF merge "left right" the way llama.cpp does: at the first
/// space after the first character, so a left part that is itself " " works.
fn split_merge(m: &str) -> Option<(&str, &str)> {
    let (i, _) = m.char_indices().skip(1).find(|&(_, c)| c == ' ')?;
    Some((&m[..i], &m[i + 1..]))
}

/// The token types, NORMAL where the file has none; one per token, each known.
fn checked_types(types: Vec<i32>, n: usize) -> Result<Vec<i32>> {
    let types = if types.is_empty() {
        vec![tt::NORMAL; n]
    } else if types.len() != n {
        return Err(Error::Tokenizer(format!(
            "{} token types for {n} tokens",
            types.len()
        )));
    } else {
        types
    };
    if let Some(i) = types
        .iter()
        .position(|t| !(tt::UNDEFINED..=tt::BYTE).contains(t))
    {
        return Err(Error::Tokenizer(format!(
            "token {i} has unknown token type {}",
            types[i]
        )));
    }
    Ok(types)
}

/// The BPE model over the BPE-able tokens, and the ids left out of it.
/// Only BPE-able tokens go into the BPE vocabulary: with ignore_merges a
/// pre-token equal to a control token's text ("/nothink" is one regex
/// piece) would otherwise come out as that control token even with
/// parse_special off.
fn build_bpe(
    tokens: &[String],
    types: &[i32],
    merges: &[String],
    ignore_merges: bool,
) -> Result<(BPE, Vec<u32>)> {
    let n = tokens.len();
    let vocab: Vocab = tokens
        .iter()
        .zip(types)
        .enumerate()
        .filter(|&(_, (_, &ty))| in_bpe(ty))
        .map(|(i, (t, _))| (t.clone(), i as u32))
        .collect();
    let not_bpe: Vec<u32> = (0..n as u32)
        .filter(|&i| !in_bpe(types[i as usize]))
        .collect();
    if vocab.len() + not_bpe.len() != n {
        // llama.cpp keeps the last id for a repeated string; so does this map.
        log::warn!(
            "tokenizer: {} token strings appear more than once",
            n - vocab.len() - not_bpe.len()
        );
    }
    let mut pairs = Vec::with_capacity(merges.len());
    for (i, m) in merges.iter().enumerate() {
        let (a, b) = split_merge(m).ok_or_else(|| {
            Error::Tokenizer(format!(
                "merge {i} ({m:?}) is not of the form \"left right\""
            ))
        })?;
        pairs.push((a.to_string(), b.to_string()));
    }
    let bpe = BPE::builder()
        .vocab_and_merges(vocab, pairs)
        .ignore_merges(ignore_merges)
        .build()
        .map_err(|e| {
            bad_merge(tokens, types, merges).unwrap_or_else(|| tok_err("building BPE", e))
        })?;
    Ok((bpe, not_bpe))
}

/// Every token's bytes, concatenated, and the offsets between them.
fn pieces(tokens: &[String], types: &[i32]) -> Result<(Vec<u8>, Vec<u32>)> {
    let mut data = Vec::with_capacity(tokens.len() * 8);
    let mut off = Vec::with_capacity(tokens.len() + 1);
    off.push(0u32);
    for (t, &ty) in tokens.iter().zip(types) {
        if in_bpe(ty) {
            bytes::decode_byte_level(t, &mut data);
        } else {
            // Specials and user-defined tokens are stored as plain text.
            data.extend_from_slice(t.as_bytes());
        }
        let end = u32::try_from(data.len())
            .map_err(|_| Error::Tokenizer("vocabulary text over 4 GiB".into()))?;
        off.push(end);
    }
    Ok((data, off))
}

/// Control, user-defined and unknown tokens with text, longest first (ties
/// by id): the order special tokens are matched in.
fn specials_longest_first(tokens: &[String], types: &[i32]) -> Vec<u32> {
    let mut specials: Vec<u32> = (0..tokens.len() as u32)
        .filter(|&i| {
            matches!(
                types[i as usize],
                tt::CONTROL | tt::USER_DEFINED | tt::UNKNOWN
            )
        })
        .filter(|&i| !tokens[i as usize].is_empty())
        .collect();
    specials.sort_by_key(|&i| (std::cmp::Reverse(tokens[i as usize].len()), i));
    specials
}

impl Tokenizer {
    pub fn from_parts(p: TokenizerParts) -> Result<Tokenizer> {
        if p.model != "gpt2" {
            return Err(Error::Unsupported(format!(
                "tokenizer model {:?}: only byte-level BPE (\"gpt2\") is supported",
                p.model
            )));
        }
        let spec = pre_spec(&p.pre).ok_or_else(|| {
            Error::Unsupported(format!(
                "pre-tokenizer {:?} (supported: {ACCEPTED_PRE})",
                p.pre
            ))
        })?;
        let n = p.tokens.len();
        if n == 0 || n > u32::MAX as usize {
            return Err(Error::Tokenizer(format!("vocabulary has {n} tokens")));
        }
        let types = checked_types(p.token_types, n)?;
        for (name, id) in [
            ("bos", p.bos),
            ("eos", p.eos),
            ("eot", p.eot),
            ("eom", p.eom),
            ("pad", p.pad),
        ] {
            if let Some(id) = id.filter(|&id| id as usize >= n) {
                return Err(Error::Tokenizer(format!(
                    "{name} token id {id} is outside the {n}-token vocabulary"
                )));
            }
        }
        let (bpe, not_bpe) = build_bpe(&p.tokens, &types, &p.merges, spec.ignore_merges)?;
        let pre_tok = build_pre_tokenizer(&spec)?;
        let (piece_data, piece_off) = pieces(&p.tokens, &types)?;
        let specials = specials_longest_first(&p.tokens, &types);
        let mut eog = Vec::new();
        for id in [p.eos, p.eot, p.eom].into_iter().flatten() {
            if !eog.contains(&id) {
                eog.push(id);
            }
        }
        Ok(Tokenizer {
            bpe,
            pre_tok,
            pre: p.pre,
            tokens: p.tokens,
            types,
            piece_data,
            piece_off,
            specials,
            not_bpe,
            eog,
            bos: p.bos,
            eos: p.eos,
            eot: p.eot,
            eom: p.eom,
            pad: p.pad,
            template: ChatTemplate::glm(),
        })
    }

    /// Read `tokenizer.ggml.*` from a GGUF file. A missing `pre` means
    /// "default", as in llama.cpp (which warns that quality degrades).
    pub fn from_gguf(f: &crate::gguf::GgufFile) -> Result<Tokenizer> {
        let need = |k: &str| Error::Tokenizer(format!("GGUF has no {k}"));
        let model = f
            .get_str("tokenizer.ggml.model")?
            .ok_or_else(|| need("tokenizer.ggml.model"))?;
        let pre = match f.get_str("tokenizer.ggml.pre")? {
            Some(p) => p.to_string(),
            None => {
                log::warn!("GGUF has no tokenizer.ggml.pre; using the \"default\" pre-tokenizer");
                "default".to_string()
            }
        };
        let owned = |k: &str| -> Result<Vec<String>> {
            let v = f
                .get_str_array(&format!("tokenizer.ggml.{k}"))?
                .ok_or_else(|| need(&format!("tokenizer.ggml.{k}")))?;
            // Bounded before each string becomes an allocation of its own.
            if v.len() > MAX_VOCAB {
                return Err(Error::Tokenizer(format!(
                    "tokenizer.ggml.{k} has {} entries; at most {MAX_VOCAB} are supported",
                    v.len()
                )));
            }
            Ok(v.iter().map(str::to_string).collect())
        };
        let id = |k: &str| f.get_u32(&format!("tokenizer.ggml.{k}"));
        let tok = Tokenizer::from_parts(TokenizerParts {
            model: model.to_string(),
            pre,
            tokens: owned("tokens")?,
            token_types: f
                .get_i32_array("tokenizer.ggml.token_type")?
                .unwrap_or_default(),
            merges: owned("merges")?,
            bos: id("bos_token_id")?,
            eos: id("eos_token_id")?,
            eot: id("eot_token_id")?,
            eom: id("eom_token_id")?,
            pad: id("padding_token_id")?,
        })?;
        Ok(match f.get_str("tokenizer.chat_template")? {
            Some(t) => tok.with_chat_template(ChatTemplate::new(t)),
            None => tok,
        })
    }

    /// Render chats with `template` from now on; its `bos_token` and
    /// `eos_token` are this vocabulary's.
    pub fn with_chat_template(mut self, template: ChatTemplate) -> Tokenizer {
        let text = |id: Option<u32>| {
            id.and_then(|i| self.tokens.get(i as usize))
                .cloned()
                .unwrap_or_default()
        };
        let (bos, eos) = (text(self.bos), text(self.eos));
        self.template = template.with_special_tokens(&bos, &eos);
        self
    }

    /// The chat template `encode_messages` renders with.
    pub fn chat_template(&self) -> &ChatTemplate {
        &self.template
    }

    /// Rendered chat (`ChatTemplate::render_parts`) -> ids: the template's markers
    /// as special tokens, message text as plain text.
    pub fn encode_chat(&self, parts: &[ChatPart]) -> Result<Vec<u32>> {
        let mut ids = Vec::new();
        for p in parts {
            ids.extend(self.encode(&p.text, p.special)?);
        }
        Ok(ids)
    }

    /// `messages` in the model's chat template, ending with the assistant's
    /// turn (`thinking`: the template's `enable_thinking`), as ids.
    pub fn encode_messages(&self, messages: &[ChatMessage], thinking: bool) -> Result<Vec<u32>> {
        self.encode_messages_with_tools(messages, None, thinking)
    }

    /// `encode_messages` with `tools` (OpenAI's tool definitions, a JSON
    /// list's text) in the template's tools section.
    pub fn encode_messages_with_tools(
        &self,
        messages: &[ChatMessage],
        tools: Option<&str>,
        thinking: bool,
    ) -> Result<Vec<u32>> {
        let parts = self
            .template
            .render_parts_with_tools(messages, tools, true, thinking)?;
        self.encode_chat(&parts)
    }

    /// Text -> ids. With `parse_special`, the text of every control token
    /// (`[gMASK]`, `<|user|>`, ...) becomes that token; without it only
    /// user-defined tokens are cut out (llama.cpp does the same) and control
    /// token text is tokenized like any other text. No BOS is added: GLM's
    /// prompt prefix comes from the chat template.
    pub fn encode(&self, text: &str, parse_special: bool) -> Result<Vec<u32>> {
        let mut out = Vec::with_capacity(text.len() / 3 + 1);
        for frag in self.partition(text, parse_special) {
            match frag {
                Frag::Special(id) => out.push(id),
                Frag::Text(a, b) => self.encode_plain(&text[a..b], &mut out)?,
            }
        }
        Ok(out)
    }

    /// llama.cpp's `tokenizer_st_partition`: each special (longest first)
    /// is searched for in the text not yet claimed by a longer one.
    fn partition(&self, text: &str, parse_special: bool) -> Vec<Frag> {
        let mut frags = vec![Frag::Text(0, text.len())];
        for &id in &self.specials {
            if !parse_special && self.types[id as usize] != tt::USER_DEFINED {
                continue;
            }
            let pat = self.tokens[id as usize].as_str();
            if !text.contains(pat) {
                continue;
            }
            let mut next = Vec::with_capacity(frags.len() + 2);
            for f in frags {
                let Frag::Text(mut a, b) = f else {
                    next.push(f);
                    continue;
                };
                while let Some(pos) = text[a..b].find(pat) {
                    if pos > 0 {
                        next.push(Frag::Text(a, a + pos));
                    }
                    next.push(Frag::Special(id));
                    a += pos + pat.len();
                }
                if a < b {
                    next.push(Frag::Text(a, b));
                }
            }
            frags = next;
        }
        frags
    }

    fn encode_plain(&self, text: &str, out: &mut Vec<u32>) -> Result<()> {
        let mut pts = PreTokenizedString::from(text);
        self.pre_tok
            .pre_tokenize(&mut pts)
            .map_err(|e| tok_err("pre-tokenizing", e))?;
        for (piece, _, _) in pts.get_splits(OffsetReferential::Original, OffsetType::Byte) {
            let toks = self.bpe.tokenize(piece).map_err(|e| tok_err("BPE", e))?;
            // Without an unk token, `tokenizers` silently drops a symbol the
            // vocabulary lacks; refuse rather than lose text.
            let covered: usize = toks.iter().map(|t| t.offsets.1 - t.offsets.0).sum();
            if covered != piece.len() {
                let mut raw = Vec::new();
                bytes::decode_byte_level(piece, &mut raw);
                return Err(Error::Tokenizer(format!(
                    "the vocabulary cannot represent {:?} (a byte symbol is missing)",
                    String::from_utf8_lossy(&raw)
                )));
            }
            out.extend(toks.iter().map(|t| t.id));
        }
        Ok(())
    }

    /// Ids -> text. Control, unknown and unused tokens are not rendered
    /// (llama.cpp `token_to_piece` with `special = false`); a cut-off
    /// character becomes U+FFFD.
    pub fn decode(&self, ids: &[u32]) -> Result<String> {
        let mut buf = Vec::new();
        for &id in ids {
            self.render_into(id, &mut buf)?;
        }
        Ok(String::from_utf8_lossy(&buf).into_owned())
    }

    /// Append what `decode` shows for `id`.
    pub(crate) fn render_into(&self, id: u32, out: &mut Vec<u8>) -> Result<()> {
        let ty = *self.types.get(id as usize).ok_or_else(|| self.bad_id(id))?;
        // Untyped tokens render too (llama.cpp would drop them), since BPE
        // can produce them and decode(encode(x)) must give x back.
        if in_bpe(ty) || ty == tt::USER_DEFINED {
            out.extend_from_slice(self.piece_slice(id));
        }
        Ok(())
    }

    fn bad_id(&self, id: u32) -> Error {
        Error::InvalidArgument(format!(
            "token id {id} is outside the {}-token vocabulary",
            self.tokens.len()
        ))
    }

    fn piece_slice(&self, id: u32) -> &[u8] {
        let i = id as usize;
        &self.piece_data[self.piece_off[i] as usize..self.piece_off[i + 1] as usize]
    }

    /// The raw vocabulary string (byte-level alphabet for normal tokens).
    pub fn piece(&self, id: u32) -> Option<&str> {
        self.tokens.get(id as usize).map(String::as_str)
    }

    /// The bytes the token stands for; for specials, their text. Unlike
    /// `decode`, control tokens are included, so this is the way to show
    /// or detect `</think>`.
    pub fn piece_bytes(&self, id: u32) -> Option<Vec<u8>> {
        ((id as usize) < self.tokens.len()).then(|| self.piece_slice(id).to_vec())
    }

    /// `tokenizer.ggml.token_type` of `id`.
    pub fn token_type(&self, id: u32) -> Option<i32> {
        self.types.get(id as usize).copied()
    }

    pub fn n_vocab(&self) -> usize {
        self.tokens.len()
    }

    /// Exact vocabulary lookup. Special ids must be found this way, by
    /// their text, never hard-coded (model-spec §5.2).
    pub fn token_id(&self, text: &str) -> Option<u32> {
        self.bpe.token_to_id(text).or_else(|| {
            let found = self.not_bpe.iter().rev();
            found.copied().find(|&i| self.tokens[i as usize] == text)
        })
    }

    /// End-of-generation ids: eos, eot and eom, those the file names.
    pub fn eog_ids(&self) -> &[u32] {
        &self.eog
    }

    pub fn is_eog(&self, id: u32) -> bool {
        self.eog.contains(&id)
    }

    pub fn bos(&self) -> Option<u32> {
        self.bos
    }
    pub fn eos(&self) -> Option<u32> {
        self.eos
    }
    pub fn eot(&self) -> Option<u32> {
        self.eot
    }
    pub fn eom(&self) -> Option<u32> {
        self.eom
    }
    pub fn pad(&self) -> Option<u32> {
        self.pad
    }

    /// `tokenizer.ggml.pre` this tokenizer was built for.
    pub fn pre(&self) -> &str {
        &self.pre
    }

    pub fn stream_decoder(&self) -> StreamDecoder<'_> {
        StreamDecoder::new(self)
    }
}

/// Token types BPE may produce: text in the byte-level alphabet (untyped
/// tokens are taken to be normal ones).
fn in_bpe(ty: i32) -> bool {
    matches!(ty, tt::NORMAL | tt::UNDEFINED)
}

enum Frag {
    Text(usize, usize),
    Special(u32),
}

/// After `tokenizers` rejected the merges: name the first bad one with its
/// rank, which its own error does not.
fn bad_merge(tokens: &[String], types: &[i32], merges: &[String]) -> Option<Error> {
    let known: std::collections::HashSet<&str> = tokens
        .iter()
        .zip(types)
        .filter(|&(_, &ty)| in_bpe(ty))
        .map(|(t, _)| t.as_str())
        .collect();
    merges.iter().enumerate().find_map(|(i, m)| {
        let (a, b) = split_merge(m)?;
        let joined = format!("{a}{b}");
        let missing = [a, b, joined.as_str()]
            .into_iter()
            .find(|t| !known.contains(t))?;
        Some(Error::Tokenizer(format!(
            "merge {i} ({m:?}) names {missing:?}, which is not a normal token of the vocabulary"
        )))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tiny(pre: &str) -> TokenizerParts {
        let mut tokens: Vec<String> = bytes::byte_symbols_in_vocab_order()
            .into_iter()
            .map(String::from)
            .collect();
        let mut merges = Vec::new();
        for (a, b) in [
            ("Ġ", "Ġ"),
            ("h", "e"),
            ("l", "l"),
            ("he", "ll"),
            ("hell", "o"),
            ("Ġ", "w"),
        ] {
            merges.push(format!("{a} {b}"));
            tokens.push(format!("{a}{b}"));
        }
        let mut types = vec![tt::NORMAL; tokens.len()];
        for s in ["<|endoftext|>", "<|user|>", "<|u"] {
            tokens.push(s.to_string());
            types.push(tt::CONTROL);
        }
        tokens.push("@@".to_string());
        types.push(tt::USER_DEFINED);
        TokenizerParts {
            model: "gpt2".into(),
            pre: pre.into(),
            tokens,
            token_types: types,
            merges,
            eos: Some(262),
            eot: Some(263),
            ..Default::default()
        }
    }

    #[test]
    fn every_pre_regex_compiles_and_round_trips() {
        let text = "Hello, world!  It's 12345 tokens\n\n\tÀ 中文 한국어 ｈｉ 🦀 x  ";
        for pre in ACCEPTED_PRE.split(", ") {
            let t = Tokenizer::from_parts(tiny(pre)).unwrap_or_else(|e| panic!("{pre}: {e}"));
            let ids = t.encode(text, false).unwrap();
            assert_eq!(t.decode(&ids).unwrap(), text, "{pre}");
        }
    }

    #[test]
    fn specials_longest_first_and_user_defined_always() {
        let t = Tokenizer::from_parts(tiny("glm4")).unwrap();
        let user = t.token_id("<|user|>").unwrap();
        let short = t.token_id("<|u").unwrap();
        let at = t.token_id("@@").unwrap();
        let ids = t.encode("<|user|><|u@@", true).unwrap();
        assert_eq!(ids, vec![user, short, at]);
        let plain = t.encode("<|user|>@@", false).unwrap();
        assert!(!plain.contains(&user));
        assert_eq!(plain.last(), Some(&at));
        assert_eq!(t.decode(&ids).unwrap(), "@@");
        assert_eq!(t.piece_bytes(user).unwrap(), b"<|user|>");
    }

    #[test]
    fn ignore_merges_and_merge_order() {
        let t = Tokenizer::from_parts(tiny("glm4")).unwrap();
        let hello = t.token_id("hello").unwrap();
        assert_eq!(t.encode("hello", false).unwrap(), vec![hello]);
        assert_eq!(
            t.encode(" w", false).unwrap(),
            vec![t.token_id("Ġw").unwrap()]
        );
    }

    #[test]
    fn merge_split_like_llama_cpp() {
        assert_eq!(split_merge("Ġ Ġ"), Some(("Ġ", "Ġ")));
        assert_eq!(split_merge("  x"), Some((" ", "x")));
        assert_eq!(split_merge("ab"), None);
    }

    #[test]
    fn send_sync() {
        fn check<T: Send + Sync>() {}
        check::<Tokenizer>();
    }
}
