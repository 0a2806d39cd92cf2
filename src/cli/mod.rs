//! clap definitions and dispatch. The only place errors become exit codes:
//! one line on stderr, exit status 1 (clap's own usage errors exit 2).

mod bench;
mod chat;
mod generate;
mod json;
mod memory;
mod perplexity;
mod progress;
mod sampling;
mod serve;
mod tools;

use std::path::{Path, PathBuf};

use clap::{Parser, Subcommand, ValueEnum};
use glmw::session::LoadOptions;

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
    /// The best GPU adapter of Metal, Vulkan or DX12 (high-performance
    /// preference).
    #[value(alias = "gpu")]
    Auto,
    Metal,
    Vulkan,
    Dx12,
    Gl,
}

impl Backend {
    /// The GPU options for this choice; `None` for the CPU.
    pub fn gpu(self, no_subgroups: bool, no_coopmat: bool) -> Option<glmw::gpu::GpuOptions> {
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
            no_coopmat,
        })
    }
}

/// The warm-up before the first request (generate, chat, serve).
#[derive(clap::Args, Clone, Copy, Debug)]
pub struct WarmupArgs {
    /// Skip the warm-up at load (a throwaway token through the model, ~0.3 s,
    /// so the first prompt and tokens run at full speed), as llama.cpp's
    /// --no-warmup does.
    #[arg(long)]
    pub no_warmup: bool,
}

impl WarmupArgs {
    /// Warm `s` up unless --no-warmup.
    pub fn run(&self, s: &mut glmw::Session) -> glmw::Result<()> {
        if self.no_warmup {
            return Ok(());
        }
        s.warm_up()
    }
}

/// Where a GPU command runs (shared by generate, perplexity and bench).
#[derive(clap::Args, Clone, Copy, Debug)]
pub struct DeviceArgs {
    /// auto (or gpu) picks the best Metal, Vulkan or DX12 adapter; metal,
    /// vulkan, dx12, gl force one (gl only when asked for); cpu runs the
    /// CPU reference where the command supports it.
    #[arg(long, value_enum, default_value = "auto")]
    pub backend: Backend,
    /// Use the shared-memory kernels even where the GPU has subgroups.
    #[arg(long)]
    pub no_subgroups: bool,
    /// Run the prefill on the f32 matmul even where the GPU offers
    /// cooperative matrices (tensor cores), as llama.cpp's
    /// GGML_VK_DISABLE_COOPMAT.
    #[arg(long)]
    pub no_coopmat: bool,
    /// Prompt tokens the GPU prefills at once (larger chunks read the
    /// weights fewer times; memory grows with it).
    #[arg(long, visible_alias = "ubatch-size", default_value_t = glmw::engine::DEFAULT_UBATCH)]
    pub ubatch: usize,
}

impl DeviceArgs {
    /// The GPU options for `command`, which has no CPU path.
    pub fn gpu_only(&self, command: &str) -> glmw::Result<glmw::gpu::GpuOptions> {
        self.backend.gpu(self.no_subgroups, self.no_coopmat).ok_or_else(|| {
            glmw::Error::InvalidArgument(format!(
                "{command} runs on a GPU; --backend cpu is only for `glmw logits` and `glmw perplexity`"
            ))
        })
    }

