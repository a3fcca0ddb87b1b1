//! What nodes ask each other (replica calls), and the answers.
//!
//! Peer calls travel on frames of their own kinds
//! ([`crate::FrameKind::PeerRequest`], [`crate::FrameKind::PeerResponse`]),
//! so a client never decodes a peer answer and a node never matches a
//! client answer to a replica call. Only `node` certificates may send them.

use serde::{Deserialize, Serialize};

use kv_types::limits::{check_key, check_value};
use kv_types::{Object, VersionVector};

use crate::{Error, Result, WireError};

/// One replica call: an id chosen by the caller, the ring version the
/// caller routes with (a replica that routes with another one knows one of
/// the two views is behind), and what it asks.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PeerCall {
    /// Caller-chosen id, echoed in logs on both sides.
    pub id: u64,
    /// Version of the caller's ring (its placement id).
    pub ring_version: u64,
    /// The operation.
    pub body: PeerRequest,
}

/// What a coordinator asks a replica.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum PeerRequest {
    /// Return the locally stored object of a key.
    ReplicaGet {
        /// The key.
        key: Vec<u8>,
    },
    /// Coordinate a write: apply it to the local object under this node's
    /// own actor (a fresh dot), make it durable, and return the new object
    /// for the coordinator to replicate.
    Coordinate {
        /// The key.
        key: Vec<u8>,
        /// The value, or `None` for a delete.
        data: Option<Vec<u8>>,
        /// What the client had seen.
        context: VersionVector,
        /// Also supersede everything the coordinating replica holds for the
        /// key (an overwrite, for protocols without causal contexts such as
        /// RESP `SET`); concurrent versions on other replicas it has not
        /// seen still become siblings.
        overwrite: bool,
        /// Coordinator wall clock, ms since the Unix epoch (informational).
        written_at_ms: u64,
    },
    /// Merge an object into the local one and make it durable.
    Replicate {
        /// The key.
        key: Vec<u8>,
        /// The coordinator's object.
        object: Object,
    },
    /// Sloppy quorum: hold this object for `owner`, a replica of the key
    /// that is down, durably, until it can be handed off.
    StoreHint {
        /// The intended owner (stable node id).
        owner: String,
        /// The key.
        key: Vec<u8>,
        /// The coordinator's object.
        object: Object,
        /// How long the hint has existed, ms, measured by the nodes that
        /// held it each on its own clock: 0 for a new hint; a hint passed
        /// on by a draining node keeps its age, which bounds how long
        /// hints live (tombstone purge and clock compaction rely on that
        /// bound). The receiver stores its own now minus this age, so no
        /// wall clocks of two nodes are compared. (Protocol 3 sent the
        /// sender's creation time in this place; protocol 4 frames are
        /// refused by 3 and the other way round.)
        age_ms: u64,
    },
    /// Anti-entropy: the digests of `count` consecutive segments of the
    /// key-hash space starting at `first` (segment = hash >> 48).
    SegmentDigests {
        /// First segment.
        first: u32,
        /// Number of segments (at most 65536).
        count: u32,
    },
    /// Anti-entropy: every key with its digest in a hash range.
    KeyDigests {
        /// First hash of the range.
        from_hash: u64,
        /// Last hash of the range, inclusive.
        to_hash: u64,
    },
    /// Streaming: up to `limit` objects of a hash range, in hash order,
    /// starting after `after` (the last key of the previous page).
    Scan {
        /// First hash of the range.
        from_hash: u64,
        /// Last hash of the range, inclusive.
        to_hash: u64,
        /// Resume after this key (exclusive); `None` starts at the range.
        after: Option<Vec<u8>>,
        /// Most objects in the answer (1..=10000).
        limit: u32,
    },
    /// Planning: keys and bytes stored per partition.
    PartitionStats {
        /// The partitions.
        partitions: Vec<u32>,
        /// Q, the number of partitions of the ring.
        q: u32,
    },
    /// Streaming: how many partitions the receiving node still has to pull,
    /// under which target ring.
    TransferStatus,
    /// Tombstone purge or clock compaction: replace the stored object of
    /// `key` with `replacement` (`None` deletes the record) only if it still
    /// equals `expected`; answered by `Replaced`.
    ReplaceIf {
        /// The key.
        key: Vec<u8>,
        /// What the receiver must still hold.
        expected: Object,
        /// What to store instead, or `None` to delete the record.
        replacement: Option<Object>,
    },
}

/// A replica's answer to a [`PeerCall`], with the ring version the
/// answering node routes with and what it piggybacks about its load.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PeerReply {
    /// Version of the answering node's ring.
    pub ring_version: u64,
    /// Its request-queue depth and recent service time (C3's feedback).
    pub feedback: Option<Feedback>,
    /// The answer.
    pub response: PeerResponse,
}

/// What a replica's answer piggybacks.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Feedback {
    /// Replica requests accepted and not yet answered.
    pub queue: u32,
    /// Recent service time (EWMA), microseconds: finite, in
    /// 0..=[`MAX_SERVICE_US`].
    pub service_us: f64,
}

/// Largest service time a [`Feedback`] may report, microseconds (one hour:
/// far above any request deadline, so only a broken or hostile peer
/// reaches it).
pub const MAX_SERVICE_US: f64 = 3_600_000_000.0;

