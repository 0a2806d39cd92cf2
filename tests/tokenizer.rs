//! Tokenizer behaviour on the full-size synthetic GLM vocabulary (specials at
//! the real ids) and on small hand-made vocabularies for edge cases.

use std::sync::OnceLock;
use std::time::Instant;

use glmw::gguf::{Array, GgufFile, GgufWriter, Value};
use glmw::synth::vocab::{synthetic_vocab, SynthVocab};
use glmw::tokenizer::bytes::{byte_symbols_in_vocab_order, BYTE_TO_CHAR};
use glmw::tokenizer::{pre_tokenize, render_chat, ChatMessage, Tokenizer, TokenizerParts};
use glmw::Error;

const N_VOCAB: usize = 154880;
const FIRST_SPECIAL: usize = 154820;

fn glm_parts(v: SynthVocab) -> TokenizerParts {
    TokenizerParts {
        model: "gpt2".into(),
        pre: "glm4".into(),
        tokens: v.tokens,
        token_types: v.token_types,
        merges: v.merges,
        bos: Some(154822),
        eos: Some(154820),
        eot: Some(154827),
        eom: Some(154829),
        pad: Some(154820),
    }
}

/// Built once and shared: the full-size vocabulary is the realistic case.
fn glm() -> &'static Tokenizer {
    static T: OnceLock<Tokenizer> = OnceLock::new();
    T.get_or_init(|| {
        let t0 = Instant::now();
        let v = synthetic_vocab(N_VOCAB, FIRST_SPECIAL, 42);
        let t1 = Instant::now();
        let n_merges = v.merges.len();
        let t = Tokenizer::from_parts(glm_parts(v)).expect("synthetic vocab builds");
        eprintln!(
            "full-size vocab: synthetic_vocab {:?}, Tokenizer::from_parts {:?} ({n_merges} merges)",
            t1 - t0,
            t1.elapsed()
        );
        t
    })
}

fn round_trip(t: &Tokenizer, text: &str) -> Vec<u32> {
    let ids = t.encode(text, false).unwrap();
    assert_eq!(t.decode(&ids).unwrap(), text, "round trip of {text:?}");
    let ids_special = t.encode(text, true).unwrap();
    assert_eq!(
        ids, ids_special,
        "no specials in {text:?}, so parse_special must not matter"
    );
    ids
}

#[test]
fn specials_resolve_by_string_at_real_ids() {
    let t = glm();
    assert_eq!(t.n_vocab(), N_VOCAB);
    for (s, id) in [
        ("<|endoftext|>", 154820),
        ("[MASK]", 154821),
        ("[gMASK]", 154822),
        ("<sop>", 154824),
        ("<|system|>", 154826),
        ("<|user|>", 154827),
        ("<|assistant|>", 154828),
        ("<|observation|>", 154829),
        ("<think>", 154841),
        ("</think>", 154842),
        ("/nothink", 154851),
        ("<|video|>", 154855),
    ] {
        assert_eq!(t.token_id(s), Some(id), "{s}");
        assert_eq!(t.piece(id), Some(s));
        assert_eq!(t.piece_bytes(id).unwrap(), s.as_bytes());
        assert_eq!(t.token_type(id), Some(3));
    }
    assert_eq!(t.piece(154856), Some("[PAD154856]"));
    assert_eq!(t.token_id("[PAD154856]"), Some(154856));
    assert_eq!(t.token_type(154856), Some(5));
    assert_eq!(t.token_id("no such token"), None);
}

#[test]
fn round_trips() {
    let t = glm();
    for text in [
        "Hello, world! The river runs through the middle of the town.",
        "中文测试：你好，世界。日本語もテスト。한국어",
        "emoji 🦀🎉👍🏽 and flags 🇫🇷, ZWJ 👩‍👩‍👧",
        "a   b\t\tc \n\n  d\r\n",
        "   leading and trailing   ",
        "numbers 1 12 123 1234 12345678 3.14159",
        "it's we're they'LL I'd",
        "def f(x):\n    return x ** 2  # comment\n",
        "\u{0}\u{1}\u{7f} control bytes and é ß ø",
        "",
    ] {
        round_trip(t, text);
    }
    assert!(t.encode("", true).unwrap().is_empty());
}

#[test]
fn english_tokenizes_into_word_pieces() {
    let t = glm();
    let text = "The town council meets on the first Monday of each month, and the people walk along the river.";
    let ids = round_trip(t, text);
    assert!(
        ids.len() * 3 < text.len(),
        "{} tokens for {} bytes",
        ids.len(),
        text.len()
    );
    assert!(t.encode(" the", false).unwrap().len() == 1);
}

