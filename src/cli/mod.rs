//! clap definitions and dispatch. The only place errors become exit codes:
//! one line on stderr, exit status 1 (clap's own usage errors exit 2).

mod json;
mod tools;

use std::path::PathBuf;

use clap::{Parser, Subcommand, ValueEnum};

#[derive(Parser)]
#[command(
    name = "glmw",
    version,
    about = "Inference engine for GLM-4.7-Flash and deepseek2-family GGUF models, with every kernel in WGSL on wgpu"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

/// Where the forward pass runs.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum Backend {
    /// The plain-f32 CPU reference (slow; the oracle for every GPU kernel).
    Cpu,
}

#[derive(Subcommand)]
enum Command {
    /// Print a model's architecture, hyperparameters, tensor types and tokenizer.
    Info {
        /// Path to a GGUF model file.
        model: PathBuf,
        /// Print one JSON document instead of text.
        #[arg(long)]
        json: bool,
        /// Also list every metadata key and tensor.
        #[arg(long)]
        verbose: bool,
    },
    /// Turn text into token ids with the model's tokenizer.
    Tokenize {
        /// Path to a GGUF model file (its tokenizer is used).
        #[arg(long, short)]
        model: PathBuf,
        /// The text to tokenize. Special tokens such as <|user|> are recognised
        /// unless --no-special is given.
        text: String,
        /// Treat special-token text as plain text.
        #[arg(long)]
        no_special: bool,
        /// Print one JSON document instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Run token ids through the model and print the top candidates of the last position.
    Logits {
        /// Path to a GGUF model file.
        #[arg(long, short)]
        model: PathBuf,
        /// Comma-separated token ids, e.g. 154822,154824,785.
        #[arg(long, value_delimiter = ',', required = true)]
        tokens: Vec<u32>,
        /// Where to run the forward pass.
        #[arg(long, value_enum, default_value = "cpu")]
        backend: Backend,
        /// With --out, write the logits of every position, not only the last.
        #[arg(long)]
        all: bool,
        /// Write raw little-endian f32 logits to this file (n_vocab per position).
        #[arg(long)]
        out: Option<PathBuf>,
        /// Print one JSON document instead of text.
        #[arg(long)]
        json: bool,
    },
    /// List the GPU adapters wgpu can see, and which one glmw would pick.
    Devices {
        /// Print one JSON document instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Write a synthetic model: real tensor names, shapes, metadata and quant
    /// mix, seeded random weights.
    Synth {
        /// Which model to imitate.
        #[arg(long, value_parser = ["tiny", "glm-4.7-flash", "deepseek-v2-lite"])]
        preset: String,
        /// Output GGUF path.
        #[arg(long, short)]
        output: PathBuf,
        /// Random seed; the same seed gives the same file.
        #[arg(long, default_value_t = 0)]
        seed: u64,
    },
}

pub fn main() -> i32 {
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("warn")).init();
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Info {
            model,
            json,
            verbose,
        } => tools::info(&model, json, verbose),
        Command::Tokenize {
            model,
            text,
            no_special,
            json,
        } => tools::tokenize(&model, &text, !no_special, json),
        Command::Logits {
            model,
            tokens,
            backend,
            all,
            out,
            json,
        } => tools::logits(&model, &tokens, backend, all, out.as_deref(), json),
        Command::Synth {
            preset,
            output,
            seed,
        } => tools::synth(&preset, &output, seed),
        Command::Devices { json } => tools::devices(json),
    };
    match result {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("error: {e}");
            1
        }
    }
}
