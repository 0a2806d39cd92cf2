//! clap definitions and dispatch. The only place errors become exit codes:
//! one line on stderr, exit status 1 (clap's own usage errors exit 2).

mod bench;
mod chat;
mod generate;
mod json;
mod perplexity;
mod progress;
mod tools;

use std::path::{Path, PathBuf};

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
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Backend {
    /// The plain-f32 CPU reference (slow; the oracle for every GPU kernel).
    Cpu,
    /// The best GPU adapter of any backend (high-performance preference).
    #[value(alias = "gpu")]
    Auto,
    Metal,
    Vulkan,
    Dx12,
    Gl,
}

impl Backend {
    /// The GPU options for this choice; `None` for the CPU.
    pub fn gpu(self, no_subgroups: bool) -> Option<glmw::gpu::GpuOptions> {
        use glmw::gpu::BackendChoice as B;
        let backend = match self {
            Backend::Cpu => return None,
            Backend::Auto => B::Auto,
            Backend::Metal => B::Metal,
            Backend::Vulkan => B::Vulkan,
            Backend::Dx12 => B::Dx12,
            Backend::Gl => B::Gl,
        };
        Some(glmw::gpu::GpuOptions {
            backend,
            no_subgroups,
        })
    }
}

/// Where a GPU command runs (shared by generate, perplexity and bench).
#[derive(clap::Args, Clone, Copy, Debug)]
pub struct DeviceArgs {
    /// auto (or gpu) picks the best adapter; metal, vulkan, dx12, gl force
    /// one; cpu runs the CPU reference where the command supports it.
    #[arg(long, value_enum, default_value = "auto")]
    pub backend: Backend,
    /// Use the shared-memory kernels even where the GPU has subgroups.
    #[arg(long)]
    pub no_subgroups: bool,
    /// Prompt tokens the GPU prefills at once (larger chunks read the
    /// weights fewer times; memory grows with it).
    #[arg(long, visible_alias = "ubatch-size", default_value_t = glmw::engine::DEFAULT_UBATCH)]
    pub ubatch: usize,
}

impl DeviceArgs {
    /// The GPU options for `command`, which has no CPU path.
    pub fn gpu_only(&self, command: &str) -> glmw::Result<glmw::gpu::GpuOptions> {
        self.backend.gpu(self.no_subgroups).ok_or_else(|| {
            glmw::Error::InvalidArgument(format!(
                "{command} runs on a GPU; --backend cpu is only for `glmw logits` and `glmw perplexity`"
            ))
        })
    }
}

