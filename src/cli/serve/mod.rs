//! `glmw serve`: an OpenAI-compatible HTTP server (llama-server's
//! endpoints: `/v1/chat/completions`, `/v1/completions`, `/v1/models`,
//! `/health`). axum on tokio speaks HTTP; the GPU work runs on the slots'
//! own threads (`slots`), one session each over one resident model.

mod openai;
mod pieces;
mod respond;
mod slots;

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, State};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::de::DeserializeOwned;
use serde_json::json;

use super::sampling::{n_predict, NPredict, SamplingArgs};
use super::{DeviceArgs, WarmupArgs};
use glmw::sample::{Sampler, SamplerOptions};
use glmw::{CancelHandle, Error, Result, Runtime};
use openai::{bad, ChatRequest, Common, CompletionRequest, Rejection};
use respond::{Kind, Reply};
use slots::{Job, Slots};

/// `glmw serve`'s flags.
#[derive(clap::Args)]
pub struct ServeArgs {
    /// Path to a GGUF model file [default: the built-in glmw-tiny].
    #[arg(long, short)]
    pub model: Option<PathBuf>,
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1")]
    pub host: String,
    /// Port to listen on (0 picks a free one; the address is printed).
    #[arg(long, default_value_t = 8080)]
    pub port: u16,
    /// Context length of each slot in tokens [default: 4096, or the
    /// model's training context if shorter].
    #[arg(long, short = 'c')]
    pub ctx: Option<usize>,
    /// Requests served at once, each in its own session (KV cache) over
    /// the one copy of the weights; more wait in a queue.
    #[arg(long, visible_alias = "np", default_value_t = 1)]
    pub parallel: usize,
    /// The model name `/v1/models` reports [default: the file's name].
    #[arg(long)]
    pub alias: Option<String>,
    /// Most tokens per answer when a request sets no max_tokens; -1 runs
    /// to the end of the turn or of the context.
    #[arg(long, short = 'n', default_value = "-1", value_parser = n_predict, allow_negative_numbers = true)]
    pub n_predict: NPredict,
    /// The sampling a request gets for what it leaves out.
    #[command(flatten)]
    pub sampling: SamplingArgs,
    #[command(flatten)]
    pub device: DeviceArgs,
    #[command(flatten)]
    pub warmup: WarmupArgs,
}

/// What every handler shares.
struct App {
    rt: Runtime,
    slots: Slots,
    model: String,
    /// The flags' sampling; the seed is fixed only when -s was given.
    defaults: SamplerOptions,
    fixed_seed: bool,
    stops: Vec<String>,
    n_predict: NPredict,
    next_id: AtomicU64,
}

pub fn serve(a: &ServeArgs) -> Result<()> {
    if a.parallel == 0 {
        return Err(Error::InvalidArgument(
            "--parallel must be at least 1".into(),
        ));
    }
    let load = a.device.load_options("serve", a.ctx)?;
    let rt = super::load_runtime(a.model.as_deref(), load)?;
    let slots = Slots::start(&rt, a.parallel, a.warmup)?;
    eprintln!("{}", super::memory::text(slots.memory));
    let model = match (&a.alias, &a.model) {
        (Some(name), _) => name.clone(),
        (None, Some(p)) => p
            .file_stem()
            .map_or("model".into(), |s| s.to_string_lossy().into_owned()),
        (None, None) => "glmw-tiny".into(),
    };
    let app = Arc::new(App {
        rt,
        slots,
        model,
        defaults: a.sampling.options(),
        fixed_seed: a.sampling.seed.is_some_and(|s| s >= 0),
        stops: a.sampling.stop.clone(),
        n_predict: a.n_predict,
        next_id: AtomicU64::new(1),
    });
    let io = |what: &str, source| Error::Io {
        path: what.into(),
        source,
    };
    let tokio = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| io("starting the HTTP runtime", e))?;
    let addr = format!("{}:{}", a.host, a.port);
    tokio.block_on(async {
        let listener = tokio::net::TcpListener::bind(&addr)
            .await
            .map_err(|e| io(&addr, e))?;
        let bound = listener.local_addr().map_err(|e| io(&addr, e))?;
        eprintln!(
            "glmw serve: listening on http://{bound} ({} slot(s) of {} tokens)",
            a.parallel,
            app.rt.n_ctx()
        );
        axum::serve(listener, router(app))
            .await
            .map_err(|e| io(&addr, e))
    })
}

fn router(app: Arc<App>) -> Router {
    Router::new()
        .route("/health", get(health))
        .route("/v1/models", get(models))
        .route("/models", get(models))
        .route("/v1/chat/completions", post(chat))
        .route("/chat/completions", post(chat))
        .route("/v1/completions", post(completions))
        .route("/completions", post(completions))
        .fallback(|| async { respond::error(404, "no such endpoint") })
        .layer(DefaultBodyLimit::max(64 << 20))
        .with_state(app)
}

