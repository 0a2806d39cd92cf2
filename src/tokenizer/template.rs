//! The chat template read from the file (`tokenizer.chat_template`),
//! rendered by minijinja as HF's Jinja renders it (`trim_blocks`,
//! `lstrip_blocks`, Python string methods, `raise_exception`). GLM's own
//! template, as Jinja, stands in when a file has none.
//!
//! Message text must stay apart from the template's markers, so that a
//! user who types `<|assistant|>` cannot forge a turn (llama.cpp tokenizes
//! user content with `parse_special` off). The text of system, user and
//! tool messages is therefore handed to the template as a sentinel that
//! no tokenizer produces; the sentinels are cut back out of the rendered
//! text and replaced by the message text as plain-text parts. Assistant
//! text goes in as is, since templates take it apart (`</think>`).

use super::chat::{ChatMessage, ChatPart, Role};
use crate::error::{Error, Result};
use minijinja::{context, Environment, ErrorKind, Value};

/// GLM-4.7-Flash's template (llama.cpp vendors it as
/// `models/templates/GLM-4.7-Flash.jinja`): tools in a system turn, tool
/// calls as `<tool_call>NAME<arg_key>K</arg_key><arg_value>V</arg_value>…
/// </tool_call>` and results after `<|observation|>`, without newlines.
pub const GLM_TEMPLATE: &str = r#"[gMASK]<sop>
{%- if tools -%}
<|system|>
# Tools

You may call one or more functions to assist with the user query.

You are provided with function signatures within <tools></tools> XML tags:
<tools>
{% for tool in tools %}
{{ tool | tojson(ensure_ascii=False) }}
{% endfor %}
</tools>

For each function call, output the function name and arguments within the following XML format:
<tool_call>{function-name}<arg_key>{arg-key-1}</arg_key><arg_value>{arg-value-1}</arg_value><arg_key>{arg-key-2}</arg_key><arg_value>{arg-value-2}</arg_value>...</tool_call>
{%- endif -%}
{%- set ns = namespace(last_user=-1) -%}
{%- for m in messages -%}{%- if m.role == 'user' -%}{%- set ns.last_user = loop.index0 -%}{%- endif -%}{%- endfor -%}
{%- for m in messages -%}
{%- if m.role == 'system' -%}<|system|>{{ m.content }}
{%- elif m.role == 'user' -%}<|user|>{{ m.content }}
{%- elif m.role == 'assistant' -%}<|assistant|>
{%- set content = m.content -%}{%- set reasoning = '' -%}
{%- if m.reasoning_content is string -%}{%- set reasoning = m.reasoning_content -%}
{%- elif '</think>' in content -%}
{%- set reasoning = content.split('</think>')[0].rstrip('\n').split('<think>')[-1].lstrip('\n') -%}
{%- set content = content.split('</think>')[-1].lstrip('\n') -%}
{%- endif -%}
{%- if loop.index0 > ns.last_user and reasoning -%}<think>{{ reasoning.strip() }}</think>
{%- else -%}</think>{%- endif -%}
{{- content.strip() -}}
{%- for tc in m.tool_calls or [] -%}
{%- set f = tc.function if tc.function else tc -%}
<tool_call>{{ f.name }}
{%- for k, v in (f.arguments or {}).items() -%}
<arg_key>{{ k }}</arg_key><arg_value>{{ v if v is string else v | tojson(ensure_ascii=False) }}</arg_value>
{%- endfor -%}
</tool_call>
{%- endfor -%}
{%- elif m.role == 'tool' -%}
{%- if loop.first or messages[loop.index0 - 1].role != 'tool' -%}<|observation|>{%- endif -%}
<tool_response>{{ m.content }}</tool_response>
{%- endif -%}
{%- endfor -%}
{%- if add_generation_prompt -%}<|assistant|>{{ '</think>' if enable_thinking is defined and not enable_thinking else '<think>' }}{%- endif -%}"#;

/// Sentinel brackets: private-use code points, never in a template's text.
const OPEN: char = '\u{F8F0}';
const CLOSE: char = '\u{F8F1}';

