//! The error type of `kv-gossip`.

/// Result alias of this crate.
pub type Result<T> = std::result::Result<T, Error>;

/// Failures of the membership service.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// chitchat could not be started (its transport failed to open).
    #[error("cannot start gossip: {0}")]
    Start(String),
    /// The gossip transport was already opened once.
    #[error("the QUIC gossip transport can be opened only once")]
    AlreadyOpen,
}
