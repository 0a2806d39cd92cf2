//! `glmw chat`: an interactive conversation on the GPU. Each line read from
//! stdin is a user turn; replies stream to stdout; earlier turns stay in the
//! KV cache. `/reset` starts over, `/exit` (or end of input) quits, and
//! Ctrl-C stops the reply being written (on Unix) rather than the program.

use std::io::{BufRead, IsTerminal, Write};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

use super::DeviceArgs;
use glmw::chat::{Chat, Stop};
use glmw::gpu::Gpu;
use glmw::sample::SamplerOptions;
use glmw::tokenizer::Tokenizer;
use glmw::{Error, Result};

static INTERRUPTED: AtomicBool = AtomicBool::new(false);

#[cfg(unix)]
fn catch_ctrl_c() {
    extern "C" fn on_sigint(_: i32) {
        INTERRUPTED.store(true, Ordering::SeqCst);
    }
    extern "C" {
        fn signal(signum: i32, handler: extern "C" fn(i32)) -> usize;
    }
    const SIGINT: i32 = 2;
    // SAFETY: `signal` is the C library's; the handler only stores an atomic.
    unsafe {
        signal(SIGINT, on_sigint);
    }
}

#[cfg(not(unix))]
fn catch_ctrl_c() {}

pub struct ChatArgs<'a> {
    pub model: Option<&'a Path>,
    pub system: Option<String>,
    pub thinking: bool,
    pub n_predict: usize,
    pub n_ctx: Option<usize>,
    pub sampling: SamplerOptions,
    pub device: DeviceArgs,
}

fn io_err(e: std::io::Error) -> Error {
    Error::Io {
        path: "stdio".into(),
        source: e,
    }
}

pub fn chat(a: &ChatArgs) -> Result<()> {
    let gpu_opts = a.device.gpu_only("chat")?;
    let model = super::open_model(a.model)?;
    let tok = Tokenizer::from_gguf(&model.file)?;
    let n_ctx = a
        .n_ctx
        .unwrap_or_else(|| 4096.min(model.config.n_ctx_train.max(1)));
    let gpu = Gpu::new(gpu_opts)?;
    let engine = super::generate::load(&model, &gpu, n_ctx, 1, a.device.ubatch)?;
    let session = glmw::Session::new(engine, &tok, a.sampling)?;
    let mut chat = Chat::new(session, a.system.clone(), a.thinking)?;
    catch_ctrl_c();
    let tty = std::io::stdin().is_terminal();
    if tty {
        eprintln!("glmw chat: {n_ctx} tokens of context. /reset starts over, /exit quits, Ctrl-C stops a reply.");
    }
    let stdin = std::io::stdin();
    let mut out = std::io::stdout();
    let mut line = String::new();
    loop {
        if tty {
            eprint!("> ");
        }
        line.clear();
        if stdin.lock().read_line(&mut line).map_err(io_err)? == 0 {
            break;
        }
        let msg = line.trim_end_matches(['\n', '\r']);
        match msg.trim() {
            "" => continue,
            "/exit" | "/quit" => break,
            "/reset" => {
                chat.reset()?;
                eprintln!("[conversation reset]");
                continue;
            }
            _ => {}
        }
        INTERRUPTED.store(false, Ordering::SeqCst);
        let mut write_err = None;
        let reply = chat.send(msg, a.n_predict, &mut |piece| {
            if let Err(e) = out.write_all(piece.as_bytes()).and_then(|_| out.flush()) {
                write_err = Some(e);
                return false;
            }
            !INTERRUPTED.load(Ordering::SeqCst)
        });
        if let Some(e) = write_err {
            return Err(io_err(e));
        }
        match reply {
            Ok(r) => {
                println!();
                match r.stop {
                    Stop::Cancelled => eprintln!("[stopped]"),
                    Stop::ContextFull => eprintln!(
                        "[context full ({n_ctx} tokens): /reset to start a new conversation]"
                    ),
                    Stop::Length | Stop::EndOfTurn => {}
                }
            }
            Err(Error::ContextFull { .. }) => {
                eprintln!("[context full ({n_ctx} tokens): /reset to start a new conversation]")
            }
            Err(e) => return Err(e),
        }
    }
    Ok(())
}
