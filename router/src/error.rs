//! The error type of `kv-router`.

use kv_types::NodeId;

/// Result alias of this crate.
pub type Result<T> = std::result::Result<T, Error>;

/// Everything that can go wrong when building, comparing or loading a ring,
/// or configuring the scorer.
///
/// All variants describe bad input (a configuration, a member set, bytes
/// read back from disk); none is a bug in this process, and none is worth
/// retrying with the same input.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
pub enum Error {
    /// A ring or scorer setting is out of range; fix the configuration.
    #[error("invalid configuration: {0}")]
    InvalidConfig(String),
    /// No member may own partitions (none is `Joining`/`Up` with a weight
    /// above zero): the cluster has nowhere to put data.
    #[error("no member can own partitions (needs status JOINING or UP and weight > 0)")]
    NoEligibleMember,
    /// The same node id appears twice in the member set.
    #[error("member {0} appears more than once")]
    DuplicateMember(NodeId),
    /// A member record is unusable (for example a weight above
    /// [`crate::MAX_WEIGHT`]).
    #[error("invalid member {id}: {reason}")]
    InvalidMember {
        /// The offending member.
        id: NodeId,
        /// Why it was rejected.
        reason: String,
    },
    /// More members may own partitions than the claim algorithm is sized
    /// for ([`crate::ring::MAX_OWNERS`]; its cost grows with the square of
    /// the owner count).
    #[error("{count} members may own partitions; at most {max} are supported")]
    TooManyOwners {
        /// Members with status JOINING or UP and weight > 0.
        count: usize,
        /// The limit.
        max: usize,
    },
    /// Two rings with different partition counts cannot be compared: Q is
    /// fixed at cluster creation (design.md, Ring).
    #[error("partition counts differ: {old} vs {new}")]
    PartitionCountMismatch {
        /// Q of the first ring.
        old: u32,
        /// Q of the second ring.
        new: u32,
    },
    /// Persisted ring bytes are truncated, have a bad magic number, fail
    /// their checksum or do not decode: rebuild the ring from gossip.
    #[error("corrupt ring bytes: {0}")]
    Corrupt(String),
    /// Persisted ring bytes use a format newer than this build understands
    /// (written by a newer release): upgrade, or rebuild from gossip.
    #[error("ring format {found} is newer than the newest supported format {newest}")]
    UnsupportedFormat {
        /// Format number found in the bytes.
        found: u16,
        /// Newest format this build reads.
        newest: u16,
    },
    /// Persisted ring bytes decode, but the ring rebuilt from their member
    /// set has another version than the one stored: the claim algorithm
    /// changed since they were written. The member set is still good input.
    #[error("stored ring version {stored:#018x} differs from the rebuilt {rebuilt:#018x}")]
    VersionMismatch {
        /// Version stored in the bytes.
        stored: u64,
        /// Version of the ring rebuilt from the stored members.
        rebuilt: u64,
    },
}