#[derive(Subcommand)]
enum Command {
    /// Print a model's architecture, hyperparameters, tensor types and tokenizer.
    Info {
        /// Path to a GGUF model file [default: the built-in glmw-tiny].
        model: Option<PathBuf>,
        /// Print one JSON document instead of text.
        #[arg(long)]
        json: bool,
        /// Also list every metadata key and tensor.
        #[arg(long)]
        verbose: bool,
    },
    /// Turn text into token ids with the model's tokenizer.
    Tokenize {
        /// Path to a GGUF model file, whose tokenizer is used [default: the
        /// built-in glmw-tiny].
        #[arg(long, short)]
        model: Option<PathBuf>,
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
        /// Path to a GGUF model file [default: the built-in glmw-tiny, a
        /// 3.5M-parameter model of GLM-4.7-Flash's architecture trained on
        /// the King James Bible].
        #[arg(long, short)]
        model: Option<PathBuf>,
        /// Comma-separated token ids, e.g. 154822,154824,785.
        #[arg(long, value_delimiter = ',', required = true)]
        tokens: Vec<u32>,
        /// Where to run the forward pass: the CPU reference, or a GPU
        /// (auto/gpu picks the best adapter; metal, vulkan, dx12, gl force one).
        #[arg(long, value_enum, default_value = "cpu")]
        backend: Backend,
        /// Use the shared-memory kernels even where the GPU has subgroups.
        #[arg(long)]
        no_subgroups: bool,
        /// KV cache length for the GPU run (default: the number of tokens).
        #[arg(long)]
        ctx: Option<usize>,
        /// With --out, write the logits of every position, not only the last
        /// (the GPU then decodes token by token instead of one batched prefill).
        #[arg(long)]
        all: bool,
        /// Write raw little-endian f32 logits to this file (n_vocab per position).
        #[arg(long)]
        out: Option<PathBuf>,
        /// Print one JSON document instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Generate text from a prompt on the GPU, streaming it to stdout, with a
    /// stats line (load time, prompt and generation tok/s) at the end.
    Generate {
        /// Path to a GGUF model file [default: the built-in glmw-tiny, a
        /// 3.5M-parameter model of GLM-4.7-Flash's architecture trained on
        /// the King James Bible].
        #[arg(long, short)]
        model: Option<PathBuf>,
        /// The prompt. Special tokens such as <|user|> are recognised; GLM
        /// files get their [gMASK]<sop> prefix unless the prompt has it.
        #[arg(
            long,
            short,
            required_unless_present = "prompt_file",
            conflicts_with = "prompt_file"
        )]
        prompt: Option<String>,
        /// Read the prompt from this file instead of --prompt.
        #[arg(long, short = 'f')]
        prompt_file: Option<PathBuf>,
        /// Send the prompt as one user message through the model's chat
        /// template (GLM: thinking on unless --no-think).
        #[arg(long)]
        chat: bool,
        /// With --chat: ask for an answer without a thinking section.
        #[arg(long, requires = "chat")]
        no_think: bool,
        /// Tokens to generate (generation also stops at an end-of-generation token).
        #[arg(long, short = 'n', default_value_t = 128)]
        n_predict: usize,
        /// Sampling temperature; 0 is greedy (always the most likely token).
        #[arg(long, default_value_t = 0.8, allow_negative_numbers = true)]
        temp: f32,
        /// Sample among the K most likely tokens (1 to 64; 0 means 64).
        #[arg(long, default_value_t = 40)]
        top_k: usize,
        /// Keep the smallest set of top tokens whose probability reaches P, in (0, 1].
        #[arg(long, default_value_t = 0.95, allow_negative_numbers = true)]
        top_p: f32,
        /// Drop tokens less likely than P times the most likely one (0 = off).
        #[arg(long, default_value_t = 0.05, allow_negative_numbers = true)]
        min_p: f32,
        /// Penalise tokens seen in the last --repeat-last-n tokens: positive
        /// logits are divided by it, negative ones multiplied (1 = off).
        #[arg(long, default_value_t = 1.0, allow_negative_numbers = true)]
        repeat_penalty: f32,
        /// How many recent tokens (prompt included) the penalties look at.
        #[arg(long, default_value_t = 64)]
        repeat_last_n: usize,
        /// Subtract this from the logit of every recent token (0 = off).
        #[arg(long, default_value_t = 0.0, allow_negative_numbers = true)]
        presence_penalty: f32,
        /// Subtract this once per occurrence among the recent tokens (0 = off).
        #[arg(long, default_value_t = 0.0, allow_negative_numbers = true)]
        frequency_penalty: f32,
        /// Stop when the output contains this text (repeatable); the stop text
        /// itself is not printed.
        #[arg(long)]
        stop: Vec<String>,
        /// Random seed for sampling (default: from the clock, printed in the stats line).
        #[arg(long)]
        seed: Option<u64>,
        /// Context length in tokens (prompt + generated); the KV cache holds
        /// this many [default: 4096, or the model's training context if shorter].
        #[arg(long)]
        ctx: Option<usize>,
        #[command(flatten)]
        device: DeviceArgs,
        /// Print one JSON record (text, token ids, timings) instead of streaming.
        #[arg(long)]
        json: bool,
    },
    /// Talk to the model: each line on stdin is a user turn; replies stream
    /// back and earlier turns stay in the KV cache. /reset starts over,
    /// /exit quits, Ctrl-C stops the current reply.
    Chat {
        /// Path to a GGUF model file [default: the built-in glmw-tiny, a
        /// 3.5M-parameter model of GLM-4.7-Flash's architecture trained on
        /// the King James Bible].
        #[arg(long, short)]
        model: Option<PathBuf>,
        /// A system message to start the conversation with.
        #[arg(long)]
        system: Option<String>,
        /// Answer without a thinking section (GLM's <think> is on by default).
        #[arg(long)]
        no_think: bool,
        /// Most tokens per reply.
        #[arg(long, short = 'n', default_value_t = 1024)]
        n_predict: usize,
        /// Context length in tokens [default: 4096, or the model's training context if shorter].
        #[arg(long)]
        ctx: Option<usize>,
        /// Sampling temperature; 0 is greedy.
        #[arg(long, default_value_t = 0.8, allow_negative_numbers = true)]
        temp: f32,
        /// Random seed for sampling (default: from the clock).
        #[arg(long)]
        seed: Option<u64>,
        #[command(flatten)]
        device: DeviceArgs,
    },
    /// Perplexity of a text file, as llama-perplexity computes it (windows of
    /// --ctx tokens, the second half of each scored).
    Perplexity {
        /// Path to a GGUF model file [default: the built-in glmw-tiny, a
        /// 3.5M-parameter model of GLM-4.7-Flash's architecture trained on
        /// the King James Bible].
        #[arg(long, short)]
        model: Option<PathBuf>,
        /// The text to score (UTF-8; special-token text is taken as plain text).
        #[arg(long, short)]
        file: PathBuf,
        /// Window length in tokens; the text needs at least two windows.
        #[arg(long, default_value_t = 512)]
        ctx: usize,
        #[command(flatten)]
        device: DeviceArgs,
        /// Print one JSON document instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Measure: each decode kernel (micro), one block replayed inside one
    /// submission predicting the token (block), or the whole model as
    /// llama-bench does (model: ppN and tgN at each depth, -r repetitions,
    /// dispatches and barriers per token, GPU time per kernel).
    Bench(bench::BenchArgs),
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

/// The model at `path`, or the built-in one (said on stderr) without a path.
pub fn open_model(path: Option<&Path>) -> glmw::Result<glmw::model::Model> {
    match path {
        Some(p) => glmw::model::Model::open(p),
        None => {
            eprintln!("model: {}", glmw::builtin::NAME);
            glmw::builtin::model()
        }
    }
}

/// The GGUF file at `path`, or the built-in model's.
pub fn open_gguf(path: Option<&Path>) -> glmw::Result<glmw::gguf::GgufFile> {
    match path {
        Some(p) => glmw::gguf::GgufFile::open(p),
        None => glmw::builtin::gguf(),
    }
}

fn clock_seed() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
        % 1_000_000_007
}