    /// How `command` (GPU only) loads its model, with context `n_ctx`
    /// (`None`: the library's default rule).
    pub fn load_options(&self, command: &str, n_ctx: Option<usize>) -> glmw::Result<LoadOptions> {
        Ok(LoadOptions {
            gpu: self.gpu_only(command)?,
            n_ctx,
            ubatch: self.ubatch,
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
    Logits(tools::LogitsArgs),
    /// Generate text from a prompt on the GPU, streaming it to stdout, with a
    /// stats line (load time, prompt and generation tok/s) at the end.
    Generate(generate::GenerateArgs),
    /// Talk to the model: each line on stdin is a user turn; replies stream
    /// back and earlier turns stay in the KV cache. /reset starts over,
    /// /exit quits, Ctrl-C stops the current reply.
    Chat(chat::ChatArgs),
    /// An OpenAI-compatible HTTP server (/v1/chat/completions, /v1/completions,
    /// /v1/models, /health) with --parallel sessions over one loaded model.
    Serve(serve::ServeArgs),
    /// Perplexity of a text file, as llama-perplexity computes it (windows of
    /// --ctx tokens, the second half of each scored).
    Perplexity(perplexity::PerplexityArgs),
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
        #[arg(long, value_parser = ["tiny", "glm-4.7-flash", "deepseek-v2-lite", "tiny-v2-lite"])]
        preset: String,
        /// Output GGUF path.
        #[arg(long, short)]
        output: PathBuf,
        /// Random seed; the same seed gives the same file.
        #[arg(long, default_value_t = 0)]
        seed: u64,
        /// Quant mix: q4_0 (the Unsloth Q4_0 file's layout), q4_k_m, q5_k_m,
        /// q6_k, q2_k, q3_k_m or iq4_xs (llama-quantize's choices for this
        /// architecture), q8_0, f16 or bf16 (every matrix in that type).
        #[arg(long, default_value = "q4_0",
              value_parser = ["q4_0", "q4_k_m", "q5_k_m", "q6_k", "q8_0", "f16", "bf16",
                              "q2_k", "q3_k_m", "iq4_xs"])]
        mix: String,
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

/// The model at `path` (or the built-in one) loaded onto the GPU, with a
/// progress bar.
pub fn load_runtime(path: Option<&Path>, opts: LoadOptions) -> glmw::Result<glmw::Runtime> {
    runtime_from(open_model(path)?, opts)
}

/// `model` loaded onto the GPU, with a progress bar.
pub fn runtime_from(model: glmw::model::Model, opts: LoadOptions) -> glmw::Result<glmw::Runtime> {
    let mut bar = progress::Progress::new("loading weights");
    let rt = glmw::Runtime::from_model(model, opts, &mut |d, t| bar.update(d, t));
    bar.finish();
    rt
}

/// A text file's contents, or stdin's for `-`. Only regular files are
/// opened: a FIFO or device would block or never end.
pub fn read_text(path: &Path) -> glmw::Result<String> {
    let shown = path.display().to_string();
    let io = |e| glmw::Error::Io {
        path: shown.clone(),
        source: e,
    };
    if path.as_os_str() == "-" {
        return std::io::read_to_string(std::io::stdin()).map_err(io);
    }
    if !std::fs::metadata(path).map_err(io)?.is_file() {
        return Err(glmw::Error::InvalidArgument(format!(
            "{shown} is not a regular file (give - to read stdin)"
        )));
    }
    std::fs::read_to_string(path).map_err(io)
}

fn clock_seed() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
        % 1_000_000_007
}

/// Log lines in the style of the CLI's own messages ("warning: ...").
fn init_logging() {
    use std::io::Write;
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("warn"))
        .format(|buf, r| {
            let level = match r.level() {
                log::Level::Error => "error",
                log::Level::Warn => "warning",
                log::Level::Info => "info",
                log::Level::Debug => "debug",
                log::Level::Trace => "trace",
            };
            writeln!(buf, "{level}: {}", r.args())
        })
        .init();
}

/// Mesa's device-select Vulkan layer asks the Wayland compositor which GPU
/// drives the display; with no display session (no XDG_RUNTIME_DIR)
/// libwayland prints "error: XDG_RUNTIME_DIR is invalid..." on stderr,
/// which reads as glmw's own error. With no session there is no display
/// GPU to prefer, so the layer is skipped (its documented off switch).
/// Called first in `main`, before any thread exists.
fn quiet_headless_vulkan() {
    if std::env::var_os("XDG_RUNTIME_DIR").is_none()
        && std::env::var_os("NODEVICE_SELECT").is_none()
    {
        std::env::set_var("NODEVICE_SELECT", "1");
    }
}

/// A closed stdout (`glmw generate | head`) ends the output, not in error.
fn broken_pipe(e: &glmw::Error) -> bool {
    matches!(e, glmw::Error::Io { source, .. } if source.kind() == std::io::ErrorKind::BrokenPipe)
}

/// `println!` panics when stdout is closed (`glmw info | head -1`); that
/// is the reader being done, so the process ends quietly with status 0,
/// as it does for the commands that write through `Error::Io`.
fn quiet_on_closed_stdout() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let msg = info
            .payload()
            .downcast_ref::<String>()
            .map_or("", String::as_str);
        if msg.starts_with("failed printing to stdout") && msg.contains("Broken pipe") {
            std::process::exit(0);
        }
        default(info)
    }));
}

pub fn main() -> i32 {
    quiet_headless_vulkan();
    quiet_on_closed_stdout();
    init_logging();
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
        Command::Logits(a) => tools::logits(&a),
        Command::Generate(a) => generate::generate(&a),
        Command::Synth {
            preset,
            output,
            seed,
            mix,
        } => tools::synth(&preset, &mix, &output, seed),
        Command::Devices { json } => tools::devices(json),
        Command::Bench(args) => bench::bench(&args),
        Command::Chat(a) => chat::chat(&a),
        Command::Serve(a) => serve::serve(&a),
        Command::Perplexity(a) => perplexity::perplexity(&a),
    };
    match result {
        Ok(()) => 0,
        Err(e) if broken_pipe(&e) => 0,
        Err(e) => {
            let hint = match e {
                glmw::Error::ContextFull { .. } => " (-c / --ctx sets the context length)",
                _ => "",
            };
            eprintln!("error: {e}{hint}");
            1
        }
    }
}
