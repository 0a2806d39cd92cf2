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

/// GLM-4.7-Flash's template without its tools section (the template
/// llama.cpp vendors as `models/templates/GLM-4.7-Flash.jinja`).
pub const GLM_TEMPLATE: &str = r#"[gMASK]<sop>
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
{%- elif m.role == 'tool' -%}<|observation|><tool_response>{{ m.content }}</tool_response>
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
        let text = self.render_with_sentinels(messages, add_generation_prompt, thinking)?;
        Ok(split_sentinels(&text, messages))
    }

    fn render_with_sentinels(
        &self,
        messages: &[ChatMessage],
        add_generation_prompt: bool,
        thinking: bool,
    ) -> Result<String> {
        let mut env = environment();
        let fuel = FUEL_BASE.saturating_add(FUEL_PER_MESSAGE.saturating_mul(messages.len() as u64));
        env.set_fuel(Some(fuel));
        let tmpl = env.template_from_str(&self.source).map_err(template_err)?;
        let msgs: Vec<Value> = messages.iter().enumerate().map(message_value).collect();
        tmpl.render(context! {
            messages => msgs,
            add_generation_prompt => add_generation_prompt,
            enable_thinking => thinking,
            bos_token => self.bos,
            eos_token => self.eos,
        })
        .map_err(template_err)
    }
}

/// An environment that behaves like HF's `apply_chat_template`.
fn environment() -> Environment<'static> {
    let mut env = Environment::new();
    env.set_trim_blocks(true);
    env.set_lstrip_blocks(true);
    minijinja_contrib::add_to_environment(&mut env);
    env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
    env.add_function(
        "raise_exception",
        |msg: String| -> std::result::Result<Value, _> {
            Err(minijinja::Error::new(ErrorKind::InvalidOperation, msg))
        },
    );
    env
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
/// `reasoning_content`); message text that must stay plain is a sentinel.
fn message_value((i, m): (usize, &ChatMessage)) -> Value {
    let role = match m.role {
        Role::System => "system",
        Role::User => "user",
        Role::Assistant => "assistant",
    };
    let content = match m.role {
        Role::Assistant => m.content.clone(),
        _ => format!("{OPEN}{i}{CLOSE}"),
    };
    match &m.reasoning {
        Some(r) => context! { role, content, reasoning_content => r },
        None => context! { role, content },
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
