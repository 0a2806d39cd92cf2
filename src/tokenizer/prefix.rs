//! The one place that decides which tokens a sequence starts with, so the
//! CLI, `Session::feed_text` and perplexity tokenize the same text the same
//! way.

use super::Tokenizer;
use crate::error::Result;
use crate::gguf::GgufFile;

impl Tokenizer {
    /// The tokens a prompt starts with before its text: GLM's
    /// `[gMASK]<sop>` (the prefix of its chat template, which llama.cpp's
    /// completion mode also puts first) when the vocabulary has both,
    /// otherwise BOS when the file names one, otherwise nothing.
    pub fn prompt_prefix(&self) -> Vec<u32> {
        match (self.token_id("[gMASK]"), self.token_id("<sop>")) {
            (Some(g), Some(s)) => vec![g, s],
            _ => self.bos.into_iter().collect(),
        }
    }

    /// `ids` as the start of a sequence: with `prompt_prefix` in front,
    /// unless they already begin with its first token (a prompt written
    /// with its own `[gMASK]` or BOS is taken as it is).
    pub fn with_prompt_prefix(&self, ids: Vec<u32>) -> Vec<u32> {
        let prefix = self.prompt_prefix();
        match prefix.first() {
            Some(first) if ids.first() != Some(first) => [prefix, ids].concat(),
            _ => ids,
        }
    }

    /// The token llama-perplexity puts at the start of each window: BOS
    /// when the file asks for one (`tokenizer.ggml.add_bos_token`), so
    /// perplexities compare with llama.cpp's on the same file.
    pub fn window_bos(&self, file: &GgufFile) -> Result<Option<u32>> {
        Ok(match file.get_bool("tokenizer.ggml.add_bos_token")? {
            Some(true) => self.bos,
            _ => None,
        })
    }
}
