//! Answers: a request's events from its slot turned into one JSON body, or
//! into server-sent events as they come. Either way the request's cancel
//! handle fires when the answer is dropped unfinished (the client went
//! away), which stops its slot at the next prefill chunk or token.

use std::convert::Infallible;

use axum::http::StatusCode;
use axum::response::sse::{Event as Sse, Sse as SseBody};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Value};
use tokio::sync::mpsc::{self, UnboundedReceiver};
use tokio_stream::wrappers::ReceiverStream;

use super::openai::{self, finish_reason, Common, Rejection, Usage};
use super::pieces;
use super::slots::Event;
use glmw::{CancelHandle, Error, Stop};

pub type Events = UnboundedReceiver<Event>;

#[derive(Clone, Copy)]
pub enum Kind {
    /// `in_reasoning`: the prompt ended inside `<think>`.
    Chat {
        in_reasoning: bool,
    },
    Completion,
}

/// Cancels its request when dropped: before the end, that stops the slot;
/// after it, it does nothing.
struct CancelOnDrop(CancelHandle);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        self.0.cancel();
    }
}

pub struct Reply {
    kind: Kind,
    id: String,
    created: u64,
    model: String,
    include_usage: bool,
    _guard: CancelOnDrop,
}

pub fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// An error answer with OpenAI's body.
pub fn error(status: u16, message: &str) -> Response {
    let code = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    (code, Json(openai::error_body(status, message))).into_response()
}

impl From<Rejection> for Response {
    fn from(r: Rejection) -> Response {
        error(r.status, &r.message)
    }
}

fn failure(e: &Error) -> (u16, String) {
    let status = match e {
        Error::InvalidArgument(_) | Error::ContextFull { .. } => 400,
        _ => 500,
    };
    (status, e.to_string())
}

impl Reply {
    pub fn new(kind: Kind, n: u64, model: &str, cancel: CancelHandle, c: &Common) -> Reply {
        let prefix = match kind {
            Kind::Chat { .. } => "chatcmpl",
            Kind::Completion => "cmpl",
        };
        Reply {
            kind,
            id: format!("{prefix}-{n}"),
            created: now(),
            model: model.into(),
            include_usage: c.stream_options.as_ref().is_some_and(|o| o.include_usage),
            _guard: CancelOnDrop(cancel),
        }
    }

    /// The body's common fields around `choices`.
    fn body(&self, object: &str, choices: Value) -> Value {
        json!({
            "id": self.id,
            "object": object,
            "created": self.created,
            "model": self.model,
            "choices": choices,
        })
    }

    /// One streamed choice: new text, or (with `finish`) the end.
    fn chunk(&self, text: Option<&str>, finish: Option<&str>) -> Value {
        let delta = match text {
            Some(t) => json!({"content": t}),
            None => json!({}),
        };
        self.chunk_delta(delta, text, finish)
    }

    /// `chunk` with a chat delta of its own (reasoning, tool calls).
    fn chunk_delta(&self, delta: Value, text: Option<&str>, finish: Option<&str>) -> Value {
        match self.kind {
            Kind::Chat { .. } => {
                let choice = json!({"index": 0, "delta": delta, "finish_reason": finish});
                self.body("chat.completion.chunk", json!([choice]))
            }
            Kind::Completion => {
                let choice = json!({"index": 0, "text": text.unwrap_or(""),
                    "logprobs": null, "finish_reason": finish});
                self.body("text_completion", json!([choice]))
            }
        }
    }

    /// The whole answer.
    fn full(&self, text: &str, stop: Stop, usage: &Usage) -> Value {
        let mut finish = finish_reason(stop);
        let mut body = match self.kind {
            Kind::Chat { in_reasoning } => {
                let (message, called) = pieces::message(text, in_reasoning, &self.id);
                if called {
                    finish = "tool_calls";
                }
                let choice = json!({"index": 0, "message": message, "finish_reason": finish});
                self.body("chat.completion", json!([choice]))
            }
            Kind::Completion => {
                let choice = json!({"index": 0, "text": text, "logprobs": null,
                    "finish_reason": finish});
                self.body("text_completion", json!([choice]))
            }
        };
        body["usage"] = usage.usage();
        body["timings"] = usage.timings();
        body
    }