/// Jinja instructions a render may take (a hostile template's endless
/// loop ends here): far above what a long chat needs.
const FUEL_BASE: u64 = 5_000_000;
const FUEL_PER_MESSAGE: u64 = 50_000;

/// A chat template and the special tokens it may print.
#[derive(Clone, Debug)]
pub struct ChatTemplate {
    source: String,
    bos: String,
    eos: String,
}

impl Default for ChatTemplate {
    fn default() -> Self {
        ChatTemplate::glm()
    }
}

impl ChatTemplate {
    /// GLM's built-in template (the fallback).
    pub fn glm() -> ChatTemplate {
        ChatTemplate::new(GLM_TEMPLATE)
    }

    /// A template from its Jinja text. Syntax errors surface when it is
    /// rendered (a file's broken template must not stop raw prompts).
    pub fn new(source: impl Into<String>) -> ChatTemplate {
        ChatTemplate {
            source: source.into(),
            bos: String::new(),
            eos: String::new(),
        }
    }

    /// The texts of BOS and EOS, passed as `bos_token` / `eos_token` (as
    /// llama.cpp does).
    pub fn with_special_tokens(mut self, bos: &str, eos: &str) -> ChatTemplate {
        self.bos = bos.to_string();
        self.eos = eos.to_string();
        self
    }

    pub fn source(&self) -> &str {
        &self.source
    }

    /// Render `messages`: the template's text as special parts, the text
    /// of system, user and tool messages as plain parts.
    pub fn render_parts(
        &self,
        messages: &[ChatMessage],
        add_generation_prompt: bool,
        thinking: bool,
    ) -> Result<Vec<ChatPart>> {
        self.render_parts_with_tools(messages, None, add_generation_prompt, thinking)
    }

    /// `render_parts` with `tools`: OpenAI's list of tool definitions as
    /// JSON text, handed to the template as `tools`.
    pub fn render_parts_with_tools(
        &self,
        messages: &[ChatMessage],
        tools: Option<&str>,
        add_generation_prompt: bool,
        thinking: bool,
    ) -> Result<Vec<ChatPart>> {
        let tools: Option<Value> = match tools {
            Some(t) => Some(
                serde_json::from_str(t)
                    .map_err(|e| Error::InvalidArgument(format!("tools: {e}")))?,
            ),
            None => None,
        };
        let mut env = environment();
        let fuel = FUEL_BASE.saturating_add(FUEL_PER_MESSAGE.saturating_mul(messages.len() as u64));
        env.set_fuel(Some(fuel));
        let tmpl = env.template_from_str(&self.source).map_err(template_err)?;
        let msgs: Vec<Value> = messages.iter().enumerate().map(message_value).collect();
        let text = tmpl
            .render(context! {
                messages => msgs,
                tools => tools,
                add_generation_prompt => add_generation_prompt,
                enable_thinking => thinking,
                bos_token => self.bos,
                eos_token => self.eos,
            })
            .map_err(template_err)?;
        Ok(split_sentinels(&text, messages))
    }
}

/// An environment that behaves like HF's `apply_chat_template`.
fn environment() -> Environment<'static> {
    let mut env = Environment::new();
    env.set_trim_blocks(true);
    env.set_lstrip_blocks(true);
    minijinja_contrib::add_to_environment(&mut env);
    env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
    env.add_filter("tojson", tojson);
    env.add_function(
        "raise_exception",
        |msg: String| -> std::result::Result<Value, _> {
            Err(minijinja::Error::new(ErrorKind::InvalidOperation, msg))
        },
    );
    env
}

/// Python's `json.dumps` as HF's `tojson` calls it: `", "` and `": "`
/// separators, keys in their order, no HTML escaping (minijinja's own
/// escapes `<`, which would change what the model reads). Keyword
/// arguments (`ensure_ascii`, `indent`) are accepted and ignored.
fn tojson(
    v: &Value,
    _kwargs: minijinja::value::Kwargs,
) -> std::result::Result<String, minijinja::Error> {
    let mut out = String::new();
    write_json(v, &mut out)?;
    Ok(out)
}