#[test]
fn pre_tokenizer_splits_like_model_spec() {
    let p = |s: &str| pre_tokenize("glm4", s).unwrap();
    // \s+(?!\S): a space run before a word gives its last space to the word.
    assert_eq!(p("a   b"), ["a", "ĠĠ", "Ġb"]);
    assert_eq!(p("1234567"), ["123", "456", "7"]);
    assert_eq!(p("x1234 y"), ["x", "123", "4", "Ġy"]);
    assert_eq!(p("hi\n\nthere"), ["hi", "ĊĊ", "there"]);
    assert_eq!(p("ok.\n\nNext"), ["ok", ".ĊĊ", "Next"]);
    assert_eq!(p("I'm here"), ["I", "'m", "Ġhere"]);
    assert_eq!(p("end  "), ["end", "ĠĠ"]);
    assert_eq!(p("(hello)"), ["(hello", ")"]);
    // Encoding equals the concatenation of the pieces' encodings.
    let t = glm();
    let whole = t.encode("a   b", false).unwrap();
    let parts: Vec<u32> = ["a", "  ", " b"]
        .iter()
        .flat_map(|s| t.encode(s, false).unwrap())
        .collect();
    assert_eq!(whole, parts);
}

#[test]
fn special_tokens_need_parse_special() {
    let t = glm();
    let text = "[gMASK]<sop><|user|>Hi<|assistant|><think>";
    let ids = t.encode(text, true).unwrap();
    assert_eq!(&ids[..3], &[154822, 154824, 154827]);
    assert_eq!(&ids[ids.len() - 2..], &[154828, 154841]);
    assert_eq!(
        t.decode(&ids).unwrap(),
        "Hi",
        "control tokens are not rendered"
    );

    let plain = t.encode(text, false).unwrap();
    assert!(
        plain.iter().all(|&id| (id as usize) < FIRST_SPECIAL),
        "{plain:?}"
    );
    assert_eq!(t.decode(&plain).unwrap(), text);
    // "/nothink" is a single regex piece; as plain text it must not become
    // the control token through the whole-piece vocabulary lookup.
    assert_eq!(t.encode("/nothink", true).unwrap(), vec![154851]);
    let plain = t.encode("/nothink", false).unwrap();
    assert!(!plain.contains(&154851) && t.decode(&plain).unwrap() == "/nothink");
    // Specials inside words are still cut out.
    let ids = t.encode("x</think>y", true).unwrap();
    assert!(ids.contains(&154842));
}

#[test]
fn chat_prompt_encodes_to_glm_prefix() {
    let t = glm();
    let prompt = render_chat(
        &[ChatMessage::system("Be brief."), ChatMessage::user("Hello")],
        true,
        true,
    )
    .unwrap();
    assert_eq!(
        prompt,
        "[gMASK]<sop><|system|>Be brief.<|user|>Hello<|assistant|><think>"
    );
    let ids = t.encode(&prompt, true).unwrap();
    assert_eq!(&ids[..3], &[154822, 154824, 154826]);
    assert_eq!(*ids.last().unwrap(), 154841);
    let no_think = render_chat(&[ChatMessage::user("Hello")], true, false).unwrap();
    assert_eq!(no_think, "[gMASK]<sop><|user|>Hello<|assistant|></think>");
    assert_eq!(*t.encode(&no_think, true).unwrap().last().unwrap(), 154842);
}

#[test]
fn eog_ids() {
    let t = glm();
    assert_eq!(t.eog_ids(), &[154820, 154827, 154829]);
    assert!(t.is_eog(154827) && t.is_eog(154820) && t.is_eog(154829));
    assert!(!t.is_eog(154822) && !t.is_eog(0));
    assert_eq!(
        (t.bos(), t.eos(), t.pad()),
        (Some(154822), Some(154820), Some(154820))
    );
    let mut p = small_parts();
    p.eos = Some(256);
    p.eot = Some(256);
    assert_eq!(
        Tokenizer::from_parts(p).unwrap().eog_ids(),
        &[256],
        "duplicates collapse"
    );
    assert!(Tokenizer::from_parts(small_parts())
        .unwrap()
        .eog_ids()
        .is_empty());
}

fn byte_token(t: &Tokenizer, b: u8) -> u32 {
    t.token_id(&BYTE_TO_CHAR[b as usize].to_string()).unwrap()
}

