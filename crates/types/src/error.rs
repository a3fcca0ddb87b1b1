//! The error type of `kv-types`.

/// Result alias of this crate.
pub type Result<T> = std::result::Result<T, Error>;

/// Everything that can go wrong when validating or decoding shared types.
///
/// Every variant describes bad input: the caller reports it to whoever sent
/// the bytes and carries on; none of them is a bug in this process.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
pub enum Error {
    /// A node id is not a lowercase DNS label of 1..=63 characters.
    #[error("invalid node id {id:?}: {reason}")]
    InvalidNodeId {
        /// The rejected id (truncated to 80 characters).
        id: String,
        /// Why it was rejected.
        reason: &'static str,
    },
    /// A zone or host label is empty, too long or has unprintable characters.
    #[error(
        "invalid {what} label {label:?}: must be 1..=64 printable ASCII characters without spaces"
    )]
    InvalidLabel {
        /// `zone` or `host`.
        what: &'static str,
        /// The rejected label (truncated to 80 characters).
        label: String,
    },
    /// A key is empty or longer than [`crate::limits::MAX_KEY_BYTES`].
    #[error("invalid key: {reason}")]
    InvalidKey {
        /// Why it was rejected.
        reason: String,
    },
    /// A value is longer than [`crate::limits::MAX_VALUE_BYTES`].
    #[error("value of {len} bytes exceeds the limit of {max} bytes")]
    ValueTooLarge {
        /// Length of the rejected value in bytes.
        len: usize,
        /// The limit in bytes.
        max: usize,
    },
    /// Encoding a value failed (a bug or a value over the codec's size bound).
    #[error("encode failed: {0}")]
    Encode(String),
    /// Bytes could not be decoded: truncated, oversized, trailing garbage or
    /// not the expected type.
    #[error("decode failed: {0}")]
    Decode(String),
    /// A decoded causal clock breaks an invariant (unsorted actors, more
    /// values than its counter, a zero counter).
    #[error("malformed causal clock: {0}")]
    MalformedClock(&'static str),
    /// A causal context string given by a client is not one this store made.
    #[error("invalid causal context: {0}")]
    InvalidContext(String),
}
