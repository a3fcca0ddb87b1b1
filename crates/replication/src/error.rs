//! The error of the replication core, shaped by what a caller decides.
//!
//! Every failed request ends in one of a few classes, and the class is what
//! the front doors turn into an answer (and kvctl into an exit code):
//!
//! | variant | means | the client should |
//! |---|---|---|
//! | [`Error::Unavailable`] | too few replicas took part: nothing was stored | retry when nodes are back |
//! | [`Error::Indeterminate`] | a write may be stored on fewer than W replicas | read before retrying |
//! | [`Error::Refused`] | the request itself is refused (sibling cap, bad input) | change the request |
//! | [`Error::Overloaded`] | a bounded queue is full: nothing was done | retry later |
//! | [`Error::Storage`] | a node's storage failed before applying anything | look at that node's disk |
//! | [`Error::Corrupt`] | a stored record failed its checksum | retry; repair fixes it |
//! | [`Error::Internal`] | a bug | read the node's log |
//!
//! Quorum figures are fields, not strings; `detail` says the rest for
//! humans (which nodes, what each answered).

use kv_types::NodeId;

/// Result alias of this crate.
pub type Result<T> = std::result::Result<T, Error>;

/// Why a request (or one replica's part of it) failed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// Fewer than `needed` replicas could take part (`got` did): nothing
    /// was stored.
    #[error("{detail}")]
    Unavailable {
        /// Replicas the request needed (R, W, or W plus pending owners).
        needed: usize,
        /// Replicas that were alive or answered.
        got: usize,
        /// Which nodes, and what each answered.
        detail: String,
    },
    /// A write may be stored, on fewer than `needed` nodes as far as this
    /// node knows (a timeout, a lost answer, a storage failure after the
    /// write was applied). Reading the key tells.
    #[error("{detail}")]
    Indeterminate {
        /// Durable copies the write needed.
        needed: usize,
        /// Nodes known to hold it durably.
        stored: usize,
        /// What happened.
        detail: String,
    },
    /// The request is refused as it stands; nothing was done.
    #[error("{0}")]
    Refused(Refusal),
    /// A bounded queue is full; nothing was done.
    #[error("overloaded: {0}; retry later")]
    Overloaded(String),
    /// The storage of `node` failed before applying anything (its engine is
    /// failed and reopening, its disk is full, a record cannot be
    /// encoded): nothing was stored there.
    #[error("storage failure on {node}: {message}; nothing was stored")]
    Storage {
        /// The node whose storage failed.
        node: NodeId,
        /// What failed.
        message: String,
    },
    /// A record `node` stores failed its checks: it is not served (repair
    /// rewrites it from another replica).
    #[error("corrupt record on {node}: {message}")]
    Corrupt {
        /// The node holding the record.
        node: NodeId,
        /// Which check failed.
        message: String,
    },
    /// A bug (an answer that cannot be encoded, a task that panicked).
    #[error("internal error: {0}")]
    Internal(String),
    /// The data directory cannot be used as this node's (only at open):
    /// another node's or cluster's, or it holds data without a readable
    /// incarnation or identity record. The message names what was found.
    #[error("{message}")]
    DataDir {
        /// What was found, naming both node ids and cluster ids for a
        /// foreign directory.
        message: String,
        /// Whether a rebuild (a new incarnation, refilled from the
        /// replicas) may take the directory; never for a foreign one.
        rebuildable: bool,
    },
}

/// How the message of a node refusing writes for a full disk starts
/// (`disk full on NODE: ...`).
const DISK_FULL: &str = "disk full on ";

/// The message of [`Error::Storage`] for a node whose free space is below
/// its reserve.
fn disk_full_message(node: &NodeId, free_bytes: u64, reserve_bytes: u64) -> String {
    format!(
        "{DISK_FULL}{node}: {} MiB free, below the reserve of {} MiB ([storage] min_free_bytes); writes are refused until space is freed, reads go on",
        free_bytes >> 20,
        reserve_bytes >> 20
    )
}

/// Why a request is refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// The write would leave more siblings than the key may hold
    /// (`[replication] max_siblings`): resolve them first. The text names
    /// both numbers.
    #[error("{0}")]
    TooManySiblings(String),
    /// The request is malformed or impossible here (a quorum out of range,
    /// an unreadable causal context, an admin operation on the wrong node).
    #[error("{0}")]
    Invalid(String),
}

impl Refusal {
    /// The refusal of a write that would leave `count` siblings where the
    /// cap is `max`.
    pub fn too_many_siblings(count: usize, max: usize) -> Self {
        Refusal::TooManySiblings(format!(
            "the write would leave {count} siblings, over the cap of {max}: read the key and write with its context to resolve them"
        ))
    }
}

impl Error {
    /// Shorthand for an [`Error::Refused`] of [`Refusal::Invalid`].
    pub fn invalid(message: impl Into<String>) -> Self {
        Error::Refused(Refusal::Invalid(message.into()))
    }

    /// The error of a storage failure on `node`: a refused write is a
    /// refusal, a corrupt record is [`Error::Corrupt`], an engine that
    /// applied nothing is [`Error::Storage`], and an I/O failure whose
    /// outcome is unknown is [`Error::Indeterminate`].
    pub fn from_storage(node: &NodeId, e: kv_storage::Error) -> Self {
        match e {
            kv_storage::Error::Corrupt { .. } => Error::Corrupt {
                node: node.clone(),
                message: e.to_string(),
            },
            kv_storage::Error::Rejected(message) => Error::invalid(message),
            kv_storage::Error::Unavailable(message) => Error::Storage {
                node: node.clone(),
                message,
            },
            kv_storage::Error::DiskFull {
                free_bytes,
                reserve_bytes,
            } => Error::Storage {
                node: node.clone(),
                message: disk_full_message(node, free_bytes, reserve_bytes),
            },
            kv_storage::Error::Encode(_) | kv_storage::Error::Damaged { .. } => Error::Storage {
                node: node.clone(),
                message: e.to_string(),
            },
            kv_storage::Error::Io(message) => Error::Indeterminate {
                needed: 1,
                stored: 0,
                detail: format!(
                    "storage I/O failed on {node}: {message}; the write may be applied there"
                ),
            },
        }
    }

    /// Whether this is a node refusing writes because its disk is full
    /// (an [`Error::Storage`] made from [`kv_storage::Error::DiskFull`],
    /// here or on a peer: the text survives the wire).
    pub fn is_disk_full(&self) -> bool {
        matches!(self, Error::Storage { message, .. } if message.contains(DISK_FULL))
    }

    /// Whether the failed operation may still have been applied somewhere
    /// (so a write must not be coordinated again elsewhere).
    pub fn may_be_applied(&self) -> bool {
        matches!(self, Error::Indeterminate { .. } | Error::Internal(_))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_full_disk_is_a_storage_failure_naming_the_node() {
        let node = NodeId::new("node2").expect("a valid id");
        let e = Error::from_storage(
            &node,
            kv_storage::Error::DiskFull {
                free_bytes: 3 << 20,
                reserve_bytes: 16 << 20,
            },
        );
        assert!(e.is_disk_full());
        assert!(!e.may_be_applied());
        let text = e.to_string();
        assert!(
            text.starts_with("storage failure on node2: disk full on node2: 3 MiB free, below the reserve of 16 MiB"),
            "{text}"
        );
        let other = Error::from_storage(&node, kv_storage::Error::Unavailable("reopening".into()));
        assert!(!other.is_disk_full());
    }
}
