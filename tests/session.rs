//! The embedding API on the tiny model (lavapipe in CI): `Runtime` loads
//! once, sessions share its weights but not their caches, tokens come the
//! same through the iterator and the callback, and generation stops on
//! cancellation and a full context with the right `Stop`.

mod common;

use glmw::{CancelHandle, Error, LoadOptions, Runtime, SamplerOptions, Stop};

fn greedy() -> SamplerOptions {
    SamplerOptions {
        temperature: 0.0,
        ..Default::default()
    }
}

fn runtime(n_ctx: usize) -> Runtime {
    common::gpu(); // fails with the lavapipe hint when there is no adapter
    let opts = LoadOptions {
        n_ctx: Some(n_ctx),
        ubatch: 16,
        ..Default::default()
    };
    Runtime::load(common::tiny_model(), opts, &mut |_, _| {}).unwrap()
}

#[test]
fn sessions_share_weights_not_caches() {
    let rt = runtime(128);
    let mut a = rt.session(greedy()).unwrap();
    let n = a.feed_text("the quick brown fox").unwrap();
    assert_eq!(a.pos(), n);
    let ids: Vec<u32> = a.tokens(10).map(|t| t.unwrap().id).collect();
    assert_eq!(ids.len(), 10);
    assert_eq!(a.stop(), Some(Stop::Length));

    // A second session, fed something else in between, is unaffected by
    // the first and reproduces it exactly.
    let mut b = rt.session(greedy()).unwrap();
    b.feed_text("something else entirely").unwrap();
    b.tokens(3).for_each(|t| drop(t.unwrap()));
    b.reset().unwrap();
    b.feed_text("the quick brown fox").unwrap();
    let mut via_callback = Vec::new();
    let (text, stop) = b
        .generate(10, &mut |t| {
            via_callback.push(t.id);
            true
        })
        .unwrap();
    assert_eq!(via_callback, ids, "callback and iterator disagree");
    assert_eq!(stop, Stop::Length);
    assert_eq!(text, rt.tokenizer().decode(&ids).unwrap());
    // And `a` goes on from its own cache.
    assert_eq!(a.history().len(), n + 10);
    assert!(a.next_token().unwrap().is_some());
}

#[test]
fn cancellation_and_full_context() {
    let rt = runtime(24);
    let mut s = rt.session(greedy()).unwrap();
    s.feed_text("In the beginning").unwrap();
    let (_, stop) = s.generate(50, &mut |_| false).unwrap();
    assert_eq!(stop, Stop::Cancelled);

    let handle: CancelHandle = s.cancel_handle();
    let mut n = 0;
    for t in s.tokens(50) {
        t.unwrap();
        n += 1;
        if n == 2 {
            handle.cancel();
        }
    }
    assert_eq!(n, 2);
    assert_eq!(s.stop(), Some(Stop::Cancelled));

    // Run into the 24-token context (unless the model ends its turn first).
    let (_, stop) = s.generate(100, &mut |_| true).unwrap();
    assert!(
        matches!(stop, Stop::ContextFull | Stop::EndOfTurn),
        "{stop:?}"
    );
    if stop == Stop::ContextFull {
        assert_eq!(s.pos(), s.n_ctx());
        assert!(matches!(
            s.feed(&[1, 2]),
            Err(Error::ContextFull { n_ctx: 24 })
        ));
    }
}

#[test]
fn errors_are_values() {
    let rt = runtime(32);
    let mut s = rt.session(greedy()).unwrap();
    let e = s.next_token().unwrap_err();
    assert!(e.to_string().contains("feed a prompt"), "{e}");
    assert!(matches!(
        s.feed(&[u32::MAX]),
        Err(Error::InvalidArgument(_))
    ));
    assert_eq!(s.pos(), 0);
    let bad = SamplerOptions {
        temperature: -1.0,
        ..Default::default()
    };
    assert!(rt.session(bad).is_err());
    let missing = Runtime::load(
        "/nonexistent/model.gguf",
        LoadOptions::default(),
        &mut |_, _| {},
    );
    assert!(missing.is_err());
}
