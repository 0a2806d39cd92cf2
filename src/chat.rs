//! A multi-turn chat over one session: the conversation stays in the KV
//! cache, so each turn feeds only its new text (the user message and the
//! assistant prefix of the chat template), never the turns before it.
//! When a turn does not fit, the oldest turns are dropped and the rest is
//! fed again (context shift), so a conversation never ends on a full
//! context. Replies stream through a callback that can stop them.

use crate::engine::Candidates;
use crate::error::{Error, Result};
use crate::session::Session;
pub use crate::session::Stop;
use crate::tokenizer::{ChatMessage, ChatPart};

/// One assistant reply.
#[derive(Clone, Debug)]
pub struct Reply {
    pub text: String,
    pub tokens: Vec<u32>,
    /// Tokens this turn fed to the model before replying (its new text
    /// only, unless older turns were dropped).
    pub prefilled: usize,
    pub stop: Stop,
    /// Earlier messages (user and assistant) dropped to make room.
    pub dropped: usize,
}

pub struct Chat {
    session: Session,
    system: Option<String>,
    thinking: bool,
    /// The conversation since the last reset, less dropped turns.
    turns: Vec<ChatMessage>,
    /// The cache holds exactly `turns` as the template renders them
    /// (false after a feed cancelled halfway through a re-render).
    synced: bool,
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
            turns: Vec::new(),
            synced: true,
        })
    }

    /// Forget the conversation (the system message stays).
    pub fn reset(&mut self) -> Result<()> {
        self.turns.clear();
        self.synced = true;
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

    /// The conversation kept so far (older turns may have been dropped).
    pub fn messages(&self) -> &[ChatMessage] {
        &self.turns
    }

    /// The template text `user` adds after the cache: the new user turn
    /// and the assistant prefix. Message text stays apart from the
    /// markers, so it is encoded as plain text (a user cannot type a turn
    /// marker into the conversation).
    /// The template's opening (what it renders for no messages, e.g.
    /// `[gMASK]<sop>` or a BOS) is already in the cache, so it is cut off.
    fn turn_parts(&self, user: &str) -> Result<Vec<ChatPart>> {
        let t = self.session.tokenizer().chat_template();
        let start: String = t
            .render_parts(&[], false, self.thinking)?
            .into_iter()
            .map(|p| p.text)
            .collect();
        let mut parts = t.render_parts(&[ChatMessage::user(user)], true, self.thinking)?;
        if let Some(first) = parts.first_mut().filter(|p| p.special) {
            if let Some(rest) = first.text.strip_prefix(start.as_str()) {
                first.text = rest.to_string();
            }
        }
        Ok(parts)
    }

    /// The whole prompt: system message, kept turns, `user`'s turn.
    fn render_all(&self, user: &str) -> Result<Vec<u32>> {
        let mut msgs: Vec<ChatMessage> = self.system.iter().map(ChatMessage::system).collect();
        msgs.extend(self.turns.iter().cloned());
        msgs.push(ChatMessage::user(user));
        self.session
            .tokenizer()
            .encode_messages(&msgs, self.thinking)
    }

    /// The tokens to feed for `user`'s turn after the first `keep` of the
    /// cache, and how many messages were dropped to make room: the turn
    /// alone while it fits with `reserve` tokens left for the reply, else
    /// the conversation rendered again without its oldest turns, down to
    /// half the context so that the next turns fit too.
    fn plan(&mut self, user: &str, reserve: usize) -> Result<(Vec<u32>, usize, usize)> {
        let n_ctx = self.session.n_ctx();
        let pos = self.session.pos();
        let mut limit = n_ctx.saturating_sub(reserve);
        if pos > 0 && self.synced {
            let ids = self
                .session
                .tokenizer()
                .encode_chat(&self.turn_parts(user)?)?;
            if pos + ids.len() <= limit {
                return Ok((ids, pos, 0));
            }
            limit = limit.min(n_ctx / 2);
        }
        let mut dropped = 0;
        let mut ids = self.render_all(user)?;
        while ids.len() > limit && !self.turns.is_empty() {
            // The oldest exchange: a user message and its reply.
            let n = self.turns.len().min(2);
            self.turns.drain(..n);
            dropped += n;
            ids = self.render_all(user)?;
        }
        if ids.len() >= n_ctx {
            return Err(Error::ContextFull { n_ctx });
        }
        let common = self
            .session
            .history()
            .iter()
            .zip(&ids)
            .take_while(|(a, b)| a == b)
            .count();
        let keep = common.min(ids.len() - 1);
        Ok((ids[keep..].to_vec(), keep, dropped))
    }

    /// Send a user message and generate the reply, calling `on_text` with
    /// each new piece of text; it returns false to stop the reply.
    pub fn send(
        &mut self,
        user: &str,
        max_tokens: usize,
        on_text: &mut dyn FnMut(&str) -> bool,
    ) -> Result<Reply> {
        let reserve = max_tokens.clamp(1, (self.session.n_ctx() / 4).max(1));
        let (ids, keep, dropped) = self.plan(user, reserve)?;
        let rebuilt = keep != self.session.pos();
        self.session.truncate(keep)?;
        match self.session.feed(&ids) {
            Ok(()) => self.synced = true,
            // Half a user turn would confuse the turns after it.
            Err(Error::Cancelled) => {
                self.session.truncate(keep)?;
                self.synced = !rebuilt;
                return Ok(Reply {
                    text: String::new(),
                    tokens: Vec::new(),
                    prefilled: 0,
                    stop: Stop::Cancelled,
                    dropped,
                });
            }
            Err(e) => return Err(e),
        }
        let mut tokens = Vec::new();
        let (text, stop) = self.session.generate(max_tokens, &mut |t| {
            tokens.push(t.id);
            on_text(&t.text)
        })?;
        self.turns.push(ChatMessage::user(user));
        self.turns.push(ChatMessage::assistant(text.clone()));
        Ok(Reply {
            text,
            tokens,
            prefilled: ids.len(),
            stop,
            dropped,
        })
    }
}