fn write_json(v: &Value, out: &mut String) -> std::result::Result<(), minijinja::Error> {
    use minijinja::value::ValueKind;
    match v.kind() {
        ValueKind::Undefined | ValueKind::None => out.push_str("null"),
        ValueKind::Bool => out.push_str(if v.is_true() { "true" } else { "false" }),
        ValueKind::Number => out.push_str(&v.to_string()),
        ValueKind::Map => {
            out.push('{');
            for (n, k) in v.try_iter()?.enumerate() {
                if n > 0 {
                    out.push_str(", ");
                }
                write_json(&Value::from(k.to_string()), out)?;
                out.push_str(": ");
                write_json(&v.get_item(&k)?, out)?;
            }
            out.push('}');
        }
        ValueKind::Seq | ValueKind::Iterable => {
            out.push('[');
            for (n, x) in v.try_iter()?.enumerate() {
                if n > 0 {
                    out.push_str(", ");
                }
                write_json(&x, out)?;
            }
            out.push(']');
        }
        _ => match v.as_str() {
            Some(s) => out.push_str(&serde_json::Value::from(s).to_string()),
            None => out.push_str(&serde_json::Value::from(v.to_string()).to_string()),
        },
    }
    Ok(())
}

fn template_err(e: minijinja::Error) -> Error {
    // The chain holds the template's own message (raise_exception's text).
    let mut msg = e.to_string();
    let mut src = std::error::Error::source(&e);
    while let Some(s) = src {
        msg.push_str(&format!(": {s}"));
        src = s.source();
    }
    Error::Template(msg)
}

/// One message as the template sees it (`role`, `content`,
/// `reasoning_content`, `tool_calls` with their arguments as a mapping);
/// message text that must stay plain is a sentinel.
fn message_value((i, m): (usize, &ChatMessage)) -> Value {
    let role = match m.role {
        Role::System => "system",
        Role::User => "user",
        Role::Assistant => "assistant",
        Role::Tool => "tool",
    };
    let content = match m.role {
        Role::Assistant => m.content.clone(),
        _ => format!("{OPEN}{i}{CLOSE}"),
    };
    let calls: Vec<Value> = m.tool_calls.iter().map(call_value).collect();
    let mut fields = vec![
        ("role", Value::from(role)),
        ("content", Value::from(content)),
    ];
    if let Some(r) = &m.reasoning {
        fields.push(("reasoning_content", Value::from(r.as_str())));
    }
    if !calls.is_empty() {
        fields.push(("tool_calls", Value::from(calls)));
    }
    Value::from_iter(fields)
}

/// OpenAI's form of a call; arguments that are not a JSON object stay text.
fn call_value(c: &crate::toolcall::ToolCall) -> Value {
    let args: Value =
        serde_json::from_str(&c.arguments).unwrap_or_else(|_| Value::from(c.arguments.as_str()));
    context! {
        type => "function",
        function => context! { name => c.name, arguments => args },
    }
}

/// Cut the sentinels out of `text`, giving back the message text they
/// stand for as plain parts; everything else is the template's.
fn split_sentinels(text: &str, messages: &[ChatMessage]) -> Vec<ChatPart> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(a) = rest.find(OPEN) {
        let after = &rest[a + OPEN.len_utf8()..];
        let msg = after
            .find(CLOSE)
            .and_then(|b| Some((b, after[..b].parse::<usize>().ok()?)))
            .and_then(|(b, i)| Some((b, messages.get(i)?)));
        let Some((b, m)) = msg else {
            // Not one of ours: the template's text.
            push(&mut out, &rest[..a + OPEN.len_utf8()], true);
            rest = after;
            continue;
        };
        push(&mut out, &rest[..a], true);
        push(&mut out, &m.content, false);
        rest = &after[b + CLOSE.len_utf8()..];
    }
    push(&mut out, rest, true);
    out
}

/// Append `t` to the last part when it is of the same kind.
pub(super) fn push(out: &mut Vec<ChatPart>, t: &str, special: bool) {
    if t.is_empty() {
        return;
    }
    match out.last_mut() {
        Some(p) if p.special == special => p.text.push_str(t),
        _ => out.push(ChatPart {
            text: t.to_string(),
            special,
        }),
    }
}
