//! A multi-turn chat over one engine: the conversation stays in the KV
//! cache, so each turn feeds only its new text (the user message and the
//! assistant prefix of the chat template), never the turns before it.
//! Replies stream through a callback that can stop them.

use crate::engine::Candidates;
use crate::error::{Error, Result};
use crate::session::Session;
pub use crate::session::Stop;
use crate::tokenizer::{render_chat_parts, ChatMessage, ChatPart};

/// One assistant reply.
#[derive(Clone, Debug)]
pub struct Reply {
    pub text: String,
    pub tokens: Vec<u32>,
    /// Tokens this turn fed to the model before replying (its new text only).
    pub prefilled: usize,
    pub stop: Stop,
}

pub struct Chat {
    session: Session,
    system: Option<String>,
    thinking: bool,
}

impl Chat {
    /// A chat over `session` (reset first). `thinking`: let the model
    /// reason before answering (GLM's `<think>`).
    pub fn new(mut session: Session, system: Option<String>, thinking: bool) -> Result<Chat> {
        session.reset()?;
        Ok(Chat {
            session,
            system,
            thinking,
        })
    }

    /// Forget the conversation (the system message stays).
    pub fn reset(&mut self) -> Result<()> {
        self.session.reset()
    }

    /// The next token's candidates after the last fed token.
    pub fn candidates(&self) -> &Candidates {
        self.session.candidates()
    }

    /// Every token the model has seen since the last reset.
    pub fn history(&self) -> &[u32] {
        self.session.history()
    }

    /// The session underneath (cancel handle, position).
    pub fn session(&self) -> &Session {
        &self.session
    }

    /// The template text this user message adds: the whole prompt on the
    /// first turn, only the new user turn and assistant prefix after it.
    /// Message text stays apart from the markers, so it is encoded as
    /// plain text (a user cannot type a turn marker into the conversation).
    fn turn_parts(&self, user: &str) -> Vec<ChatPart> {
        let user_msg = [ChatMessage::user(user)];
        if self.session.history().is_empty() {
            let mut msgs = Vec::new();
            if let Some(s) = &self.system {
                msgs.push(ChatMessage::system(s.clone()));
            }
            msgs.extend(user_msg);
            render_chat_parts(&msgs, true, self.thinking)
        } else {
            let mut parts = render_chat_parts(&user_msg, true, self.thinking);
            if let Some(first) = parts.first_mut() {
                first.text = first.text.trim_start_matches("[gMASK]<sop>").to_string();
            }
            parts
        }
    }

    /// Send a user message and generate the reply, calling `on_text` with
    /// each new piece of text; it returns false to stop the reply.
    pub fn send(
        &mut self,
        user: &str,
        max_tokens: usize,
        on_text: &mut dyn FnMut(&str) -> bool,
    ) -> Result<Reply> {
        let ids = self
            .session
            .tokenizer()
            .encode_chat(&self.turn_parts(user))?;
        if self.session.pos() + ids.len() >= self.session.n_ctx() {
            return Err(Error::ContextFull {
                n_ctx: self.session.n_ctx(),
            });
        }
        let start = self.session.pos();
        match self.session.feed(&ids) {
            Ok(()) => {}
            // Half a user turn would confuse the turns after it.
            Err(Error::Cancelled) => {
                self.session.truncate(start)?;
                return Ok(Reply {
                    text: String::new(),
                    tokens: Vec::new(),
                    prefilled: 0,
                    stop: Stop::Cancelled,
                });
            }
            Err(e) => return Err(e),
        }
        let mut tokens = Vec::new();
        let (text, stop) = self.session.generate(max_tokens, &mut |t| {
            tokens.push(t.id);
            on_text(&t.text)
        })?;
        Ok(Reply {
            text,
            tokens,
            prefilled: ids.len(),
            stop,
        })
    }
}
