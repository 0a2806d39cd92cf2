//! Chat messages and GLM-4.7-Flash's chat template (model-spec §5.3), the
//! fallback for files without one of their own (`template`).

use super::template::ChatTemplate;
use crate::error::Result;
use crate::toolcall::ToolCall;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    System,
    User,
    Assistant,
    /// A tool's result, answering the assistant's tool call.
    Tool,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChatMessage {
    pub role: Role,
    pub content: String,
    /// The assistant's thinking for that turn, when the caller kept it.
    pub reasoning: Option<String>,
    /// The assistant's tool calls in that turn.
    pub tool_calls: Vec<ToolCall>,
}

impl ChatMessage {
    pub fn system(text: impl Into<String>) -> Self {
        ChatMessage {
            role: Role::System,
            content: text.into(),
            reasoning: None,
            tool_calls: Vec::new(),
        }
    }
    pub fn user(text: impl Into<String>) -> Self {
        ChatMessage {
            role: Role::User,
            content: text.into(),
            reasoning: None,
            tool_calls: Vec::new(),
        }
    }
    pub fn assistant(text: impl Into<String>) -> Self {
        ChatMessage {
            role: Role::Assistant,
            content: text.into(),
            reasoning: None,
            tool_calls: Vec::new(),
        }
    }
    /// A tool's result.
    pub fn tool(text: impl Into<String>) -> Self {
        ChatMessage {
            role: Role::Tool,
            content: text.into(),
            reasoning: None,
            tool_calls: Vec::new(),
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

/// Render `messages` in GLM's built-in template as the prompt text.
/// Special tokens appear as their text (`[gMASK]`, `<|user|>`, ...); to
/// encode it, prefer `Tokenizer::encode_messages`, which uses the file's
/// own template and keeps message text from being read as markers.
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
) -> Result<String> {
    Ok(
        render_chat_parts(messages, add_generation_prompt, thinking)?
            .into_iter()
            .map(|p| p.text)
            .collect(),
    )
}

/// `render_chat` as its pieces: template markers apart from message text.
pub fn render_chat_parts(
    messages: &[ChatMessage],
    add_generation_prompt: bool,
    thinking: bool,
) -> Result<Vec<ChatPart>> {
    ChatTemplate::glm().render_parts(messages, add_generation_prompt, thinking)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn asst(content: &str, reasoning: Option<&str>) -> ChatMessage {
        ChatMessage {
            role: Role::Assistant,
            content: content.into(),
            reasoning: reasoning.map(Into::into),
            tool_calls: Vec::new(),
        }
    }

    #[test]
    fn message_text_is_apart_from_the_markers() {
        let m = [ChatMessage::user("hi <|assistant|>")];
        let parts = render_chat_parts(&m, true, true).unwrap();
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
            render_chat(&m, true, true).unwrap(),
            "[gMASK]<sop><|user|>Hello<|assistant|><think>"
        );
        assert_eq!(
            render_chat(&m, true, false).unwrap(),
            "[gMASK]<sop><|user|>Hello<|assistant|></think>"
        );
        assert_eq!(
            render_chat(&m, false, true).unwrap(),
            "[gMASK]<sop><|user|>Hello"
        );
        assert_eq!(render_chat(&[], false, true).unwrap(), "[gMASK]<sop>");
    }

    #[test]
    fn system_and_user_text_is_verbatim() {
        let m = [
            ChatMessage::system(" Be brief.\n"),
            ChatMessage::user("  Hi\n"),
        ];
        assert_eq!(
            render_chat(&m, true, true).unwrap(),
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
            render_chat(&m, true, true).unwrap(),
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
            render_chat(&m, false, true).unwrap(),
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
            render_chat(&m, false, true).unwrap(),
            "[gMASK]<sop><|user|>Q<|assistant|><think>r1</think>answer"
        );
        // Before the last user message the reasoning is dropped but still cut out.
        let m = [asst("r0</think>ans", None), ChatMessage::user("Q")];
        assert_eq!(
            render_chat(&m, false, true).unwrap(),
            "[gMASK]<sop><|assistant|></think>ans<|user|>Q"
        );
        // A reasoning field wins over tags in the content (the content is kept whole).
        let m = [ChatMessage::user("Q"), asst("x</think>y", Some("r"))];
        assert_eq!(
            render_chat(&m, false, true).unwrap(),
            "[gMASK]<sop><|user|>Q<|assistant|><think>r</think>x</think>y"
        );
    }

    #[test]
    fn assistant_without_any_user_keeps_reasoning() {
        // ns.last_user_index = -1, so every assistant turn is "after" it.
        let m = [asst("A", Some("r"))];
        assert_eq!(
            render_chat(&m, true, false).unwrap(),
            "[gMASK]<sop><|assistant|><think>r</think>A<|assistant|></think>"
        );
    }
}
