//! A multi-turn chat over one engine: the conversation stays in the KV
//! cache, so each turn feeds only its new text (the user message and the
//! assistant prefix of the chat template), never the turns before it.
//! Replies stream through a callback that can stop them.

use crate::engine::{Candidates, Engine};
use crate::error::{Error, Result};
use crate::sample::{Sampler, SamplerOptions};
use crate::tokenizer::{render_chat, ChatMessage, Tokenizer};

/// Why a reply ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stop {
    /// The model produced an end-of-turn / end-of-generation token.
    EndOfTurn,
    /// `max_tokens` were generated.
    Length,
    /// The callback asked to stop.
    Cancelled,
    /// The context is full: `reset` to go on.
    ContextFull,
}

/// One assistant reply.
#[derive(Clone, Debug)]
pub struct Reply {
    pub text: String,
    pub tokens: Vec<u32>,
    /// Tokens this turn fed to the model before replying (its new text only).
    pub prefilled: usize,
    pub stop: Stop,
}

pub struct Chat<'a> {
    engine: Engine<'a>,
    tok: &'a Tokenizer,
    opts: SamplerOptions,
    sampler: Sampler,
    system: Option<String>,
    thinking: bool,
    /// Every token fed to the model since the last reset, in order.
    fed: Vec<u32>,
    cands: Candidates,
}

impl<'a> Chat<'a> {
    /// `thinking`: let the model reason before answering (GLM's `<think>`).
    pub fn new(
        mut engine: Engine<'a>,
        tok: &'a Tokenizer,
        opts: SamplerOptions,
        system: Option<String>,
        thinking: bool,
    ) -> Result<Chat<'a>> {
        let sampler = Sampler::new(opts)?;
        engine.set_candidates(sampler.candidates())?;
        engine.reset();
        Ok(Chat {
            engine,
            tok,
            opts,
            sampler,
            system,
            thinking,
            fed: Vec::new(),
            cands: Vec::new(),
        })
    }

    /// Forget the conversation (the system message stays).
    pub fn reset(&mut self) -> Result<()> {
        self.engine.reset();
        self.fed.clear();
        self.sampler = Sampler::new(self.opts)?;
        Ok(())
    }

    /// The next token's candidates after the last fed token.
    pub fn candidates(&self) -> &Candidates {
        &self.cands
    }

    /// Every token the model has seen since the last reset.
    pub fn history(&self) -> &[u32] {
        &self.fed
    }

    /// The template text this user message adds: the whole prompt on the
    /// first turn, only the new user turn and assistant prefix after it.
    fn turn_text(&self, user: &str) -> String {
        let user_msg = [ChatMessage::user(user)];
        if self.fed.is_empty() {
            let mut msgs = Vec::new();
            if let Some(s) = &self.system {
                msgs.push(ChatMessage::system(s.clone()));
            }
            msgs.extend(user_msg);
            render_chat(&msgs, true, self.thinking)
        } else {
            let full = render_chat(&user_msg, true, self.thinking);
            full.trim_start_matches("[gMASK]<sop>").to_string()
        }
    }

    fn feed(&mut self, t: u32) -> Result<()> {
        self.cands = self.engine.step(t)?;
        self.fed.push(t);
        self.sampler.accept(t);
        Ok(())
    }

    /// Send a user message and generate the reply, calling `on_text` with
    /// each new piece of text; it returns false to stop the reply.
    pub fn send(
        &mut self,
        user: &str,
        max_tokens: usize,
        on_text: &mut dyn FnMut(&str) -> bool,
    ) -> Result<Reply> {
        let ids = self.tok.encode(&self.turn_text(user), true)?;
        if self.engine.pos() + ids.len() >= self.engine.n_ctx() {
            return Err(Error::ContextFull {
                n_ctx: self.engine.n_ctx(),
            });
        }
        for &t in &ids {
            self.feed(t)?;
        }
        let mut stream = self.tok.stream_decoder();
        let mut reply = Reply {
            text: String::new(),
            tokens: Vec::new(),
            prefilled: ids.len(),
            stop: Stop::Length,
        };
        while reply.tokens.len() < max_tokens {
            let next = self.sampler.sample(&self.cands)?;
            if self.tok.is_eog(next) {
                reply.stop = Stop::EndOfTurn;
                break;
            }
            reply.tokens.push(next);
            let piece = stream.push(next)?;
            reply.text.push_str(&piece);
            if !on_text(&piece) {
                reply.stop = Stop::Cancelled;
                break;
            }
            match self.feed(next) {
                Ok(()) => {}
                Err(Error::ContextFull { .. }) => {
                    reply.stop = Stop::ContextFull;
                    break;
                }
                Err(e) => return Err(e),
            }
        }
        Ok(reply)
    }
}
