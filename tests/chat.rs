//! Multi-turn chat through the library on the tiny model (lavapipe in CI):
//! the second turn feeds only its own text, the cache then matches a fresh
//! engine fed the whole history, and a reply can be cancelled.

mod common;

use glmw::chat::{Chat, Stop};
use glmw::engine::EngineOptions;
use glmw::sample::SamplerOptions;
use glmw::{LoadOptions, Runtime};

fn greedy() -> SamplerOptions {
    SamplerOptions {
        temperature: 0.0,
        ..Default::default()
    }
}

/// The tiny model's runtime with an `n_ctx`-token context.
fn runtime(n_ctx: usize) -> Runtime {
    common::gpu(); // fails with the lavapipe hint when there is no adapter
    let opts = LoadOptions {
        n_ctx: Some(n_ctx),
        ..Default::default()
    };
    Runtime::load(common::tiny_model(), opts, &mut |_, _| {}).unwrap()
}

#[test]
fn second_turn_feeds_only_its_own_text() {
    let rt = runtime(256);
    let tok = rt.tokenizer();
    let session = rt.session(greedy()).unwrap();
    let mut chat = Chat::new(session, Some("Be brief.".into()), true).unwrap();
    let mut streamed = String::new();
    let r1 = chat
        .send("Hello there", 12, &mut |p| {
            streamed.push_str(p);
            true
        })
        .unwrap();
    assert_eq!(streamed, r1.text);
    let first = tok
        .encode(
            "[gMASK]<sop><|system|>Be brief.<|user|>Hello there<|assistant|><think>",
            true,
        )
        .unwrap();
    assert_eq!(r1.prefilled, first.len());
    let before = chat.history().len();
    let r2 = chat.send("And then?", 8, &mut |_| true).unwrap();
    let delta = tok
        .encode("<|user|>And then?<|assistant|><think>", true)
        .unwrap();
    assert_eq!(r2.prefilled, delta.len(), "turn 2 re-fed earlier turns");
    assert_eq!(&chat.history()[before..before + delta.len()], &delta[..]);

    // The chat's cache state equals a fresh engine fed the whole history.
    let opts = EngineOptions {
        n_ctx: 256,
        ..Default::default()
    };
    let mut fresh = common::tiny_engine(opts);
    let mut last = Vec::new();
    for &t in chat.history() {
        last = fresh.step(t).unwrap();
    }
    assert_eq!(last[0].0, chat.candidates()[0].0);
}

#[test]
fn a_reply_can_be_cancelled() {
    let session = runtime(128).session(greedy()).unwrap();
    let mut chat = Chat::new(session, None, false).unwrap();
    let mut n = 0;
    let r = chat
        .send("Hi", 50, &mut |_| {
            n += 1;
            n < 3
        })
        .unwrap();
    if r.stop != Stop::EndOfTurn {
        assert_eq!(r.stop, Stop::Cancelled);
        assert_eq!(r.tokens.len(), 3);
    }
    chat.reset().unwrap();
    assert!(chat.history().is_empty());
}

#[test]
fn a_long_chat_drops_its_oldest_turns_instead_of_ending() {
    let rt = runtime(64);
    let session = rt.session(greedy()).unwrap();
    let mut chat = Chat::new(session, Some("Be brief.".into()), false).unwrap();
    let mut dropped = 0;
    for turn in [
        "Hello",
        "Who begat Enos?",
        "And then?",
        "Tell me more",
        "Amen",
    ] {
        let r = chat.send(turn, 12, &mut |_| true).unwrap();
        assert!(!r.tokens.is_empty(), "turn {turn:?} got no reply");
        assert!(chat.history().len() <= 64);
        dropped += r.dropped;
    }
    assert!(
        dropped > 0,
        "64 tokens hold five turns only by dropping some"
    );
    assert_eq!(chat.messages().len() % 2, 0);

    // After the shift the cache is exactly the kept conversation.
    let opts = EngineOptions {
        n_ctx: 64,
        ..Default::default()
    };
    let mut fresh = common::tiny_engine(opts);
    let last = fresh.prefill(chat.history()).unwrap();
    assert_eq!(last[0].0, chat.candidates()[0].0);
}