async fn health(State(app): State<Arc<App>>) -> Response {
    let busy = app.slots.busy.load(Ordering::SeqCst);
    Json(json!({
        "status": "ok",
        "slots_idle": app.slots.total - busy,
        "slots_processing": busy,
    }))
    .into_response()
}

async fn models(State(app): State<Arc<App>>) -> Response {
    Json(json!({
        "object": "list",
        "data": [{
            "id": app.model,
            "object": "model",
            "created": respond::now(),
            "owned_by": "glmw",
            "meta": {"n_ctx": app.rt.n_ctx(), "n_vocab": app.rt.config().n_vocab},
        }],
    }))
    .into_response()
}

async fn chat(State(app): State<Arc<App>>, body: Bytes) -> Response {
    let req = match parse::<ChatRequest>(&body) {
        Ok(r) => r,
        Err(r) => return r.into(),
    };
    let tok = app.rt.tokenizer();
    let tools = req.tools();
    let prompt = req.messages().and_then(|m| {
        tok.encode_messages_with_tools(&m, tools.as_deref(), req.thinking())
            .map_err(rejection)
    });
    // A prompt that ends inside `<think>` makes the reply start with reasoning.
    let in_reasoning = prompt
        .as_ref()
        .ok()
        .and_then(|p| p.last())
        .and_then(|&id| tok.piece(id))
        .is_some_and(|p| p.trim() == "<think>");
    start(&app, prompt, &req.common, Kind::Chat { in_reasoning }).await
}

async fn completions(State(app): State<Arc<App>>, body: Bytes) -> Response {
    let req = match parse::<CompletionRequest>(&body) {
        Ok(r) => r,
        Err(r) => return r.into(),
    };
    let tok = app.rt.tokenizer();
    let prompt = req.prompt().and_then(|p| {
        let ids = tok.encode(p, true).map_err(rejection)?;
        Ok(tok.with_prompt_prefix(ids))
    });
    start(&app, prompt, &req.common, Kind::Completion).await
}

/// A JSON body as `T`; anything else is a 400 that says what was wrong.
fn parse<T: DeserializeOwned>(body: &[u8]) -> std::result::Result<T, Rejection> {
    serde_json::from_slice(body).map_err(|e| bad(format!("invalid request body: {e}")))
}

fn rejection(e: Error) -> Rejection {
    let status = match e {
        Error::InvalidArgument(_)
        | Error::ContextFull { .. }
        | Error::Tokenizer(_)
        | Error::Template(_) => 400,
        _ => 500,
    };
    Rejection {
        status,
        message: e.to_string(),
    }
}

/// Check the request, queue it and answer (streamed or whole).
async fn start(
    app: &App,
    prompt: std::result::Result<Vec<u32>, Rejection>,
    common: &Common,
    kind: Kind,
) -> Response {
    let (job, events) = match prompt.and_then(|p| job(app, p, common)) {
        Ok(j) => j,
        Err(r) => return r.into(),
    };
    let id = app.next_id.fetch_add(1, Ordering::Relaxed);
    let reply = Reply::new(kind, id, &app.model, job.cancel.clone(), common);
    if !app.slots.submit(job) {
        return respond::error(503, "the server is shutting down");
    }
    match common.stream {
        true => reply.stream(events),
        false => reply.whole(events).await,
    }
}

/// The slot's job for `prompt`: checked against the context and the
/// sampler's ranges before it waits in the queue.
fn job(
    app: &App,
    prompt: Vec<u32>,
    common: &Common,
) -> std::result::Result<(Job, respond::Events), Rejection> {
    let n_ctx = app.rt.n_ctx();
    if prompt.len() >= n_ctx {
        return Err(bad(format!(
            "the prompt is {} tokens and the context {n_ctx}: shorten it, or start the \
             server with a larger -c",
            prompt.len()
        )));
    }
    let room = n_ctx - prompt.len();
    let max_tokens = match common.max_tokens()? {
        Some(n) => n,
        None => app.n_predict.within(room),
    };
    let seed = match app.fixed_seed {
        true => app.defaults.seed,
        false => super::clock_seed(),
    };
    let sampling = common.sampling(&app.defaults, seed);
    let stops = match &common.stop {
        Some(_) => common.stops(),
        None => app.stops.clone(),
    };
    Sampler::new(sampling).map_err(rejection)?;
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let job = Job {
        prompt,
        max_tokens,
        sampling,
        stops,
        cancel: CancelHandle::new(),
        events: tx,
    };
    Ok((job, rx))
}
