//! The built-in model, glmw-tiny: GLM-4.7-Flash's architecture (MLA with
//! q_lora, dense block 0, sigmoid-routed MoE blocks with a selection bias
//! and a shared expert) at 3.5M parameters, trained on the King James Bible
//! by `tools/train.py` and stored in the real file's Q4_0 mix.
//! `docs/tiny-model.md` records how it was trained and its perplexity.
//!
//! It is compiled into the binary (2.5 MB) so that `glmw generate` and
//! `glmw chat` produce text on a fresh clone with no `--model` and no
//! network.

use crate::error::Result;
use crate::gguf::GgufFile;
use crate::model::Model;

/// How commands name the built-in model.
pub const NAME: &str = "glmw-tiny (built in, KJV; docs/tiny-model.md)";

static GGUF: &[u8] = include_bytes!("../tools/model/glmw-tiny-q4_0.gguf");

/// The built-in model's GGUF file (parsed in place, no copy).
pub fn gguf() -> Result<GgufFile> {
    GgufFile::from_static(GGUF)
}

/// The built-in model.
pub fn model() -> Result<Model> {
    Model::from_gguf(gguf()?)
}
