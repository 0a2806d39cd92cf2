//! A chat reply as OpenAI's fields: GLM's output split (`ReplyParser`)
//! into `reasoning_content`, `content` and `tool_calls`, whole or as
//! streamed deltas.

use serde_json::{json, Value};

use glmw::toolcall::{Piece, ReplyParser, ToolCall};

fn call_json(index: usize, c: &ToolCall, id: &str) -> Value {
    json!({"index": index, "id": format!("call_{id}_{index}"), "type": "function",
        "function": {"name": c.name, "arguments": c.arguments}})
}

/// The assistant message of a whole reply, and whether it calls tools.
pub fn message(text: &str, in_reasoning: bool, id: &str) -> (Value, bool) {
    let mut p = ReplyParser::new(in_reasoning);
    let mut pieces = p.push(text);
    pieces.extend(p.finish());
    let (mut reasoning, mut content, mut calls) = (String::new(), String::new(), Vec::new());
    for piece in pieces {
        match piece {
            Piece::Reasoning(t) => reasoning.push_str(&t),
            Piece::Content(t) => content.push_str(&t),
            Piece::ToolCall(c) => calls.push(call_json(calls.len(), &c, id)),
        }
    }
    let mut m = json!({"role": "assistant", "content": content});
    if !reasoning.is_empty() {
        m["reasoning_content"] = json!(reasoning);
    }
    let called = !calls.is_empty();
    if called {
        if content.trim().is_empty() {
            m["content"] = Value::Null;
        }
        m["tool_calls"] = Value::Array(calls);
    }
    (m, called)
}

/// Streamed deltas: each piece of the reply as it completes.
pub struct Deltas {
    parser: ReplyParser,
    calls: usize,
    id: String,
}

impl Deltas {
    pub fn new(in_reasoning: bool, id: &str) -> Deltas {
        Deltas {
            parser: ReplyParser::new(in_reasoning),
            calls: 0,
            id: id.to_string(),
        }
    }

    /// The deltas `text` completes.
    pub fn push(&mut self, text: &str) -> Vec<Value> {
        let pieces = self.parser.push(text);
        self.json(pieces)
    }

    /// The deltas held back until the end.
    pub fn finish(&mut self) -> Vec<Value> {
        let pieces = self.parser.finish();
        self.json(pieces)
    }

    /// Whether the reply has called a tool.
    pub fn called(&self) -> bool {
        self.calls > 0
    }

    fn json(&mut self, pieces: Vec<Piece>) -> Vec<Value> {
        pieces
            .into_iter()
            .map(|p| match p {
                Piece::Reasoning(t) => json!({"reasoning_content": t}),
                Piece::Content(t) => json!({"content": t}),
                Piece::ToolCall(c) => {
                    self.calls += 1;
                    json!({"tool_calls": [call_json(self.calls - 1, &c, &self.id)]})
                }
            })
            .collect()
    }
}