impl Feedback {
    /// Checks that the service time is a finite number of microseconds in
    /// 0..=[`MAX_SERVICE_US`]: a NaN, infinite or negative one would
    /// poison the router's EWMAs (C3 ranks a negative service time first).
    ///
    /// # Errors
    /// [`Error::Invalid`] naming the value.
    pub fn validate(&self) -> Result<()> {
        if !(0.0..=MAX_SERVICE_US).contains(&self.service_us) {
            return Err(Error::Invalid(kv_types::Error::Decode(format!(
                "feedback: service time {} us is not in 0..={MAX_SERVICE_US}",
                self.service_us
            ))));
        }
        Ok(())
    }
}

/// Answers to replica calls.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum PeerResponse {
    /// Answer to `ReplicaGet` and `Coordinate`: a stored object.
    Object(Option<Object>),
    /// Answer to `Replicate` and `StoreHint`: merged and durable.
    Ack,
    /// Answer to `SegmentDigests`.
    Digests(Vec<u64>),
    /// Answer to `KeyDigests`: keys with their digests, in hash order.
    KeyDigests(Vec<(Vec<u8>, u64)>),
    /// Answer to `Scan`: objects in hash order, and whether more follow.
    Objects {
        /// Keys with their objects.
        objects: Vec<(Vec<u8>, Object)>,
        /// Whether the range holds more after the last one.
        more: bool,
    },
    /// Answer to `PartitionStats`: `(partition, keys, bytes)`.
    PartitionStats(Vec<(u32, u64, u64)>),
    /// Answer to `TransferStatus`.
    TransferStatus {
        /// Partitions still to pull.
        pending: u64,
        /// Target ring the count refers to.
        ring_version: u64,
    },
    /// Answer to `ReplaceIf`: whether the record was replaced.
    Replaced(bool),
    /// The call failed.
    Error(WireError),
}

impl PeerCall {
    /// Checks bounds and invariants of a decoded replica call: key and
    /// value sizes, ranges and limits, clocks well formed.
    ///
    /// # Errors
    /// [`Error::Invalid`] describing the first problem found.
    pub fn validate(&self) -> Result<()> {
        match &self.body {
            PeerRequest::Scan {
                from_hash,
                to_hash,
                after,
                limit,
            } => {
                if from_hash > to_hash || !(1..=10_000).contains(limit) {
                    return Err(Error::Invalid(kv_types::Error::Decode(
                        "scan needs a non-empty range and a limit in 1..=10000".into(),
                    )));
                }
                if let Some(k) = after {
                    check_key(k)?;
                }
                Ok(())
            }
            PeerRequest::PartitionStats { partitions, q } => {
                if !q.is_power_of_two()
                    || partitions.len() > 65536
                    || partitions.iter().any(|p| p >= q)
                {
                    return Err(Error::Invalid(kv_types::Error::Decode(
                        "partition stats need partitions below a power-of-two Q".into(),
                    )));
                }
                Ok(())
            }
            PeerRequest::TransferStatus => Ok(()),
            PeerRequest::ReplaceIf {
                key,
                expected,
                replacement,
            } => {
                check_key(key)?;
                expected.validate()?;
                if let Some(r) = replacement {
                    r.validate()?;
                }
                Ok(())
            }
            PeerRequest::ReplicaGet { key } => Ok(check_key(key)?),
            PeerRequest::Coordinate {
                key, data, context, ..
            } => {
                check_key(key)?;
                if let Some(d) = data {
                    check_value(d)?;
                }
                Ok(context.validate()?)
            }
            PeerRequest::Replicate { key, object } => {
                check_key(key)?;
                Ok(object.validate()?)
            }
            PeerRequest::StoreHint {
                owner, key, object, ..
            } => {
                kv_types::NodeId::new(owner.as_str())?;
                check_key(key)?;
                Ok(object.validate()?)
            }
            PeerRequest::SegmentDigests { first, count } => {
                if u64::from(*first) + u64::from(*count) > 65536 {
                    return Err(Error::Invalid(kv_types::Error::Decode(
                        "segment range beyond 65536".into(),
                    )));
                }
                Ok(())
            }
            PeerRequest::KeyDigests { from_hash, to_hash } => {
                if from_hash > to_hash {
                    return Err(Error::Invalid(kv_types::Error::Decode(
                        "empty hash range".into(),
                    )));
                }
                Ok(())
            }
        }
    }
}

impl PeerReply {
    /// Checks a decoded reply: its feedback ([`Feedback::validate`]) and
    /// its answer ([`PeerResponse::validate`]).
    ///
    /// # Errors
    /// [`Error::Invalid`] describing the first problem found.
    pub fn validate(&self) -> Result<()> {
        if let Some(feedback) = &self.feedback {
            feedback.validate()?;
        }
        self.response.validate()
    }
}

impl PeerResponse {
    /// Checks invariants of a decoded answer (keys bounded, clocks well
    /// formed).
    ///
    /// # Errors
    /// [`Error::Invalid`] if a key or an object breaks them.
    pub fn validate(&self) -> Result<()> {
        match self {
            PeerResponse::Object(Some(object)) => object.validate()?,
            PeerResponse::Objects { objects, .. } => {
                for (key, object) in objects {
                    check_key(key)?;
                    object.validate()?;
                }
            }
            _ => {}
        }
        Ok(())
    }
}
