//! glmw: an inference engine for GLM-4.7-Flash and its deepseek2-family GGUF
//! relatives. A token's path: `gguf` parses the file, `model` turns metadata
//! and tensors into a validated config and typed weights, `reference` runs
//! the plain-f32 forward pass every GPU kernel is checked against, and
//! `tokenizer` maps text to ids and back.
//!
//! The library reads no environment variables; all configuration is typed.
//!
//! On the GPU, `engine::Engine` holds a model's weights, KV cache and the
//! pre-recorded decode plan; `chat::Chat` keeps a conversation in that cache
//! and streams replies:
//!
//! ```no_run
//! use glmw::chat::Chat;
//! use glmw::engine::{Engine, EngineOptions};
//! use glmw::gpu::{Gpu, GpuOptions};
//! use glmw::model::Model;
//! use glmw::sample::SamplerOptions;
//! use glmw::tokenizer::Tokenizer;
//!
//! fn main() -> glmw::Result<()> {
//!     let model = Model::open("GLM-4.7-Flash-Q4_0.gguf")?;
//!     let tokenizer = Tokenizer::from_gguf(&model.file)?;
//!     let gpu = Gpu::new(GpuOptions::default())?;
//!     let options = EngineOptions { n_ctx: 8192, ..Default::default() };
//!     let engine = Engine::load(&model, &gpu, options, &mut |done, total| {
//!         eprint!("\r{} / {} MB", done >> 20, total >> 20);
//!     })?;
//!     let mut chat = Chat::new(engine, &tokenizer, SamplerOptions::default(), None, true)?;
//!     let reply = chat.send("Why is the sky blue?", 512, &mut |piece| {
//!         print!("{piece}");
//!         true // false stops the reply
//!     })?;
//!     eprintln!("\n{} tokens, stopped by {:?}", reply.tokens.len(), reply.stop);
//!     Ok(())
//! }
//! ```
//!
//! Token by token, without the chat template: `Engine::step(token)` returns
//! the next token's top candidates, and `sample::Sampler` picks one.
//!
//! ```no_run
//! # use glmw::engine::{Engine, EngineOptions};
//! # use glmw::sample::{Sampler, SamplerOptions};
//! # fn run(engine: &mut Engine, prompt: &[u32]) -> glmw::Result<Vec<u32>> {
//! let mut sampler = Sampler::new(SamplerOptions { temperature: 0.0, ..Default::default() })?;
//! engine.set_candidates(sampler.candidates())?;
//! let mut cands = Vec::new();
//! for &t in prompt {
//!     cands = engine.step(t)?;
//! }
//! let mut out = Vec::new();
//! for _ in 0..32 {
//!     let next = sampler.sample(&cands)?;
//!     out.push(next);
//!     cands = engine.step(next)?;
//! }
//! # Ok(out)
//! # }
//! ```

pub mod bench;
pub mod chat;
pub mod engine;
pub mod error;
pub mod gguf;
pub mod gpu;
pub mod model;
pub mod quant;
pub mod reference;
pub mod sample;
pub mod synth;
pub mod tokenizer;

pub use error::{Error, Result};