    /// Wait for the slot to finish and answer with one JSON body.
    pub async fn whole(self, mut events: Events) -> Response {
        let mut text = String::new();
        while let Some(ev) = events.recv().await {
            match ev {
                Event::Text(t) => text.push_str(&t),
                Event::Done { stop, usage } => {
                    return Json(self.full(&text, stop, &usage)).into_response()
                }
                Event::Failed(e) => {
                    let (status, msg) = failure(&e);
                    return error(status, &msg);
                }
            }
        }
        error(500, "the slot stopped without an answer")
    }

    /// Answer with server-sent events as the slot produces text, ending
    /// with `data: [DONE]`.
    pub fn stream(self, events: Events) -> Response {
        let (tx, rx) = mpsc::channel::<Result<Sse, Infallible>>(64);
        tokio::spawn(self.pump(events, tx));
        SseBody::new(ReceiverStream::new(rx)).into_response()
    }

    /// Forward the slot's events as SSE until the end or until the client
    /// is gone (then `self` drops, cancelling the slot's work).
    async fn pump(self, mut events: Events, tx: mpsc::Sender<Result<Sse, Infallible>>) {
        let send = |v: &Value| tx.send(Ok(Sse::default().data(v.to_string())));
        if let Kind::Chat { .. } = self.kind {
            let mut first = self.chunk(Some(""), None);
            first["choices"][0]["delta"]["role"] = json!("assistant");
            if send(&first).await.is_err() {
                return;
            }
        }
        let mut deltas = match self.kind {
            Kind::Chat { in_reasoning } => Some(pieces::Deltas::new(in_reasoning, &self.id)),
            Kind::Completion => None,
        };
        loop {
            let ev = tokio::select! {
                ev = events.recv() => ev,
                _ = tx.closed() => return,
            };
            let sent = match ev {
                None => return,
                Some(Event::Text(t)) => match deltas.as_mut() {
                    Some(d) => self.send_deltas(d.push(&t), &send).await,
                    None => send(&self.chunk(Some(&t), None)).await.map_err(|_| ()),
                },
                Some(Event::Done { stop, usage }) => {
                    let mut finish = finish_reason(stop);
                    if let Some(d) = deltas.as_mut() {
                        let _ = self.send_deltas(d.finish(), &send).await;
                        if d.called() {
                            finish = "tool_calls";
                        }
                    }
                    let mut last = self.chunk(None, Some(finish));
                    last["timings"] = usage.timings();
                    let _ = send(&last).await;
                    if self.include_usage {
                        let mut u = self.body(self.object(), json!([]));
                        u["usage"] = usage.usage();
                        let _ = send(&u).await;
                    }
                    let _ = tx.send(Ok(Sse::default().data("[DONE]"))).await;
                    return;
                }
                Some(Event::Failed(e)) => {
                    let (status, msg) = failure(&e);
                    let _ = send(&openai::error_body(status, &msg)).await;
                    return;
                }
            };
            if sent.is_err() {
                return;
            }
        }
    }

    /// Send each chat delta as its own chunk.
    async fn send_deltas<F, R>(&self, deltas: Vec<Value>, send: &F) -> Result<(), ()>
    where
        F: Fn(&Value) -> R,
        R: std::future::Future<
            Output = Result<(), mpsc::error::SendError<Result<Sse, Infallible>>>,
        >,
    {
        for d in deltas {
            send(&self.chunk_delta(d, None, None))
                .await
                .map_err(|_| ())?;
        }
        Ok(())
    }

    fn object(&self) -> &'static str {
        match self.kind {
            Kind::Chat { .. } => "chat.completion.chunk",
            Kind::Completion => "text_completion",
        }
    }
}
