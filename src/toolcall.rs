//! GLM's reply taken apart as it streams: reasoning (`<think>…</think>`),
//! the answer, and tool calls in GLM-4.5+'s form
//! (`<tool_call>NAME<arg_key>K</arg_key><arg_value>V</arg_value>…</tool_call>`,
//! newlines between the pieces as the template writes them). What is not
//! a well-formed tool call stays answer text, so nothing the model wrote
//! is lost.

use serde_json::{Map, Value};

const THINK: &str = "<think>";
const THINK_END: &str = "</think>";
const CALL: &str = "<tool_call>";
const CALL_END: &str = "</tool_call>";

/// A function call the model asked for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ToolCall {
    pub name: String,
    /// The arguments as a JSON object's text (OpenAI's `arguments`).
    pub arguments: String,
}

/// One piece of a reply.
#[derive(Clone, Debug, PartialEq)]
pub enum Piece {
    Reasoning(String),
    Content(String),
    ToolCall(ToolCall),
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum State {
    Content,
    Reasoning,
    Call,
}

/// Splits streamed text into `Piece`s; text that may be the start of a
/// tag is held back until the next push shows what it is.
#[derive(Debug)]
pub struct ReplyParser {
    buf: String,
    state: State,
}

impl ReplyParser {
    /// `in_reasoning`: the prompt ended inside `<think>` (thinking on), so
    /// the reply starts with reasoning.
    pub fn new(in_reasoning: bool) -> ReplyParser {
        ReplyParser {
            buf: String::new(),
            state: if in_reasoning {
                State::Reasoning
            } else {
                State::Content
            },
        }
    }

    /// The pieces `text` completes.
    pub fn push(&mut self, text: &str) -> Vec<Piece> {
        self.buf.push_str(text);
        let mut out = Vec::new();
        while self.step(&mut out) {}
        out
    }

    /// The rest, at the end of the reply: an unfinished tool call is text.
    pub fn finish(&mut self) -> Vec<Piece> {
        let mut out = Vec::new();
        let rest = std::mem::take(&mut self.buf);
        match self.state {
            State::Reasoning => emit(&mut out, Piece::Reasoning(rest)),
            State::Content => emit(&mut out, Piece::Content(rest)),
            State::Call => emit(&mut out, Piece::Content(format!("{CALL}{rest}"))),
        }
        self.state = State::Content;
        out
    }

    /// Take what the buffer settles; false when it must wait for more.
    fn step(&mut self, out: &mut Vec<Piece>) -> bool {
        match self.state {
            State::Reasoning => {
                let (done, at) = self.until(&[THINK_END]);
                emit(out, Piece::Reasoning(done));
                at.is_some_and(|_| {
                    self.state = State::Content;
                    true
                })
            }
            State::Content => {
                let (done, at) = self.until(&[THINK, CALL]);
                emit(out, Piece::Content(done));
                match at {
                    Some(0) => self.state = State::Reasoning,
                    Some(_) => self.state = State::Call,
                    None => return false,
                }
                true
            }
            State::Call => {
                let Some(end) = self.buf.find(CALL_END) else {
                    return false;
                };
                let body: String = self.buf.drain(..end + CALL_END.len()).collect();
                let body = &body[..end];
                self.state = State::Content;
                match parse_call(body) {
                    Some(c) => out.push(Piece::ToolCall(c)),
                    None => emit(out, Piece::Content(format!("{CALL}{body}{CALL_END}"))),
                }
                true
            }
        }
    }

