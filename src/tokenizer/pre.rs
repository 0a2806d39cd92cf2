//! Pre-tokenizers: how `tokenizer.ggml.pre` splits text into the pieces
//! BPE merges within. Each accepted name maps to llama.cpp's regex list for
//! it (`llm_tokenizer_bpe`), run through the `tokenizers` crate's `Split`
//! (fancy-regex, so the `(?!\S)` lookahead works as written) followed by
//! `ByteLevel` to map bytes to the GPT-2 alphabet.

use tokenizers::pre_tokenizers::byte_level::ByteLevel;
use tokenizers::pre_tokenizers::sequence::Sequence;
use tokenizers::pre_tokenizers::split::{Split, SplitPattern};
use tokenizers::pre_tokenizers::PreTokenizerWrapper;
use tokenizers::{
    OffsetReferential, OffsetType, PreTokenizedString, PreTokenizer, SplitDelimiterBehavior,
};

use super::tok_err;
use crate::error::{Error, Result};

/// The split rules of one `tokenizer.ggml.pre` value: llama.cpp's regex
/// list (`llm_tokenizer_bpe`), applied one after another, each splitting
/// the pieces of the previous one with matches kept (Isolated).
pub(super) struct PreSpec {
    pub regexes: &'static [&'static str],
    pub ignore_merges: bool,
}

/// llama3's regex; llama.cpp's CHATGLM4 case uses exactly this string.
const LLAMA3: &str = r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";

/// Accepted `tokenizer.ggml.pre` values: GLM-4.7-Flash and the deepseek2
/// relatives of model-spec §6. The regex lists are llama.cpp's for the same
/// names; fancy-regex supplies the `(?!\S)` lookahead they need.
///
/// `ignore_merges` (a whole pre-token that is a vocab entry is emitted
/// as-is) is on where the HF `tokenizer.json` has it: llama3 and youtu, and
/// glm4, whose tokenizer.json sets it although mainline llama.cpp does not
/// (there, e.g. " 王" cannot be reached by merges and comes out as three
/// tokens; see unslothai/llama.cpp#125). HF is the reference the model was
/// trained with, so glmw follows it.
pub(super) fn pre_spec(pre: &str) -> Option<PreSpec> {
    const DEFAULT: &[&str] = &[
        r"[\p{P}\$\+<=>\^~\|]+",
        r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)",
        r"\p{N}+",
        r"[0-9][0-9][0-9]",
    ];
    // The `\x{..}` escapes are Greek/letterlike code points that Unicode
    // normalisation (NFC) replaces by look-alikes; written literally they
    // can silently turn into other characters and reverse a range.
    const DEEPSEEK_LLM: &[&str] = &[
        r"[\r\n]",
        r"\s?[A-Za-zµÀ-ÖØ-öø-ƺƼ-ƿǄ-ʓʕ-ʯͰ-ͳͶͷͻ-ͽͿΆΈ-ΊΌΎ-ΡΣ-ϵϷ-ҁҊ-ԯԱ-ՖႠ-ჅᎠ-Ᏽᏸ-ᏽᲐ-ᲺᲽ-Ჿᴀ-ᴫᵫ-ᵷᵹ-ᶚḀ-ἕἘ-Ἕἠ-ὅὈ-Ὅὐ-ὗὙὛὝὟ-\x{1F7D}ᾀ-ᾴᾶ-ᾼ\x{1FBE}ῂ-ῄῆ-ῌῐ-\x{1FD3}ῖ-\x{1FDB}ῠ-Ῥῲ-ῴῶ-ῼℂℇℊ-ℓℕℙ-ℝℤ\x{2126}ℨ\x{212A}-ℭℯ-ℴℹℼ-ℿⅅ-ⅉⅎↃↄⰀ-ⱻⱾ-ⳤⳫ-ⳮⳲⳳꙀ-ꙭꚀ-ꚛꜢ-ꝯꝱ-ꞇꞋ-ꞎꭰ-ꮿﬀ-ﬆﬓ-ﬗＡ-Ｚａ-ｚ𐐀-𐑏𐒰-𐓓𐓘-𐓻𐲀-𐲲𐳀-𐳲𑢠-𑣟𞤀-𞥃]+",
        r"\s?[!-/:-~！-／：-～‘-‟　-。]+",
        r"\s+$",
        r"[一-龥ࠀ-一가-퟿]+",
        r"\p{N}+",
    ];
    const DEEPSEEK_V3: &[&str] = &[
        r"\p{N}{1,3}",
        r"[一-龥぀-ゟ゠-ヿ]+",
        r##"[!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"##,
    ];
    const YOUTU: &[&str] = &[
        r"[가-힣ㄱ-ㆎ]+|[！…“”‘’—：；，、-〿︰-﹏]+|[ㄅ-ㄯ]+|[一-龥぀-ゟ゠-ヿ]+",
        r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+",
    ];
    let (regexes, ignore_merges): (&'static [&'static str], bool) = match pre {
        "glm4" | "chatglm-bpe" => (&[LLAMA3], true),
        "llama-bpe" | "llama3" | "llama-v3" => (&[LLAMA3], true),
        "default" => (DEFAULT, false),
        "deepseek-llm" => (DEEPSEEK_LLM, false),
        "deepseek-v3" => (DEEPSEEK_V3, false),
        "youtu" => (YOUTU, true),
        _ => return None,
    };
    Some(PreSpec {
        regexes,
        ignore_merges,
    })
}

pub(super) const ACCEPTED_PRE: &str =
    "glm4, chatglm-bpe, llama-bpe, llama3, llama-v3, default, deepseek-llm, deepseek-v3, youtu";

/// The pre-tokenized pieces of `text` under `pre` rules, in the byte-level
/// alphabet: what BPE sees. Used by the synthetic vocabulary to train merges
/// on exactly the pieces the real tokenizer would produce.
pub fn pre_tokenize(pre: &str, text: &str) -> Result<Vec<String>> {
    let spec = pre_spec(pre).ok_or_else(|| Error::Unsupported(format!("pre-tokenizer {pre:?}")))?;
    let seq = build_pre_tokenizer(&spec)?;
    let mut pts = PreTokenizedString::from(text);
    seq.pre_tokenize(&mut pts)
        .map_err(|e| tok_err("pre-tokenizing", e))?;
    Ok(pts
        .get_splits(OffsetReferential::Original, OffsetType::Byte)
        .into_iter()
        .map(|(s, _, _)| s.to_string())
        .collect())
}

pub(super) fn build_pre_tokenizer(spec: &PreSpec) -> Result<Sequence> {
    let mut steps = Vec::with_capacity(spec.regexes.len() + 1);
    for re in spec.regexes {
        let split = Split::new(
            SplitPattern::Regex(re.to_string()),
            SplitDelimiterBehavior::Isolated,
            false,
        )
        .map_err(|e| tok_err("pre-tokenizer regex", e))?;
        steps.push(PreTokenizerWrapper::Split(split));
    }
    // The regexes already split; ByteLevel only maps bytes to symbols.
    steps.push(PreTokenizerWrapper::ByteLevel(
        ByteLevel::default()
            .add_prefix_space(false)
            .use_regex(false),
    ));
    Ok(Sequence::new(steps))
}
