//! The slots: `--parallel` sessions over one runtime, each on its own
//! thread, taking requests from one queue (a request waits there while
//! every slot is busy). A slot keeps its cache between requests, so a
//! request that repeats the last one's prompt and reply (a chat's next
//! turn) feeds only its new tokens.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};

use tokio::sync::mpsc::UnboundedSender;

use super::openai::Usage;
use crate::cli::WarmupArgs;
use glmw::sample::SamplerOptions;
use glmw::session::Perf;
use glmw::{CancelHandle, Error, Runtime, Session, Stop};

/// One generation request, tokenized and checked against the context.
pub struct Job {
    pub prompt: Vec<u32>,
    pub max_tokens: usize,
    pub sampling: SamplerOptions,
    pub stops: Vec<String>,
    /// Cancelled when the client goes away (the HTTP side's guard).
    pub cancel: CancelHandle,
    pub events: UnboundedSender<Event>,
}

pub enum Event {
    /// Text to send on.
    Text(String),
    Done {
        stop: Stop,
        usage: Usage,
    },
    Failed(Error),
}

/// The queue's sending end and the slots' state, shared by the handlers.
pub struct Slots {
    queue: Mutex<mpsc::Sender<Job>>,
    pub total: usize,
    pub busy: Arc<AtomicUsize>,
    /// GPU memory once every slot is open (the KV cache of all of them).
    pub memory: glmw::Memory,
}

impl Slots {
    /// Open `parallel` sessions over `rt`, each warmed up (`warmup`), and
    /// start a thread for each.
    pub fn start(rt: &Runtime, parallel: usize, warmup: WarmupArgs) -> glmw::Result<Slots> {
        let (tx, rx) = mpsc::channel::<Job>();
        let rx = Arc::new(Mutex::new(rx));
        let busy = Arc::new(AtomicUsize::new(0));
        let mut memory = None;
        for i in 0..parallel {
            let mut session = rt.session(SamplerOptions::default())?;
            warmup.run(&mut session)?;
            let m = session.memory();
            memory = Some(glmw::Memory {
                kv_cache: m.kv_cache * parallel as u64,
                ..m
            });
            let (rx, busy) = (rx.clone(), busy.clone());
            std::thread::Builder::new()
                .name(format!("slot {i}"))
                .spawn(move || serve_slot(session, &rx, &busy))
                .map_err(|source| Error::Io {
                    path: "spawning a slot thread".into(),
                    source,
                })?;
        }
        // The last session's count holds every buffer the slots made.
        let memory =
            memory.ok_or_else(|| Error::InvalidArgument("--parallel must be at least 1".into()))?;
        Ok(Slots {
            queue: Mutex::new(tx),
            total: parallel,
            busy,
            memory,
        })
    }

    /// Queue `job`; false when no slot is left to take it.
    pub fn submit(&self, job: Job) -> bool {
        let q = self.queue.lock().unwrap_or_else(|p| p.into_inner());
        q.send(job).is_ok()
    }
}

fn serve_slot(mut s: Session, queue: &Mutex<mpsc::Receiver<Job>>, busy: &AtomicUsize) {
    loop {
        let job = {
            let rx = queue.lock().unwrap_or_else(|p| p.into_inner());
            match rx.recv() {
                Ok(j) => j,
                Err(_) => return,
            }
        };
        if job.cancel.is_cancelled() || job.events.is_closed() {
            continue;
        }
        busy.fetch_add(1, Ordering::SeqCst);
        let events = job.events.clone();
        let last = match run(&mut s, job) {
            Ok((stop, usage)) => Event::Done { stop, usage },
            Err(e) => {
                // A failure halfway leaves the cache in no known state.
                let _ = s.reset();
                Event::Failed(e)
            }
        };
        let _ = events.send(last);
        busy.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Feed the job's prompt (reusing the cache's common prefix) and stream
/// its tokens.
fn run(s: &mut Session, job: Job) -> glmw::Result<(Stop, Usage)> {
    s.set_cancel_handle(job.cancel.clone());
    s.set_sampling(job.sampling)?;
    s.set_stop_strings(&job.stops);
    let before = s.perf();
    let cached = s.feed_reusing(&job.prompt)?;
    let mut n = 0;
    let (_, stop) = s.generate(job.max_tokens, &mut |t| {
        n += 1;
        let gone = job.events.is_closed();
        !gone && (t.text.is_empty() || job.events.send(Event::Text(t.text.clone())).is_ok())
    })?;
    if !s.held_text().is_empty() {
        let _ = job.events.send(Event::Text(s.held_text().to_string()));
    }
    let after = s.perf();
    let perf = Perf {
        prompt_tokens: after.prompt_tokens - before.prompt_tokens,
        prompt_s: after.prompt_s - before.prompt_s,
        gen_tokens: after.gen_tokens - before.gen_tokens,
        gen_s: after.gen_s - before.gen_s,
    };
    let usage = Usage {
        prompt_tokens: job.prompt.len(),
        cached,
        completion_tokens: n,
        perf,
    };
    Ok((stop, usage))
}
