//! glmw: an inference engine for GLM-4.7-Flash and its deepseek2-family GGUF
//! relatives, with every kernel in WGSL run through wgpu (Metal, Vulkan,
//! DX12).
//!
//! The embedding API is small: a [`Runtime`] loads a model onto a GPU, and
//! each [`Session`] over it owns a KV cache, takes text or tokens (prefilled
//! in batches) and generates tokens through an iterator or a callback, with
//! cancellation. [`chat::Chat`] keeps a multi-turn conversation in a
//! session using the model's chat template. Every failure is an [`Error`];
//! the library reads no environment variables and never panics on user
//! input. `docs/embedding.md` walks through it.
//!
//! ```no_run
//! use glmw::chat::Chat;
//! use glmw::{LoadOptions, Runtime, SamplerOptions};
//!
//! fn main() -> glmw::Result<()> {
//!     let opts = LoadOptions { n_ctx: Some(8192), ..Default::default() };
//!     let rt = Runtime::load("GLM-4.7-Flash-Q4_0.gguf", opts, &mut |done, total| {
//!         eprint!("\r{} / {} MB", done >> 20, total >> 20);
//!     })?;
//!     let session = rt.session(SamplerOptions::default())?;
//!     let mut chat = Chat::new(session, None, true)?;
//!     let reply = chat.send("Why is the sky blue?", 512, &mut |piece| {
//!         print!("{piece}");
//!         true // false stops the reply
//!     })?;
//!     eprintln!("\n{} tokens, stopped by {:?}", reply.tokens.len(), reply.stop);
//!     Ok(())
//! }
//! ```
//!
//! Inside, a token's path is: `gguf` parses the file, `model` turns metadata
//! and tensors into a validated config and typed weights, `tokenizer` maps
//! text to ids, `engine::Engine` runs the GPU plans (`gpu::plan`) over
//! weights resident on the device, and `sample::Sampler` picks the next id
//! from the GPU's top candidates. `reference` is the plain-f32 forward pass
//! every kernel is tested against. Modules marked hidden are public for the
//! tests, benchmarks and CLI, not as a stable API.

#[doc(hidden)]
pub mod bench;
pub mod builtin;
pub mod chat;
/// The walk-through in `docs/embedding.md`; its examples compile as doctests.
#[doc = include_str!("../docs/embedding.md")]
pub mod embedding {}
pub mod engine;
pub mod error;
#[doc(hidden)]
pub mod gguf;
pub mod gpu;
pub mod model;
#[doc(hidden)]
pub mod quant;
#[doc(hidden)]
pub mod reference;
pub mod sample;
pub mod session;
#[doc(hidden)]
pub mod shared;
#[doc(hidden)]
pub mod synth;
pub mod tokenizer;
pub mod toolcall;

pub use engine::Memory;
pub use error::{Error, Result};
pub use gpu::{BackendChoice, GpuOptions};
pub use sample::SamplerOptions;
pub use session::{CancelHandle, LoadOptions, Runtime, Session, Stop, Token};
pub use tokenizer::{ChatMessage, Role};
