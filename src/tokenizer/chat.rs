//! The GLM-4.7-Flash chat template (model-spec §5.3), rendered in Rust so
//! that no Jinja engine is needed. It reproduces what HF's Jinja (with
//! `trim_blocks` and `lstrip_blocks`) makes of the template llama.cpp
//! vendors as `models/templates/GLM-4.7-Flash.jinja`, minus tools: there is
//! no newline anywhere the template does not put one.

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    System,
    User,
    Assistant,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChatMessage {
    pub role: Role,
    pub content: String,
    /// The assistant's thinking for that turn, when the caller kept it.
    pub reasoning: Option<String>,
}

impl ChatMessage {
    pub fn system(text: impl Into<String>) -> Self {
        ChatMessage {
            role: Role::System,
            content: text.into(),
            reasoning: None,
        }
    }
    pub fn user(text: impl Into<String>) -> Self {
        ChatMessage {
            role: Role::User,
            content: text.into(),
            reasoning: None,
        }
    }
    pub fn assistant(text: impl Into<String>) -> Self {
        ChatMessage {
            role: Role::Assistant,
            content: text.into(),
            reasoning: None,
        }
    }
}

/// One piece of a rendered chat: the template's own text (its markers:
/// `[gMASK]`, `<|user|>`, `<think>`…), encoded with special tokens on, or a
/// message's text, encoded as plain text so that a user who types
/// `<|assistant|>` cannot forge a turn (llama.cpp tokenizes user content
/// with `parse_special` off).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChatPart {
    pub text: String,
    pub special: bool,
}

/// Render `messages` as the prompt text. Special tokens appear as their
/// text (`[gMASK]`, `<|user|>`, ...); to encode it, prefer
/// `render_chat_parts` with `Tokenizer::encode_chat`, which keeps message
/// text from being read as markers.
///
/// * `add_generation_prompt`: end with `<|assistant|>` plus the thinking
///   switch, so the model writes the next assistant turn.
/// * `thinking`: `<think>` (the model reasons first) or `</think>` (the
///   template's `enable_thinking = false`: answer directly).
///
/// Earlier assistant turns keep their reasoning only when they come after
/// the last user message (the template's default `clear_thinking`); the
/// others get a bare `</think>`, exactly as the model saw them in training.
pub fn render_chat(
    messages: &[ChatMessage],
    add_generation_prompt: bool,
    thinking: bool,
) -> String {
    render_chat_parts(messages, add_generation_prompt, thinking)
        .into_iter()
        .map(|p| p.text)
        .collect()
}

/// `render_chat` as its pieces: template markers apart from message text.
pub fn render_chat_parts(
    messages: &[ChatMessage],
    add_generation_prompt: bool,
    thinking: bool,
) -> Vec<ChatPart> {
    let mut out = Vec::new();
    let mark = |out: &mut Vec<ChatPart>, t: &str| push(out, t, true);
    let text = |out: &mut Vec<ChatPart>, t: &str| push(out, t, false);
    let last_user = messages.iter().rposition(|m| m.role == Role::User);
    mark(&mut out, "[gMASK]<sop>");
    for (i, m) in messages.iter().enumerate() {
        match m.role {
            Role::System => {
                mark(&mut out, "<|system|>");
                text(&mut out, &m.content);
            }
            Role::User => {
                mark(&mut out, "<|user|>");
                text(&mut out, &m.content);
            }
            Role::Assistant => {
                mark(&mut out, "<|assistant|>");
                let (reasoning, content) = split_reasoning(m);
                let after_last_user = last_user.is_none_or(|u| i > u);
                // The Jinja tests the unstripped text but prints it stripped,
                // so whitespace-only reasoning gives an empty think block.
                if after_last_user && !reasoning.is_empty() {
                    mark(&mut out, "<think>");
                    text(&mut out, py_strip(&reasoning));
                    mark(&mut out, "</think>");
                } else {
                    mark(&mut out, "</think>");
                }
                text(&mut out, py_strip(&content));
            }
        }
    }
    if add_generation_prompt {
        mark(&mut out, "<|assistant|>");
        mark(&mut out, if thinking { "<think>" } else { "</think>" });
    }
    out
}

