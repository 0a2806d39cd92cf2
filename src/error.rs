//! The one error type of the library. Every failure a user can cause (a bad
//! file, a bad flag, a missing GPU feature) becomes one of these variants with a
//! message that says what was wrong and, where it helps, what to do.

use std::fmt;

/// Everything that can go wrong in glmw. The CLI turns it into one line on
/// stderr and a non-zero exit code; the library never panics on user input.
#[derive(Debug)]
pub enum Error {
    /// Reading or writing a file failed.
    Io {
        path: String,
        source: std::io::Error,
    },
    /// A GGUF file is malformed. `offset` is the byte offset where the problem
    /// was found.
    Gguf { offset: u64, msg: String },
    /// The file is well formed but describes something glmw does not run
    /// (another architecture, an unsupported quant type or shape).
    Unsupported(String),
    /// Model hyperparameters or tensors are inconsistent.
    Model(String),
    /// Tokenizer construction or use failed.
    Tokenizer(String),
    /// The chat template could not be rendered (bad syntax, the template's
    /// own `raise_exception`, too much work).
    Template(String),
    /// A caller passed an invalid argument (bad flag value, bad token id).
    InvalidArgument(String),
    /// The context window is full.
    ContextFull { n_ctx: usize },
    /// A `CancelHandle` stopped a prompt while it was being fed.
    Cancelled,
    /// No usable GPU adapter, a missing feature, or a device error.
    Gpu(String),
}

pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    pub(crate) fn gguf(offset: u64, msg: impl Into<String>) -> Self {
        Error::Gguf {
            offset,
            msg: msg.into(),
        }
    }
    pub(crate) fn io(path: impl Into<String>, source: std::io::Error) -> Self {
        Error::Io {
            path: path.into(),
            source,
        }
    }
}

/// Logits must be finite: a NaN or an infinity means the file's weights
/// (or, past the checks at load, its hyperparameters) are corrupt, and
/// sampling from them would be garbage.
pub(crate) fn check_finite(logits: &[f32]) -> Result<()> {
    match logits.iter().position(|v| !v.is_finite()) {
        None => Ok(()),
        Some(i) => Err(Error::Model(format!(
            "the model computed a non-finite logit ({} for token {i}); its weights or \
             hyperparameters are corrupt (re-download or re-convert the file)",
            logits[i]
        ))),
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Io { path, source } => write!(f, "{path}: {source}"),
            Error::Gguf { offset, msg } => write!(f, "malformed GGUF at byte {offset}: {msg}"),
            Error::Unsupported(m) => write!(f, "unsupported: {m}"),
            Error::Model(m) => write!(f, "invalid model: {m}"),
            Error::Tokenizer(m) => write!(f, "tokenizer: {m}"),
            Error::Template(m) => write!(f, "chat template: {m}"),
            Error::InvalidArgument(m) => write!(f, "invalid argument: {m}"),
            Error::ContextFull { n_ctx } => write!(
                f,
                "the context is full ({n_ctx} tokens): load with a longer context, or reset \
                 the session"
            ),
            Error::Cancelled => write!(f, "cancelled"),
            Error::Gpu(m) => write!(f, "gpu: {m}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Io { source, .. } => Some(source),
            _ => None,
        }
    }
}