#[test]
fn stream_decoder_never_splits_a_character() {
    let t = glm();
    let crab = "🦀".as_bytes();
    assert_eq!(crab.len(), 4);
    let mut d = t.stream_decoder();
    assert_eq!(d.push(byte_token(t, b'H')).unwrap(), "H");
    for (i, &b) in crab.iter().enumerate() {
        let out = d.push(byte_token(t, b)).unwrap();
        if i < 3 {
            assert_eq!(out, "", "byte {i} must be held back");
            // A control token in the middle is not rendered and does not break the character.
            assert_eq!(d.push(154827).unwrap(), "");
        } else {
            assert_eq!(out, "🦀");
        }
    }
    assert_eq!(d.pending_bytes(), 0);
    // Every prefix of a token stream gives only whole characters, and the
    // concatenation equals decode().
    let text = "日本語 🦀🇫🇷 ok é";
    let ids = t.encode(text, false).unwrap();
    let mut d = t.stream_decoder();
    let mut acc = String::new();
    for &id in &ids {
        acc.push_str(&d.push(id).unwrap());
        assert!(!acc.contains('\u{FFFD}'));
    }
    acc.push_str(&d.finish());
    assert_eq!(acc, text);
    // A cut-off character is flushed lossily; invalid bytes do not stall.
    let mut d = t.stream_decoder();
    assert_eq!(d.push(byte_token(t, 0xF0)).unwrap(), "");
    assert_eq!(d.finish(), "\u{FFFD}");
    assert_eq!(d.push(byte_token(t, 0xFF)).unwrap(), "\u{FFFD}");
    assert_eq!(d.push(byte_token(t, b'a')).unwrap(), "a");
    assert!(matches!(
        d.push(N_VOCAB as u32),
        Err(Error::InvalidArgument(_))
    ));
}

/// 256 byte symbols, a few merges and two specials.
fn small_parts() -> TokenizerParts {
    let mut tokens: Vec<String> = byte_symbols_in_vocab_order()
        .into_iter()
        .map(String::from)
        .collect();
    let mut merges = Vec::new();
    for (a, b) in [("a", "b"), ("ab", "c")] {
        merges.push(format!("{a} {b}"));
        tokens.push(format!("{a}{b}"));
    }
    let mut token_types = vec![1; tokens.len()];
    tokens.extend(["<|endoftext|>".to_string(), "<|user|>".to_string()]);
    token_types.extend([3, 3]);
    TokenizerParts {
        model: "gpt2".into(),
        pre: "glm4".into(),
        tokens,
        token_types,
        merges,
        ..Default::default()
    }
}

fn err_of(p: TokenizerParts) -> Error {
    Tokenizer::from_parts(p).expect_err("must be rejected")
}

#[test]
fn bad_inputs_are_errors() {
    let t = Tokenizer::from_parts(small_parts()).unwrap();
    assert_eq!(t.encode("abc", false).unwrap(), vec![257]);
    assert!(matches!(
        t.decode(&[0, 9999]),
        Err(Error::InvalidArgument(_))
    ));
    assert_eq!(t.piece(9999), None);
    assert_eq!(t.piece_bytes(9999), None);

    let mut p = small_parts();
    p.model = "llama".into();
    assert!(matches!(err_of(p), Error::Unsupported(m) if m.contains("gpt2")));
    let mut p = small_parts();
    p.pre = "qwen2".into();
    assert!(
        matches!(err_of(p), Error::Unsupported(m) if m.contains("qwen2") && m.contains("glm4"))
    );
    let mut p = small_parts();
    p.token_types.pop();
    assert!(matches!(err_of(p), Error::Tokenizer(m) if m.contains("token types")));
    let mut p = small_parts();
    p.token_types[3] = 9;
    assert!(matches!(err_of(p), Error::Tokenizer(m) if m.contains("token 3")));
    let mut p = small_parts();
    p.merges.push("ab zz".into());
    assert!(
        matches!(err_of(p), Error::Tokenizer(m) if m.contains("merge 2") && m.contains("\"zz\""))
    );
    let mut p = small_parts();
    p.merges.push("b c".into()); // "bc" itself is not a token
    assert!(
        matches!(err_of(p), Error::Tokenizer(m) if m.contains("merge 2") && m.contains("\"bc\""))
    );
    let mut p = small_parts();
    p.merges.push("abc".into());
    assert!(matches!(err_of(p), Error::Tokenizer(m) if m.contains("left right")));
    let mut p = small_parts();
    p.eos = Some(10_000);
    assert!(matches!(err_of(p), Error::Tokenizer(m) if m.contains("eos")));
    let mut p = small_parts();
    p.tokens.clear();
    p.token_types.clear();
    assert!(matches!(err_of(p), Error::Tokenizer(_)));

    // A vocabulary without the symbol for 'z' cannot encode "z": an error,
    // not silently dropped text.
    let mut p = small_parts();
    let z = p.tokens.iter().position(|s| s == "z").unwrap();
    p.tokens[z] = "<zz>".into();
    let t = Tokenizer::from_parts(p).unwrap();
    assert!(
        matches!(t.encode("az", false), Err(Error::Tokenizer(m)) if m.contains("cannot represent"))
    );
}

