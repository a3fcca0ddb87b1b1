//! The error type of `kv-wire`.

/// Result alias of this crate.
pub type Result<T> = std::result::Result<T, Error>;

/// A frame or message that cannot be accepted. All variants describe bad
/// input from the other side; the receiver answers with a clear error and
/// carries on.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
pub enum Error {
    /// The frame was made by a protocol version this build does not speak.
    #[error("unsupported protocol version {got} (this build speaks {supported})")]
    Version {
        /// Version byte received.
        got: u8,
        /// The version this build speaks.
        supported: u8,
    },
    /// Unknown frame kind byte.
    #[error("unknown frame kind {0}")]
    Kind(u8),
    /// The frame announces or holds more bytes than allowed.
    #[error("frame of {len} bytes exceeds the bound of {max} bytes")]
    TooLarge {
        /// Announced or actual length in bytes.
        len: usize,
        /// The bound in bytes.
        max: usize,
    },
    /// The frame is shorter than its header or its announced length.
    #[error("truncated frame: {0}")]
    Truncated(String),
    /// The frame kind is not the one expected here.
    #[error("expected a {expected:?} frame, got {got:?}")]
    UnexpectedKind {
        /// What the receiver expected.
        expected: crate::FrameKind,
        /// What arrived.
        got: crate::FrameKind,
    },
    /// The payload does not decode or breaks an invariant (key bounds,
    /// causal clock shape).
    #[error("invalid message: {0}")]
    Invalid(#[from] kv_types::Error),
}