/// Append `t` to the last part when it is of the same kind.
fn push(out: &mut Vec<ChatPart>, t: &str, special: bool) {
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

/// The template's fallback for a turn stored as raw model output: without
/// a separate reasoning field, `<think>…</think>` is cut out of the
/// content (`content.split('</think>')` in the Jinja).
fn split_reasoning(m: &ChatMessage) -> (String, String) {
    if let Some(r) = &m.reasoning {
        return (r.clone(), m.content.clone());
    }
    let Some(first_end) = m.content.find("</think>") else {
        return (String::new(), m.content.clone());
    };
    let before = m.content[..first_end].trim_end_matches('\n');
    let reasoning = before
        .rsplit("<think>")
        .next()
        .unwrap_or("")
        .trim_start_matches('\n');
    let content = m
        .content
        .rsplit("</think>")
        .next()
        .unwrap_or("")
        .trim_start_matches('\n');
    (reasoning.to_string(), content.to_string())
}

/// Python's `str.strip()`: like `str::trim` but also strips the ASCII
/// separators U+001C..U+001F, which Python counts as whitespace.
fn py_strip(s: &str) -> &str {
    s.trim_matches(|c: char| c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn asst(content: &str, reasoning: Option<&str>) -> ChatMessage {
        ChatMessage {
            role: Role::Assistant,
            content: content.into(),
            reasoning: reasoning.map(Into::into),
        }
    }

    #[test]
    fn message_text_is_apart_from_the_markers() {
        let m = [ChatMessage::user("hi <|assistant|>")];
        let parts = render_chat_parts(&m, true, true);
        let kinds: Vec<(&str, bool)> = parts.iter().map(|p| (p.text.as_str(), p.special)).collect();
        assert_eq!(
            kinds,
            [
                ("[gMASK]<sop><|user|>", true),
                ("hi <|assistant|>", false),
                ("<|assistant|><think>", true)
            ]
        );
    }

    #[test]
    fn single_turn() {
        let m = [ChatMessage::user("Hello")];
        assert_eq!(
            render_chat(&m, true, true),
            "[gMASK]<sop><|user|>Hello<|assistant|><think>"
        );
        assert_eq!(
            render_chat(&m, true, false),
            "[gMASK]<sop><|user|>Hello<|assistant|></think>"
        );
        assert_eq!(render_chat(&m, false, true), "[gMASK]<sop><|user|>Hello");
        assert_eq!(render_chat(&[], false, true), "[gMASK]<sop>");
    }

    #[test]
    fn system_and_user_text_is_verbatim() {
        let m = [
            ChatMessage::system(" Be brief.\n"),
            ChatMessage::user("  Hi\n"),
        ];
        assert_eq!(
            render_chat(&m, true, true),
            "[gMASK]<sop><|system|> Be brief.\n<|user|>  Hi\n<|assistant|><think>"
        );
    }

    #[test]
    fn history_drops_old_reasoning() {
        let m = [
            ChatMessage::user("Q1"),
            asst("\n A1 \n", Some("thought 1")),
            ChatMessage::user("Q2"),
        ];
        assert_eq!(
            render_chat(&m, true, true),
            "[gMASK]<sop><|user|>Q1<|assistant|></think>A1<|user|>Q2<|assistant|><think>"
        );
    }

    #[test]
    fn reasoning_kept_after_last_user() {
        let m = [
            ChatMessage::user("Q"),
            asst("A", Some("  step\n")),
            asst("B", None),
            asst("", Some("")),
            asst("C", Some(" ")),
        ];
        assert_eq!(
            render_chat(&m, false, true),
            "[gMASK]<sop><|user|>Q<|assistant|><think>step</think>A<|assistant|></think>B<|assistant|></think><|assistant|><think></think>C"
        );
    }

    #[test]
    fn reasoning_cut_from_raw_content() {
        let m = [
            ChatMessage::user("Q"),
            asst("<think>\nr1\n</think>\nanswer", None),
        ];
        assert_eq!(
            render_chat(&m, false, true),
            "[gMASK]<sop><|user|>Q<|assistant|><think>r1</think>answer"
        );
        // Before the last user message the reasoning is dropped but still cut out.
        let m = [asst("r0</think>ans", None), ChatMessage::user("Q")];
        assert_eq!(
            render_chat(&m, false, true),
            "[gMASK]<sop><|assistant|></think>ans<|user|>Q"
        );
        // A reasoning field wins over tags in the content (the content is kept whole).
        let m = [ChatMessage::user("Q"), asst("x</think>y", Some("r"))];
        assert_eq!(
            render_chat(&m, false, true),
            "[gMASK]<sop><|user|>Q<|assistant|><think>r</think>x</think>y"
        );
    }

    #[test]
    fn assistant_without_any_user_keeps_reasoning() {
        // ns.last_user_index = -1, so every assistant turn is "after" it.
        let m = [asst("A", Some("r"))];
        assert_eq!(
            render_chat(&m, true, false),
            "[gMASK]<sop><|assistant|><think>r</think>A<|assistant|></think>"
        );
    }
}