#[test]
fn token_types_default_to_normal() {
    let mut p = small_parts();
    p.token_types.clear();
    let t = Tokenizer::from_parts(p).unwrap();
    // Without types nothing is special: "<|user|>" is plain text.
    assert!(!t.encode("<|user|>", true).unwrap().contains(&259));
}

fn to_gguf(p: &TokenizerParts, with_pre: bool) -> GgufFile {
    let strs = |v: &[String]| Value::Array(Array::Str(v.iter().collect()));
    let mut md = vec![
        (
            "tokenizer.ggml.model".to_string(),
            Value::Str(p.model.clone()),
        ),
        ("tokenizer.ggml.tokens".to_string(), strs(&p.tokens)),
        (
            "tokenizer.ggml.token_type".to_string(),
            Value::Array(Array::I32(p.token_types.clone())),
        ),
        ("tokenizer.ggml.merges".to_string(), strs(&p.merges)),
    ];
    if with_pre {
        md.push(("tokenizer.ggml.pre".to_string(), Value::Str(p.pre.clone())));
    }
    for (k, v) in [
        ("bos", p.bos),
        ("eos", p.eos),
        ("eot", p.eot),
        ("eom", p.eom),
        ("padding", p.pad),
    ] {
        if let Some(v) = v {
            md.push((format!("tokenizer.ggml.{k}_token_id"), Value::U32(v)));
        }
    }
    let w = GgufWriter::new(Vec::new(), "mem".into(), &md, &[]).unwrap();
    GgufFile::from_bytes(w.finish().unwrap()).unwrap()
}

#[test]
fn from_gguf_full_size() {
    let parts = glm_parts(synthetic_vocab(N_VOCAB, FIRST_SPECIAL, 42));
    let f = to_gguf(&parts, true);
    let t0 = Instant::now();
    let t = Tokenizer::from_gguf(&f).unwrap();
    eprintln!(
        "Tokenizer::from_gguf (full size, file already parsed): {:?}",
        t0.elapsed()
    );
    assert_eq!(t.n_vocab(), N_VOCAB);
    assert_eq!(t.pre(), "glm4");
    assert_eq!(t.eog_ids(), &[154820, 154827, 154829]);
    assert_eq!(t.bos(), Some(154822));
    let text = "Hello 世界 🦀 [gMASK]";
    assert_eq!(
        t.encode(text, true).unwrap(),
        glm().encode(text, true).unwrap()
    );
}

#[test]
fn from_gguf_defaults_and_errors() {
    let t = Tokenizer::from_gguf(&to_gguf(&small_parts(), false)).unwrap();
    assert_eq!(
        t.pre(),
        "default",
        "missing pre falls back to llama.cpp's default"
    );
    let mut p = small_parts();
    p.model = "llama".into();
    assert!(matches!(
        Tokenizer::from_gguf(&to_gguf(&p, true)),
        Err(Error::Unsupported(_))
    ));
    let empty = GgufFile::from_bytes(
        GgufWriter::new(Vec::new(), "m".into(), &[], &[])
            .unwrap()
            .finish()
            .unwrap(),
    );
    assert!(
        matches!(Tokenizer::from_gguf(&empty.unwrap()), Err(Error::Tokenizer(m)) if m.contains("tokenizer.ggml.model"))
    );
}

#[test]
fn synthetic_vocab_small_sizes_build() {
    for (n, first) in [(512, 476), (292, 256), (2048, 2000)] {
        let v = synthetic_vocab(n, first, 3);
        let mut p = glm_parts(v);
        p.bos = None;
        p.eos = Some(first as u32);
        p.eot = None;
        p.eom = None;
        p.pad = None;
        let t = Tokenizer::from_parts(p).unwrap();
        assert_eq!(t.n_vocab(), n);
        assert_eq!(t.token_id("[gMASK]"), Some(first as u32 + 2));
        round_trip(&t, "The river runs through the town. 中文 🦀 123456");
    }
}

#[test]
fn encode_throughput() {
    let t = glm();
    let para = "The river runs through the middle of the town, and on warm evenings people walk along its banks. \
                In 2023 the council spent 145,000 on roads; 中文段落也在这里。🦀\n";
    let text = para.repeat(1000);
    let t0 = Instant::now();
    let ids = t.encode(&text, true).unwrap();
    let dt = t0.elapsed();
    eprintln!(
        "encode: {} bytes -> {} tokens in {:?} ({:.1} MB/s)",
        text.len(),
        ids.len(),
        dt,
        text.len() as f64 / dt.as_secs_f64() / 1e6
    );
    assert_eq!(t.decode(&ids).unwrap(), text);
}
