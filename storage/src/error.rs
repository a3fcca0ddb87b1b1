//! The error type of `kv-storage`.
//!
//! Variants are shaped by what the caller must do: [`Error::Corrupt`] asks
//! for repair from another replica, [`Error::Rejected`] is the caller's own
//! refusal passed back, [`Error::Io`] means "this node's disk is unwell, the
//! write may or may not have happened, try elsewhere or later", and
//! [`Error::Unavailable`] "this node's storage applied nothing", and
//! [`Error::DiskFull`] "nothing was written: free space is below the
//! reserve, try later or elsewhere".

use crate::record::RecordError;

/// Result alias of this crate.
pub type Result<T> = std::result::Result<T, Error>;

/// Everything a storage engine can fail with.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The stored bytes of `key` failed their checks (length, format byte,
    /// crc32, decoding or clock invariants). The record is never served;
    /// `merge`/`update` quarantine it and overwrite it, `get` and `scan`
    /// report it so the caller can repair the key from another replica.
    #[error("corrupt record for key \"{}\": {reason}", .key.escape_ascii())]
    Corrupt {
        /// The user key (for metadata: the metadata name as bytes).
        key: Vec<u8>,
        /// Which check failed.
        #[source]
        reason: RecordError,
    },
    /// The closure given to [`crate::Storage::update`] refused the write
    /// (for example "too many siblings"); nothing was written. The string
    /// is the caller's own reason, passed back unchanged.
    #[error("write rejected: {0}")]
    Rejected(String),
    /// The disk or sled failed (or the engine is closed, or is waiting to
    /// reopen after an earlier failure). The outcome of the write that got
    /// this error is unknown: it may have been applied but not made durable.
    /// Retrying later may succeed once the engine has reopened its files.
    #[error("storage I/O failed: {0}")]
    Io(String),
    /// The engine applied nothing: it is failed and waiting to reopen its
    /// files after an earlier I/O error, or it is closed. Unlike
    /// [`Error::Io`], the outcome is known: nothing was written. Retrying
    /// later may succeed once the engine has reopened.
    #[error("storage unavailable: {0}")]
    Unavailable(String),
    /// The write was refused before anything was applied: the filesystem
    /// holding the database has less free space than the reserve
    /// (`SledSettings::min_free_bytes`). Reads go on; writes are accepted
    /// again once a later measurement (at most 250 ms old) sees the space
    /// back.
    #[error(
        "disk full: {free_bytes} bytes free, below the reserve of {reserve_bytes} bytes; nothing was written"
    )]
    DiskFull {
        /// Free bytes at the last measurement.
        free_bytes: u64,
        /// The reserve, in bytes.
        reserve_bytes: u64,
    },
    /// sled reported corruption while opening the database in `path` (its
    /// configuration, snapshot or log failed sled's own checks): nothing
    /// in it can be trusted or served. The node refuses to start on it
    /// unless told to rebuild.
    #[error("the database in {} is damaged: {detail}", .path.display())]
    Damaged {
        /// The database directory.
        path: std::path::PathBuf,
        /// What sled reported.
        detail: String,
    },
    /// An object could not be encoded (a bug, or an object larger than the
    /// codec's bound of [`kv_types::codec::MAX_DECODE_BYTES`]).
    #[error("encoding a record failed: {0}")]
    Encode(#[source] kv_types::Error),
}

impl Error {
    /// Whether retrying the same call later (or on the same node after a
    /// pause) can succeed: true for [`Error::Io`], [`Error::Unavailable`]
    /// and [`Error::DiskFull`].
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            Error::Io(_) | Error::Unavailable(_) | Error::DiskFull { .. }
        )
    }

    /// Builds [`Error::Io`] from a sled error, naming the operation that
    /// failed.
    pub(crate) fn sled(op: &str, err: &sled::Error) -> Self {
        Error::Io(format!("{op}: {err}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn corrupt_keys_are_printed_escaped() {
        let e = Error::Corrupt {
            key: b"a\xffb".to_vec(),
            reason: RecordError::TooShort { len: 2 },
        };
        let text = e.to_string();
        assert!(text.contains("a\\xffb"), "{text}");
        assert!(!e.is_retryable());
        assert!(Error::Io("x".into()).is_retryable());
        assert!(Error::Unavailable("x".into()).is_retryable());
    }
}
