//! glmw: an inference engine for GLM-4.7-Flash and its deepseek2-family GGUF
//! relatives. A token's path: `gguf` parses the file, `model` turns metadata
//! and tensors into a validated config and typed weights, `reference` runs
//! the plain-f32 forward pass every GPU kernel is checked against, and
//! `tokenizer` maps text to ids and back.
//!
//! The library reads no environment variables; all configuration is typed.

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