pub fn main() -> i32 {
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("warn")).init();
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Info {
            model,
            json,
            verbose,
        } => tools::info(model.as_deref(), json, verbose),
        Command::Tokenize {
            model,
            text,
            no_special,
            json,
        } => tools::tokenize(model.as_deref(), &text, !no_special, json),
        Command::Logits {
            model,
            tokens,
            backend,
            no_subgroups,
            ctx,
            all,
            out,
            json,
        } => tools::logits(
            model.as_deref(),
            &tokens,
            backend,
            no_subgroups,
            ctx,
            all,
            out.as_deref(),
            json,
        ),
        Command::Generate {
            model,
            prompt,
            prompt_file,
            chat,
            no_think,
            n_predict,
            temp,
            top_k,
            top_p,
            min_p,
            repeat_penalty,
            repeat_last_n,
            presence_penalty,
            frequency_penalty,
            stop,
            seed,
            ctx,
            device,
            json,
        } => device.gpu_only("generate").and_then(|gpu| {
            generate::prompt_text(prompt, prompt_file.as_deref(), chat, !no_think).and_then(
                |prompt| {
                    generate::generate(&generate::GenerateArgs {
                        model: model.as_deref(),
                        prompt: &prompt,
                        n_predict,
                        n_ctx: ctx,
                        sampling: glmw::sample::SamplerOptions {
                            temperature: temp,
                            top_k,
                            top_p,
                            min_p,
                            repeat_penalty,
                            repeat_last_n,
                            presence_penalty,
                            frequency_penalty,
                            seed: seed.unwrap_or_else(clock_seed),
                        },
                        stop: &stop,
                        gpu,
                        ubatch: device.ubatch,
                        json,
                    })
                },
            )
        }),
        Command::Synth {
            preset,
            output,
            seed,
        } => tools::synth(&preset, &output, seed),
        Command::Devices { json } => tools::devices(json),
        Command::Bench(args) => bench::bench(&args),
        Command::Chat {
            model,
            system,
            no_think,
            n_predict,
            ctx,
            temp,
            seed,
            device,
        } => chat::chat(&chat::ChatArgs {
            model: model.as_deref(),
            system,
            thinking: !no_think,
            n_predict,
            n_ctx: ctx,
            sampling: glmw::sample::SamplerOptions {
                temperature: temp,
                seed: seed.unwrap_or_else(clock_seed),
                ..Default::default()
            },
            device,
        }),
        Command::Perplexity {
            model,
            file,
            ctx,
            device,
            json,
        } => perplexity::perplexity(model.as_deref(), &file, ctx, device, json),
    };
    match result {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("error: {e}");
            1
        }
    }
}
