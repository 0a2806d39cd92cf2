//! `glmw chat`: an interactive conversation on the GPU. Each line read from
//! stdin is a user turn (on a terminal through a line editor with
//! history); replies stream to stdout; earlier turns stay in the KV cache.
//! `/help` lists the commands, `/reset` starts over, `/exit` (or end of
//! input) quits, and Ctrl-C stops the reply being written (on Unix) rather
//! than the program; at the prompt it says how to leave.

use std::io::{BufRead, IsTerminal, Write};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};

use super::sampling::{n_predict, NPredict, SamplingArgs};
use super::{DeviceArgs, WarmupArgs};
use glmw::chat::{Chat, Stop};
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

/// `glmw chat`'s flags.
#[derive(clap::Args)]
pub struct ChatArgs {
    /// Path to a GGUF model file [default: the built-in glmw-tiny, a
    /// 3.5M-parameter model of GLM-4.7-Flash's architecture trained on
    /// the King James Bible].
    #[arg(long, short)]
    pub model: Option<PathBuf>,
    /// A system message to start the conversation with.
    #[arg(long, visible_alias = "system-prompt")]
    pub system: Option<String>,
    /// Answer without a thinking section (GLM's <think> is on by default).
    #[arg(long)]
    pub no_think: bool,
    /// Most tokens per reply; -1 (the default) runs to the end of the turn
    /// or of the context.
    #[arg(long, short = 'n', default_value = "-1", value_parser = n_predict, allow_negative_numbers = true)]
    pub n_predict: NPredict,
    /// Context length in tokens [default: 4096, or the model's training
    /// context if shorter]. When it fills, the oldest turns are dropped.
    #[arg(long, short = 'c', visible_alias = "ctx-size")]
    pub ctx: Option<usize>,
    #[command(flatten)]
    pub sampling: SamplingArgs,
    #[command(flatten)]
    pub device: DeviceArgs,
    #[command(flatten)]
    pub warmup: WarmupArgs,
}

fn io_err(e: std::io::Error) -> Error {
    Error::Io {
        path: "stdio".into(),
        source: e,
    }
}

/// One line of stdin without its line end; `None` at the end of input.
/// A line that is not UTF-8 is skipped with a message, not fatal.
fn read_line(stdin: &std::io::Stdin, buf: &mut Vec<u8>) -> Result<Option<String>> {
    loop {
        buf.clear();
        if stdin.lock().read_until(b'\n', buf).map_err(io_err)? == 0 {
            return Ok(None);
        }
        match std::str::from_utf8(buf) {
            Ok(s) => return Ok(Some(s.trim_end_matches(['\n', '\r']).to_string())),
            Err(_) => eprintln!("[skipped a line that is not UTF-8 text]"),
        }
    }
}

/// Send one user turn: the reply streams to stdout, how it ended to stderr.
fn turn(chat: &mut Chat, msg: &str, n_predict: NPredict) -> Result<()> {
    let n_predict = n_predict.within(chat.session().n_ctx());
    INTERRUPTED.store(false, Ordering::SeqCst);
    let mut out = std::io::stdout();
    let mut write_err = None;
    let reply = chat.send(msg, n_predict, &mut |piece| {
        if let Err(e) = out.write_all(piece.as_bytes()).and_then(|_| out.flush()) {
            write_err = Some(e);
            return false;
        }
        !INTERRUPTED.load(Ordering::SeqCst)
    });
    if let Some(e) = write_err {
        return Err(io_err(e));
    }
    let n_ctx = chat.session().n_ctx();
    match reply {
        Ok(r) => {
            println!();
            if r.dropped > 0 {
                eprintln!(
                    "[context full: dropped the {} oldest messages to go on]",
                    r.dropped
                );
            }
            match r.stop {
                Stop::Cancelled => eprintln!("[stopped]"),
                Stop::ContextFull => eprintln!(
                    "[the reply filled the context ({n_ctx} tokens); the next turn drops the oldest ones]"
                ),
                Stop::Length | Stop::EndOfTurn | Stop::StopString => {}
            }
        }
        Err(Error::ContextFull { .. }) => {
            eprintln!("[that message does not fit in the context ({n_ctx} tokens; -c sets it)]")
        }
        Err(e) => return Err(e),
    }
    Ok(())
}

const HELP: &str = "\
/help    this list
/reset   start a new conversation (the system message stays)
/exit    leave (also /quit, or Ctrl-D at an empty prompt)
Ctrl-C   stops the reply being written";

/// Where user lines come from: a line editor with history on a terminal
/// (arrow keys, Ctrl-R), plain stdin otherwise.
enum Input {
    Editor(Box<rustyline::DefaultEditor>),
    Pipe(std::io::Stdin, Vec<u8>),
}

enum Line {
    Text(String),
    /// Ctrl-C at the prompt.
    Interrupted,
    End,
}

impl Input {
    fn new() -> Input {
        let stdin = std::io::stdin();
        if stdin.is_terminal() {
            if let Ok(e) = rustyline::DefaultEditor::new() {
                return Input::Editor(Box::new(e));
            }
        }
        Input::Pipe(stdin, Vec::new())
    }

    fn read(&mut self) -> Result<Line> {
        use rustyline::error::ReadlineError;
        match self {
            Input::Editor(e) => match e.readline("> ") {
                Ok(line) => {
                    let _ = e.add_history_entry(line.as_str());
                    Ok(Line::Text(line))
                }
                Err(ReadlineError::Interrupted) => Ok(Line::Interrupted),
                Err(ReadlineError::Eof) => Ok(Line::End),
                Err(e) => Err(io_err(std::io::Error::other(e.to_string()))),
            },
            Input::Pipe(stdin, buf) => Ok(read_line(stdin, buf)?.map_or(Line::End, Line::Text)),
        }
    }
}

pub fn chat(a: &ChatArgs) -> Result<()> {
    let load = a.device.load_options("chat", a.ctx)?;
    let rt = super::load_runtime(a.model.as_deref(), load)?;
    let mut session = rt.session(a.sampling.options())?;
    a.warmup.run(&mut session)?;
    session.set_stop_strings(&a.sampling.stop);
    let mut chat = Chat::new(session, a.system.clone(), !a.no_think)?;
    eprintln!("{}", super::memory::text(chat.session().memory()));
    catch_ctrl_c();
    let mut input = Input::new();
    if let Input::Editor(_) = input {
        eprintln!(
            "glmw chat: {} tokens of context. /help lists the commands, /exit quits, Ctrl-C stops a reply.",
            rt.n_ctx()
        );
    }
    loop {
        let msg = match input.read()? {
            Line::End => break,
            Line::Interrupted => {
                eprintln!("[Ctrl-C stops a reply; to leave, type /exit or press Ctrl-D]");
                continue;
            }
            Line::Text(t) => t,
        };
        match msg.trim() {
            "" => continue,
            "/exit" | "/quit" => break,
            "/help" | "/?" => eprintln!("{HELP}"),
            "/reset" => {
                chat.reset()?;
                eprintln!("[conversation reset]");
            }
            cmd if cmd.starts_with('/') && !cmd.contains(' ') => {
                eprintln!("[unknown command {cmd}; /help lists them]")
            }
            _ => turn(&mut chat, &msg, a.n_predict)?,
        }
    }
    Ok(())
}
