//! A progress line on stderr for long operations (synth, model loads):
//! silent for the first second, then a percentage with the rate; redrawn in
//! place on a terminal, every 10% otherwise.

use std::io::IsTerminal;
use std::time::Instant;

pub struct Progress {
    label: String,
    t0: Instant,
    tty: bool,
    last_pct: u64,
    shown: bool,
}

impl Progress {
    pub fn new(label: impl Into<String>) -> Progress {
        Progress {
            label: label.into(),
            t0: Instant::now(),
            tty: std::io::stderr().is_terminal(),
            last_pct: u64::MAX,
            shown: false,
        }
    }

    pub fn update(&mut self, done: u64, total: u64) {
        let pct = (done * 100 / total.max(1)).min(100);
        let secs = self.t0.elapsed().as_secs_f64();
        if pct == self.last_pct || secs < 1.0 {
            return;
        }
        self.last_pct = pct;
        let gb = done as f64 / 1e9;
        let rate = gb / secs;
        if self.tty {
            eprint!("\r{}: {pct:>3}% {gb:.2} GB ({rate:.2} GB/s)   ", self.label);
            self.shown = true;
        } else if pct % 10 == 0 {
            eprintln!("{}: {pct}% {gb:.2} GB ({rate:.2} GB/s)", self.label);
        }
    }

    /// End the in-place line, if one was drawn.
    pub fn finish(&self) {
        if self.shown {
            eprintln!();
        }
    }
}
