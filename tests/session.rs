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

#[test]
fn a_session_owns_its_runtime_and_moves_between_threads() {
    let rt = runtime(64);
    let mut s = rt.session(greedy()).unwrap();
    let expected: Vec<u32> = {
        let mut t = rt.session(greedy()).unwrap();
        t.feed_text("In the beginning").unwrap();
        t.tokens(3).map(|t| t.unwrap().id).collect()
    };
    drop(rt); // the session keeps what it needs
    let ids = std::thread::spawn(move || {
        s.feed_text("In the beginning").unwrap();
        s.tokens(3).map(|t| t.unwrap().id).collect::<Vec<u32>>()
    })
    .join()
    .unwrap();
    assert_eq!(ids, expected);
}

#[test]
fn a_prompt_being_fed_can_be_cancelled() {
    let rt = runtime(256);
    let prompt: Vec<u32> = (0..200).map(|i| 10 + (i * 7) % 300).collect();
    let mut s = rt.session(greedy()).unwrap();
    let handle = s.cancel_handle();
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let d = done.clone();
    // Cancel again and again: the feed forgets a cancel from before it
    // began, so one must land while its chunks run.
    let canceller = std::thread::spawn(move || {
        while !d.load(std::sync::atomic::Ordering::SeqCst) {
            std::thread::sleep(std::time::Duration::from_millis(2));
            handle.cancel();
        }
    });
    let r = s.feed(&prompt);
    done.store(true, std::sync::atomic::Ordering::SeqCst);
    canceller.join().unwrap();
    assert!(matches!(r, Err(Error::Cancelled)), "{r:?}");
    let fed = s.history().len();
    assert!(fed < prompt.len() && fed % 16 == 0, "{fed} fed");
    assert_eq!(s.history(), &prompt[..fed]);

    // The rest goes on from there as if the feed had not stopped.
    s.feed(&prompt[fed..]).unwrap();
    let mut fresh = rt.session(greedy()).unwrap();
    fresh.feed(&prompt).unwrap();
    assert_eq!(s.candidates()[0].0, fresh.candidates()[0].0);
}

#[test]
fn a_prompt_sharing_a_prefix_feeds_only_the_rest() {
    let rt = runtime(128);
    let mut s = rt.session(greedy()).unwrap();
    let first = s.tokenize("And God said, Let there be light").unwrap();
    assert_eq!(s.feed_reusing(&first).unwrap(), 0);
    let reply: Vec<u32> = s.tokens(3).map(|t| t.unwrap().id).collect();
    let mut second = first.clone();
    second.extend(&reply);
    second.extend(rt.tokenizer().encode(" and there was", false).unwrap());
    let reused = s.feed_reusing(&second).unwrap();
    assert_eq!(reused, first.len() + reply.len());
    assert_eq!(s.history(), &second[..]);
    // A prompt that diverges early drops the rest of the cache.
    let third = first[..4].to_vec();
    assert_eq!(s.feed_reusing(&third).unwrap(), 3);
    assert_eq!(s.history(), &third[..]);
    let next = s.tokens(2).map(|t| t.unwrap().id).collect::<Vec<_>>();
    let mut fresh = rt.session(greedy()).unwrap();
    fresh.feed(&third).unwrap();
    let want = fresh.tokens(2).map(|t| t.unwrap().id).collect::<Vec<_>>();
    assert_eq!(next, want);
}

#[test]
fn message_lists_and_stop_strings() {
    use glmw::ChatMessage;
    let rt = runtime(128);
    let mut s = rt.session(greedy()).unwrap();
    let msgs = [ChatMessage::system("Be brief."), ChatMessage::user("Hello")];
    let n = s.feed_messages(&msgs, false).unwrap();
    let want = rt.tokenizer().encode_messages(&msgs, false).unwrap();
    assert_eq!((n, s.history()), (want.len(), &want[..]));
    let (text, _) = s.generate(6, &mut |_| true).unwrap();

    // The same reply again, stopped at a string inside it.
    if let Some(stop) = text.get(2..4).filter(|t| !t.trim().is_empty()) {
        s.feed_messages(&msgs, false).unwrap();
        s.set_stop_strings(&[stop.to_string()]);
        let (cut, why) = s.generate(6, &mut |_| true).unwrap();
        assert_eq!(why, Stop::StopString);
        assert_eq!(cut, text[..text.find(stop).unwrap()]);
    }
}

#[test]
fn the_context_full_error_speaks_to_library_users() {
    let e = Error::ContextFull { n_ctx: 8 }.to_string();
    assert!(!e.contains("--"), "{e}");
}

#[test]
fn memory_counts_weights_cache_and_every_session() {
    let rt = runtime(128);
    let a = rt.session(greedy()).unwrap();
    let m = a.memory();
    // The uploaded weights are the file's tensors, repacked and padded.
    let file = std::fs::metadata(common::tiny_model()).unwrap().len();
    assert!(
        m.weights > file / 2 && m.weights < 2 * file,
        "{m:?} for a {file}-byte file"
    );
    assert!(m.kv_cache > 0, "{m:?}");
    assert!(m.device_total >= m.weights + m.kv_cache, "{m:?}");
    // A second session adds its own cache and scratch, not the weights again.
    let b = rt.session(greedy()).unwrap();
    let mb = b.memory();
    assert_eq!((mb.weights, mb.kv_cache), (m.weights, m.kv_cache));
    assert!(
        mb.device_total >= m.device_total + m.kv_cache,
        "{mb:?} after {m:?}"
    );
    assert!(
        mb.device_total < m.device_total + m.weights,
        "{mb:?} after {m:?}"
    );
}

#[test]
fn a_warmed_up_session_generates_what_a_cold_one_does() {
    let rt = runtime(128);
    let mut cold = rt.session(greedy()).unwrap();
    cold.feed_text("the quick brown fox").unwrap();
    let want: Vec<u32> = cold.tokens(8).map(|t| t.unwrap().id).collect();

    let mut warm = rt.session(greedy()).unwrap();
    warm.warm_up().unwrap();
    assert_eq!(warm.pos(), 0, "the warm-up's tokens are forgotten");
    assert!(warm.history().is_empty());
    // Nothing is fed by the warm-up: generating still asks for a prompt.
    assert!(matches!(warm.next_token(), Err(Error::InvalidArgument(_))));
    warm.feed_text("the quick brown fox").unwrap();
    let got: Vec<u32> = warm.tokens(8).map(|t| t.unwrap().id).collect();
    assert_eq!(got, want);
    // It would overwrite a cache in use: refused, and the session goes on.
    let held = warm.history().to_vec();
    assert!(matches!(warm.warm_up(), Err(Error::InvalidArgument(_))));
    assert_eq!(warm.history(), held.as_slice());
    assert!(warm.next_token().unwrap().is_some());

    // A context shorter than the warm-up's steps bounds them.
    let small = runtime(4);
    let mut s = small.session(greedy()).unwrap();
    s.warm_up().unwrap();
    s.feed_text("the").unwrap();
    assert!(s.next_token().unwrap().is_some());
}