    /// The buffer's text before the first of `tags` (which is consumed;
    /// its index returned), or all of it but a tail that may begin a tag.
    fn until(&mut self, tags: &[&str]) -> (String, Option<usize>) {
        let first = tags
            .iter()
            .enumerate()
            .filter_map(|(i, t)| self.buf.find(t).map(|p| (p, i)))
            .min();
        if let Some((p, i)) = first {
            let done: String = self.buf.drain(..p).collect();
            self.buf.drain(..tags[i].len());
            return (done, Some(i));
        }
        let keep = tags
            .iter()
            .map(|t| partial_tail(&self.buf, t))
            .max()
            .unwrap_or(0);
        let done: String = self.buf.drain(..self.buf.len() - keep).collect();
        (done, None)
    }
}

fn emit(out: &mut Vec<Piece>, p: Piece) {
    match &p {
        Piece::Reasoning(t) | Piece::Content(t) if t.is_empty() => {}
        _ => out.push(p),
    }
}

/// Bytes at the end of `s` that are a proper prefix of `tag`.
fn partial_tail(s: &str, tag: &str) -> usize {
    (1..tag.len())
        .rev()
        .find(|&n| {
            s.len() >= n && s.is_char_boundary(s.len() - n) && tag.starts_with(&s[s.len() - n..])
        })
        .unwrap_or(0)
}

/// `NAME<arg_key>K</arg_key><arg_value>V</arg_value>…` with any
/// whitespace between the pieces. A value that reads as JSON is that JSON
/// (the template writes non-strings with `tojson`), else a string.
pub fn parse_call(body: &str) -> Option<ToolCall> {
    let (name, mut rest) = match body.find("<arg_key>") {
        Some(p) => (&body[..p], &body[p..]),
        None => (body, ""),
    };
    let name = name.trim();
    if name.is_empty() || name.contains(|c: char| c.is_whitespace() || c == '<' || c == '>') {
        return None;
    }
    let mut args = Map::new();
    loop {
        rest = rest.trim_start();
        if rest.is_empty() {
            break;
        }
        let (key, r) = between(rest, "<arg_key>", "</arg_key>")?;
        let (value, r) = between(r.trim_start(), "<arg_value>", "</arg_value>")?;
        let value = serde_json::from_str::<Value>(value)
            .ok()
            .filter(|_| !value.trim().is_empty())
            .unwrap_or_else(|| Value::String(value.to_string()));
        args.insert(key.trim().to_string(), value);
        rest = r;
    }
    Some(ToolCall {
        name: name.to_string(),
        arguments: Value::Object(args).to_string(),
    })
}

/// The text between `open` (at the start of `s`) and `close`, and what follows.
fn between<'a>(s: &'a str, open: &str, close: &str) -> Option<(&'a str, &'a str)> {
    let s = s.strip_prefix(open)?;
    let end = s.find(close)?;
    Some((&s[..end], &s[end + close.len()..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(in_reasoning: bool, pieces: &[&str]) -> Vec<Piece> {
        let mut p = ReplyParser::new(in_reasoning);
        let mut out: Vec<Piece> = pieces.iter().flat_map(|t| p.push(t)).collect();
        out.extend(p.finish());
        // Adjacent text of one kind joined, so splits do not matter.
        let mut joined: Vec<Piece> = Vec::new();
        for x in out {
            match (joined.last_mut(), &x) {
                (Some(Piece::Reasoning(a)), Piece::Reasoning(b))
                | (Some(Piece::Content(a)), Piece::Content(b)) => a.push_str(b),
                _ => joined.push(x),
            }
        }
        joined
    }

    fn call(name: &str, args: &str) -> Piece {
        Piece::ToolCall(ToolCall {
            name: name.into(),
            arguments: args.into(),
        })
    }

    const REPLY: &str = "Let me check.</think>\nSure.<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Paris</arg_value>\n<arg_key>days</arg_key>\n<arg_value>3</arg_value>\n</tool_call>";

    #[test]
    fn reasoning_content_and_a_call() {
        let want = vec![
            Piece::Reasoning("Let me check.".into()),
            Piece::Content("\nSure.".into()),
            call("get_weather", r#"{"city":"Paris","days":3}"#),
        ];
        assert_eq!(all(true, &[REPLY]), want);
        // Split at every byte: the same pieces.
        let bytes: Vec<String> = REPLY.chars().map(String::from).collect();
        let refs: Vec<&str> = bytes.iter().map(String::as_str).collect();
        assert_eq!(all(true, &refs), want);
    }

    #[test]
    fn think_tags_written_by_the_model() {
        assert_eq!(
            all(false, &["<thi", "nk>r</th", "ink>answer"]),
            [
                Piece::Reasoning("r".into()),
                Piece::Content("answer".into())
            ]
        );
        assert_eq!(all(false, &["a < b"]), [Piece::Content("a < b".into())]);
    }

    #[test]
    fn calls_without_arguments_and_two_in_a_row() {
        assert_eq!(
            all(false, &["<tool_call>now</tool_call><tool_call>f<arg_key>x</arg_key><arg_value>{\"a\": [1]}</arg_value></tool_call>"]),
            [call("now", "{}"), call("f", r#"{"x":{"a":[1]}}"#)]
        );
    }

    #[test]
    fn malformed_calls_stay_text() {
        for bad in [
            "<tool_call></tool_call>",
            "<tool_call>two words</tool_call>",
            "<tool_call>f<arg_key>k</arg_key></tool_call>",
            "<tool_call>f<arg_value>v</arg_value></tool_call>",
            "<tool_call>f<arg_key>k</arg_key><arg_value>v</tool_call>",
        ] {
            assert_eq!(all(false, &[bad]), [Piece::Content(bad.into())], "{bad}");
        }
        // Cut off by the length limit.
        assert_eq!(
            all(false, &["ok<tool_call>f<arg_key>k"]),
            [Piece::Content("ok<tool_call>f<arg_key>k".into())]
        );
        // Unfinished reasoning stays reasoning.
        assert_eq!(
            all(true, &["hmm</thi"]),
            [Piece::Reasoning("hmm</thi".into())]
        );
    }

    #[test]
    fn string_values_stay_strings() {
        let c = parse_call("f<arg_key>s</arg_key><arg_value> x y </arg_value><arg_key>e</arg_key><arg_value></arg_value>").unwrap();
        assert_eq!(c.arguments, r#"{"e":"","s":" x y "}"#);
    }
}
