//! The OpenAI API's request and response bodies, as llama-server and the
//! official clients use them: requests are parsed leniently (unknown fields
//! ignored, `stop` a string or a list, message content a string or a list
//! of text parts) and strictly where it matters (wrong types are a 400).

use serde::Deserialize;
use serde_json::{json, Value};

use glmw::sample::SamplerOptions;
use glmw::session::Perf;
use glmw::toolcall::ToolCall;
use glmw::{ChatMessage, Role, Stop};

/// Fields shared by both completion endpoints.
#[derive(Deserialize, Default)]
pub struct Common {
    pub max_tokens: Option<u64>,
    pub max_completion_tokens: Option<u64>,
    pub temperature: Option<f32>,
    pub top_p: Option<f32>,
    pub top_k: Option<usize>,
    pub min_p: Option<f32>,
    pub presence_penalty: Option<f32>,
    pub frequency_penalty: Option<f32>,
    pub repeat_penalty: Option<f32>,
    pub seed: Option<u64>,
    pub stop: Option<StopField>,
    pub n: Option<u32>,
    #[serde(default)]
    pub stream: bool,
    pub stream_options: Option<StreamOptions>,
}

#[derive(Deserialize, Default)]
pub struct StreamOptions {
    #[serde(default)]
    pub include_usage: bool,
}

#[derive(Deserialize)]
#[serde(untagged)]
pub enum StopField {
    One(String),
    Many(Vec<String>),
}

#[derive(Deserialize)]
pub struct ChatRequest {
    pub messages: Vec<Message>,
    #[serde(flatten)]
    pub common: Common,
    /// llama-server's switch for the template's thinking section.
    pub chat_template_kwargs: Option<TemplateKwargs>,
    /// Tool definitions, handed to the template as they come.
    pub tools: Option<Vec<Value>>,
}

#[derive(Deserialize, Default)]
pub struct TemplateKwargs {
    pub enable_thinking: Option<bool>,
}

#[derive(Deserialize)]
pub struct Message {
    pub role: String,
    #[serde(default)]
    pub content: Option<Content>,
    /// An assistant turn's earlier tool calls.
    #[serde(default)]
    pub tool_calls: Vec<ToolCallField>,
    pub reasoning_content: Option<String>,
}

#[derive(Deserialize)]
pub struct ToolCallField {
    pub function: FunctionField,
}

#[derive(Deserialize)]
pub struct FunctionField {
    pub name: String,
    /// A JSON object's text, as OpenAI sends it.
    #[serde(default)]
    pub arguments: String,
}

#[derive(Deserialize)]
#[serde(untagged)]
pub enum Content {
    Text(String),
    Parts(Vec<Part>),
}

#[derive(Deserialize)]
pub struct Part {
    #[serde(rename = "type")]
    pub kind: String,
    pub text: Option<String>,
}

#[derive(Deserialize)]
pub struct CompletionRequest {
    pub prompt: PromptField,
    #[serde(flatten)]
    pub common: Common,
}

#[derive(Deserialize)]
#[serde(untagged)]
pub enum PromptField {
    One(String),
    Many(Vec<String>),
}

/// A request the server cannot take: its HTTP status and message.
pub struct Rejection {
    pub status: u16,
    pub message: String,
}

pub fn bad(message: impl Into<String>) -> Rejection {
    Rejection {
        status: 400,
        message: message.into(),
    }
}

impl Common {
    /// The sampler for this request over the server's defaults; a seed
    /// not given comes from the clock, as llama-server's does.
    pub fn sampling(&self, defaults: &SamplerOptions, clock_seed: u64) -> SamplerOptions {
        let d = defaults;
        SamplerOptions {
            temperature: self.temperature.unwrap_or(d.temperature),
            top_k: self.top_k.unwrap_or(d.top_k),
            top_p: self.top_p.unwrap_or(d.top_p),
            min_p: self.min_p.unwrap_or(d.min_p),
            repeat_penalty: self.repeat_penalty.unwrap_or(d.repeat_penalty),
            repeat_last_n: d.repeat_last_n,
            presence_penalty: self.presence_penalty.unwrap_or(d.presence_penalty),
            frequency_penalty: self.frequency_penalty.unwrap_or(d.frequency_penalty),
            seed: self.seed.unwrap_or(clock_seed),
        }
    }

    pub fn stops(&self) -> Vec<String> {
        match &self.stop {
            None => Vec::new(),
            Some(StopField::One(s)) => vec![s.clone()],
            Some(StopField::Many(v)) => v.clone(),
        }
    }

