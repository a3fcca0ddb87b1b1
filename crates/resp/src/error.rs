//! The error type of `kv-resp`.

/// Result alias of this crate.
pub type Result<T> = std::result::Result<T, Error>;

/// Why a request could not be taken: each variant says whether the
/// connection can go on.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// The frame was consumed: answer the error and read the next one.
    #[error("{0}")]
    Recoverable(String),
    /// The stream cannot be resynchronised: answer the error and close.
    #[error("{0}")]
    Fatal(String),
    /// The request parsed but is not a valid command (unknown name, wrong
    /// arity, a key out of bounds); the connection goes on.
    #[error("{0}")]
    Command(String),
}

impl Error {
    /// The reason, for the `-ERR ...` reply.
    pub fn message(&self) -> &str {
        match self {
            Error::Recoverable(m) | Error::Fatal(m) | Error::Command(m) => m,
        }
    }

    /// A short label for the protocol-error counter.
    pub fn reason(&self) -> &'static str {
        match self {
            Error::Recoverable(_) => "bad_frame",
            Error::Fatal(_) => "fatal_frame",
            Error::Command(_) => "bad_command",
        }
    }
}