    /// Most tokens to generate; `None` runs to the end of the turn or of
    /// the context.
    pub fn max_tokens(&self) -> Result<Option<usize>, Rejection> {
        if self.n.is_some_and(|n| n != 1) {
            return Err(bad("only n = 1 is supported"));
        }
        let max = self.max_completion_tokens.or(self.max_tokens);
        Ok(max.map(|m| usize::try_from(m).unwrap_or(usize::MAX)))
    }
}

impl ChatRequest {
    /// The conversation as the template takes it. "developer" is OpenAI's
    /// newer name for "system".
    pub fn messages(&self) -> Result<Vec<ChatMessage>, Rejection> {
        if self.messages.is_empty() {
            return Err(bad("messages must not be empty"));
        }
        self.messages
            .iter()
            .map(|m| {
                let role = match m.role.as_str() {
                    "system" | "developer" => Role::System,
                    "user" => Role::User,
                    "assistant" => Role::Assistant,
                    "tool" => Role::Tool,
                    r => return Err(bad(format!("unsupported message role {r:?}"))),
                };
                let tool_calls = m
                    .tool_calls
                    .iter()
                    .map(|c| ToolCall {
                        name: c.function.name.clone(),
                        arguments: c.function.arguments.clone(),
                    })
                    .collect();
                Ok(ChatMessage {
                    role,
                    content: m.text()?,
                    reasoning: m.reasoning_content.clone(),
                    tool_calls,
                })
            })
            .collect()
    }

    /// The tools as JSON text for the template; none when the list is empty.
    pub fn tools(&self) -> Option<String> {
        self.tools
            .as_ref()
            .filter(|t| !t.is_empty())
            .map(|t| Value::from(t.clone()).to_string())
    }

    pub fn thinking(&self) -> bool {
        self.chat_template_kwargs
            .as_ref()
            .and_then(|k| k.enable_thinking)
            .unwrap_or(false)
    }
}

impl Message {
    fn text(&self) -> Result<String, Rejection> {
        match &self.content {
            None => Ok(String::new()),
            Some(Content::Text(t)) => Ok(t.clone()),
            Some(Content::Parts(parts)) => parts
                .iter()
                .map(|p| match (p.kind.as_str(), &p.text) {
                    ("text", Some(t)) => Ok(t.as_str()),
                    (k, _) => Err(bad(format!("unsupported content part {k:?}"))),
                })
                .collect(),
        }
    }
}

impl CompletionRequest {
    pub fn prompt(&self) -> Result<&str, Rejection> {
        match &self.prompt {
            PromptField::One(p) => Ok(p),
            PromptField::Many(v) if v.len() == 1 => Ok(&v[0]),
            PromptField::Many(_) => Err(bad("only one prompt per request is supported")),
        }
    }
}

/// OpenAI's error body.
pub fn error_body(status: u16, message: &str) -> Value {
    let kind = match status {
        404 => "not_found_error",
        500..=599 => "server_error",
        _ => "invalid_request_error",
    };
    json!({"error": {"message": message, "type": kind, "code": status}})
}

pub fn finish_reason(stop: Stop) -> &'static str {
    match stop {
        Stop::Length | Stop::ContextFull => "length",
        Stop::EndOfTurn | Stop::StopString | Stop::Cancelled => "stop",
    }
}

/// Token counts and, as llama-server adds them, timings.
#[derive(Clone, Copy, Debug, Default)]
pub struct Usage {
    pub prompt_tokens: usize,
    /// Prompt tokens already in the slot's cache (not fed again).
    pub cached: usize,
    pub completion_tokens: usize,
    /// This request's share of the session's timings.
    pub perf: Perf,
}

impl Usage {
    pub fn usage(&self) -> Value {
        let n = self.completion_tokens;
        json!({
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": n,
            "total_tokens": self.prompt_tokens + n,
            "prompt_tokens_details": {"cached_tokens": self.cached},
        })
    }

    pub fn timings(&self) -> Value {
        let p = &self.perf;
        json!({
            "cache_n": self.cached,
            "prompt_n": p.prompt_tokens,
            "prompt_ms": p.prompt_s * 1e3,
            "prompt_per_second": p.prompt_tok_s(),
            "predicted_n": p.gen_tokens,
            "predicted_ms": p.gen_s * 1e3,
            "predicted_per_second": p.gen_tok_s(),
        })
    }
}
