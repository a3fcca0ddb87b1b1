//! Messages: what clients ask nodes, what coordinators ask replicas, and
//! the answers.
//!
//! One request per QUIC stream, one response back; a request id travels with
//! each request for tracing and for telling retries apart. Adding or
//! changing a field is an incompatible change of the codec's encoding: bump
//! [`crate::PROTOCOL_VERSION`].

use serde::{Deserialize, Serialize};

use kv_types::limits::{MAX_CONTEXT_BYTES, check_key, check_value};
use kv_types::{Object, VersionVector};

use crate::{Error, Result};

/// One request: an id chosen by the sender and what it asks.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Request {
    /// Sender-chosen id, echoed in logs on both sides.
    pub id: u64,
    /// The operation.
    pub body: RequestBody,
}

/// Operations. Client operations are allowed to every certificate role;
/// [`RequestBody::Peer`] only to nodes.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum RequestBody {
    /// Quorum read; `r` overrides the cluster's default R for this request.
    Get {
        /// The key.
        key: Vec<u8>,
        /// Replicas that must answer (1..=N), or the default.
        r: Option<u8>,
    },
    /// Quorum write of a value. `context` is the opaque causal context of a
    /// previous read (empty for a blind write, which never discards another
    /// write: it becomes a sibling).
    Put {
        /// The key.
        key: Vec<u8>,
        /// The value.
        value: Vec<u8>,
        /// Causal context from a read, or empty.
        context: Vec<u8>,
        /// Durable acks required (1..=N), or the default.
        w: Option<u8>,
    },
    /// Quorum delete: writes a tombstone that supersedes what `context` saw.
    Delete {
        /// The key.
        key: Vec<u8>,
        /// Causal context from a read, or empty.
        context: Vec<u8>,
        /// Durable acks required (1..=N), or the default.
        w: Option<u8>,
    },
    /// The versions the receiving node itself stores for a key (no quorum).
    LocalGet {
        /// The key.
        key: Vec<u8>,
    },
    /// Membership and ring as the receiving node sees them.
    Status,
    /// How the receiving node would route a key, and why.
    Explain {
        /// The key.
        key: Vec<u8>,
    },
    /// Admin: start a full anti-entropy pass on the receiving node now
    /// (needs an admin certificate).
    Repair,
    /// Progress of the receiving node's anti-entropy pass.
    RepairStatus,
    /// Admin: drain (decommission) the receiving node: it takes no new
    /// ownership, its data and hints move to the new owners, then it is
    /// LEFT. With `dry_run`, only the plan is computed.
    Drain {
        /// Only compute and return the plan.
        dry_run: bool,
    },
    /// Admin: remove a node that is down for good from the ring (it is
    /// treated as LEFT everywhere; its ranges get new owners, which pull
    /// them from the other replicas). Refused for a node that is alive.
    Remove {
        /// Id of the node to remove.
        node: String,
    },
    /// What a node joining with this zone and weight would move.
    PlanJoin {
        /// Zone of the hypothetical node.
        zone: String,
        /// Weight of the hypothetical node (1..=1000).
        weight: u32,
    },
    /// Node-to-node operations.
    Peer(PeerRequest),
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
        /// When the hint was first made, ms since the Unix epoch: a hint
        /// passed on by a draining node keeps its age, which bounds how
        /// long hints live (tombstone purge and clock compaction rely on
        /// that bound). The receiver never takes a time after its own now.
        created_at_ms: u64,
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

/// The answer to a [`Request`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Response {
    /// Answer to `Get`.
    Get(GetReply),
    /// Answer to `Put` and `Delete`: the causal context of the new version.
    Written {
        /// Opaque causal context covering the write.
        context: Vec<u8>,
    },
    /// Answer to `LocalGet`, `ReplicaGet` and `Coordinate`: a stored object.
    Object(Option<Object>),
    /// Answer to `Replicate` and `StoreHint`: merged and durable.
    Ack,
    /// Answer to `SegmentDigests`.
    Digests(Vec<u64>),
    /// Answer to `KeyDigests`: keys with their digests, in hash order.
    KeyDigests(Vec<(Vec<u8>, u64)>),
    /// Answer to `Status`.
    Status(StatusReport),
    /// Answer to `Explain`.
    Explain(ExplainReport),
    /// Answer to `Repair` and `RepairStatus`.
    Repair(RepairReport),
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
    /// Answer to `Drain` and `PlanJoin`.
    Plan(PlanReport),
    /// Answer to `ReplaceIf`: whether the record was replaced.
    Replaced(bool),
    /// The request failed.
    Error(WireError),
}

/// The result of a quorum read.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GetReply {
    /// Every live sibling (no tombstones); empty when deleted or absent.
    pub values: Vec<Vec<u8>>,
    /// True when every remaining version is a tombstone or none exists:
    /// "not found".
    pub deleted: bool,
    /// Opaque causal context covering everything read.
    pub context: Vec<u8>,
}

/// A failed request: what kind of failure (which decides the client's exit
/// code), a message for humans, and the node that reports it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WireError {
    /// Failure class.
    pub kind: ErrorKind,
    /// What happened and what to try, for humans.
    pub message: String,
    /// Id of the node that reports the failure.
    pub node: String,
}

/// Failure classes. `Unavailable` guarantees nothing was stored;
/// `Indeterminate` means the write may be stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ErrorKind {
    /// Quorum not reached and nothing was stored (or, for a read, fewer than
    /// R replicas answered).
    Unavailable,
    /// The outcome is unknown (timeout, lost connection): the write may be
    /// stored.
    Indeterminate,
    /// A bounded queue is full; retry later.
    Overloaded,
    /// The request is malformed or out of bounds.
    Invalid,
    /// The caller's certificate role does not allow this request.
    Refused,
    /// A stored record failed its checksum.
    Corrupt,
    /// The write would exceed the key's sibling cap.
    TooManySiblings,
    /// A bug or an I/O failure on the node.
    Internal,
}

/// Membership and ring as one node sees them.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StatusReport {
    /// Id of the answering node.
    pub node: String,
    /// Identifier of the ring the answering node routes with.
    pub ring_version: u64,
    /// Partitions of the ring (Q).
    pub partitions: u32,
    /// Replicas per key (N).
    pub replicas: u8,
    /// Every known node.
    pub nodes: Vec<NodeReport>,
}

/// One node as seen by the answering node.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NodeReport {
    /// Node id.
    pub id: String,
    /// Advertised client address (HOST:PORT).
    pub addr: String,
    /// Zone label.
    pub zone: String,
    /// Host label.
    pub host: String,
    /// JOINING, UP, DRAINING or LEFT.
    pub status: String,
    /// Liveness from the phi-accrual failure detector.
    pub alive: bool,
    /// Share of partitions owned as first replica (0.0..=1.0).
    pub ring_share: f64,
    /// Streaming progress while the node pulls partitions it will own,
    /// `done/total` partitions; empty when it has nothing to pull.
    pub transfer: String,
    /// Its RESP (Redis protocol) address, HOST:PORT; empty when it has
    /// none or gossip has not carried it yet.
    pub resp: String,
    /// Its HTTP admin endpoint address, HOST:PORT; empty when none.
    pub admin: String,
}

/// What a membership change moves, before (or as) it happens.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PlanReport {
    /// What the plan is for, e.g. `drain node3` or `join zone-b weight 1`.
    pub change: String,
    /// Whether it was only computed (dry run, plan) or started.
    pub started: bool,
    /// Partitions whose replicas change.
    pub partitions: u64,
    /// Per destination node: what it receives.
    pub moves: Vec<PlannedMove>,
}

/// What one node receives in a [`PlanReport`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PlannedMove {
    /// Receiving node.
    pub to: String,
    /// Nodes it receives from (the partitions' current holders).
    pub from: Vec<String>,
    /// Partitions it gains.
    pub partitions: u64,
    /// Keys in them (as the current holders count them).
    pub keys: u64,
    /// Bytes in them (encoded records).
    pub bytes: u64,
}

/// Progress of a node's anti-entropy pass.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RepairReport {
    /// Id of the node running it.
    pub node: String,
    /// Whether a full pass is running.
    pub running: bool,
    /// Partitions of the pass compared with every live peer replica.
    pub partitions_done: u64,
    /// Partitions this node replicates (the pass's length).
    pub partitions_total: u64,
    /// Keys repaired since the node started.
    pub keys_repaired: u64,
    /// Segments found different since the node started.
    pub segments_differing: u64,
    /// Steps of the current or last full pass that could not complete (a
    /// peer or the local store did not answer): what they cover was not
    /// compared, and a pass with failures proves nothing about it.
    pub failures: u64,
}

/// How a key is routed, with the scorer's numbers.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ExplainReport {
    /// Id of the answering node.
    pub node: String,
    /// xxh3 hash of the key.
    pub hash: u64,
    /// Partition of the key.
    pub partition: u32,
    /// Ring identifier used.
    pub ring_version: u64,
    /// The preference list, in ring order, with scores.
    pub replicas: Vec<ExplainReplica>,
    /// Node ids in the order a read would try them.
    pub read_order: Vec<String>,
}

/// One replica of a key in an [`ExplainReport`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ExplainReplica {
    /// Node id.
    pub id: String,
    /// Advertised client address.
    pub addr: String,
    /// Zone label.
    pub zone: String,
    /// Lifecycle status.
    pub status: String,
    /// Liveness from the failure detector.
    pub alive: bool,
    /// Final score (0.0..=1.0; higher is better).
    pub score: f64,
    /// Latency EWMA of reads from this node, ms, if measured.
    pub latency_ms: Option<f64>,
    /// Why the hard filter excluded it, if it did.
    pub excluded: Option<String>,
}

impl Request {
    /// Checks bounds and invariants of a decoded request: key and value
    /// sizes, context size, R/W in 1..=255 when given, clocks well formed.
    ///
    /// # Errors
    /// [`Error::Invalid`] describing the first problem found.
    pub fn validate(&self) -> Result<()> {
        let quorum = |q: Option<u8>| -> Result<()> {
            if q == Some(0) {
                return Err(Error::Invalid(kv_types::Error::Decode(
                    "R and W must be at least 1".into(),
                )));
            }
            Ok(())
        };
        let context = |c: &[u8]| -> Result<()> {
            if c.len() > MAX_CONTEXT_BYTES {
                return Err(Error::Invalid(kv_types::Error::InvalidContext(format!(
                    "{} bytes exceed the limit of {MAX_CONTEXT_BYTES}",
                    c.len()
                ))));
            }
            Ok(())
        };
        match &self.body {
            RequestBody::Get { key, r } => {
                check_key(key)?;
                quorum(*r)
            }
            RequestBody::Put {
                key,
                value,
                context: ctx,
                w,
            } => {
                check_key(key)?;
                check_value(value)?;
                context(ctx)?;
                quorum(*w)
            }
            RequestBody::Delete {
                key,
                context: ctx,
                w,
            } => {
                check_key(key)?;
                context(ctx)?;
                quorum(*w)
            }
            RequestBody::LocalGet { key } | RequestBody::Explain { key } => Ok(check_key(key)?),
            RequestBody::Status
            | RequestBody::Repair
            | RequestBody::RepairStatus
            | RequestBody::Drain { .. } => Ok(()),
            RequestBody::Remove { node } => Ok(kv_types::NodeId::new(node.as_str()).map(|_| ())?),
            RequestBody::PlanJoin { zone, weight } => {
                kv_types::node::check_label("zone", zone)?;
                if !(1..=1000).contains(weight) {
                    return Err(Error::Invalid(kv_types::Error::Decode(
                        "weight must be in 1..=1000".into(),
                    )));
                }
                Ok(())
            }
            RequestBody::Peer(PeerRequest::Scan {
                from_hash,
                to_hash,
                after,
                limit,
            }) => {
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
            RequestBody::Peer(PeerRequest::PartitionStats { partitions, q }) => {
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
            RequestBody::Peer(PeerRequest::TransferStatus) => Ok(()),
            RequestBody::Peer(PeerRequest::ReplaceIf {
                key,
                expected,
                replacement,
            }) => {
                check_key(key)?;
                expected.validate()?;
                if let Some(r) = replacement {
                    r.validate()?;
                }
                Ok(())
            }
            RequestBody::Peer(PeerRequest::ReplicaGet { key }) => Ok(check_key(key)?),
            RequestBody::Peer(PeerRequest::Coordinate {
                key, data, context, ..
            }) => {
                check_key(key)?;
                if let Some(d) = data {
                    check_value(d)?;
                }
                Ok(context.validate()?)
            }
            RequestBody::Peer(PeerRequest::Replicate { key, object }) => {
                check_key(key)?;
                Ok(object.validate()?)
            }
            RequestBody::Peer(PeerRequest::StoreHint {
                owner, key, object, ..
            }) => {
                kv_types::NodeId::new(owner.as_str())?;
                check_key(key)?;
                Ok(object.validate()?)
            }
            RequestBody::Peer(PeerRequest::SegmentDigests { first, count }) => {
                if u64::from(*first) + u64::from(*count) > 65536 {
                    return Err(Error::Invalid(kv_types::Error::Decode(
                        "segment range beyond 65536".into(),
                    )));
                }
                Ok(())
            }
            RequestBody::Peer(PeerRequest::KeyDigests { from_hash, to_hash }) => {
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

impl Response {
    /// Checks invariants of a decoded response (clocks well formed).
    ///
    /// # Errors
    /// [`Error::Invalid`] if an object breaks the clock invariants.
    pub fn validate(&self) -> Result<()> {
        match self {
            Response::Object(Some(object)) => object.validate()?,
            Response::Objects { objects, .. } => {
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

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use kv_types::{Actor, NodeId, Sibling};

    use super::*;
    use crate::frame::{self, FrameKind};

    fn object(values: Vec<Option<Vec<u8>>>) -> Object {
        let actor = Actor {
            node: NodeId::new("node1").unwrap(),
            incarnation: 42,
        };
        values.into_iter().fold(Object::new(), |o, data| {
            o.update(
                &VersionVector::new(),
                &actor,
                Sibling {
                    data,
                    written_at_ms: 5,
                },
            )
        })
    }

    fn key() -> impl Strategy<Value = Vec<u8>> {
        prop::collection::vec(any::<u8>(), 1..64)
    }

    fn body() -> impl Strategy<Value = RequestBody> {
        let bytes = || prop::collection::vec(any::<u8>(), 0..64);
        prop_oneof![
            (key(), any::<Option<u8>>()).prop_map(|(key, r)| RequestBody::Get { key, r }),
            (key(), bytes(), bytes(), any::<Option<u8>>()).prop_map(|(key, value, context, w)| {
                RequestBody::Put {
                    key,
                    value,
                    context,
                    w,
                }
            }),
            (key(), bytes(), any::<Option<u8>>())
                .prop_map(|(key, context, w)| RequestBody::Delete { key, context, w }),
            key().prop_map(|key| RequestBody::LocalGet { key }),
            Just(RequestBody::Status),
            Just(RequestBody::Repair),
            Just(RequestBody::RepairStatus),
            any::<bool>().prop_map(|dry_run| RequestBody::Drain { dry_run }),
            Just(RequestBody::Remove {
                node: "node4".into()
            }),
            (1u32..1000).prop_map(|weight| RequestBody::PlanJoin {
                zone: "zone-b".into(),
                weight
            }),
            (key(), 1u32..100).prop_map(|(after, limit)| RequestBody::Peer(PeerRequest::Scan {
                from_hash: 0,
                to_hash: u64::MAX,
                after: Some(after),
                limit
            })),
            Just(RequestBody::Peer(PeerRequest::TransferStatus)),
            (key(), any::<bool>()).prop_map(|(key, delete)| RequestBody::Peer(
                PeerRequest::ReplaceIf {
                    key,
                    expected: object(vec![None]),
                    replacement: (!delete).then(|| object(vec![Some(vec![1])])),
                }
            )),
            prop::collection::vec(0u32..1024, 0..8).prop_map(|partitions| RequestBody::Peer(
                PeerRequest::PartitionStats {
                    partitions,
                    q: 1024
                }
            )),
            key().prop_map(|key| RequestBody::Explain { key }),
            key().prop_map(|key| RequestBody::Peer(PeerRequest::ReplicaGet { key })),
            (key(), prop::option::of(bytes()), any::<u64>()).prop_map(|(key, data, t)| {
                RequestBody::Peer(PeerRequest::Coordinate {
                    key,
                    data,
                    overwrite: t % 2 == 0,
                    context: object(vec![Some(vec![1])]).join(),
                    written_at_ms: t,
                })
            }),
            (
                key(),
                prop::collection::vec(prop::option::of(bytes()), 0..4)
            )
                .prop_map(|(key, vals)| RequestBody::Peer(PeerRequest::Replicate {
                    key,
                    object: object(vals)
                })),
            (key(), any::<u64>()).prop_map(|(key, created_at_ms)| RequestBody::Peer(
                PeerRequest::StoreHint {
                    owner: "node3".into(),
                    key,
                    object: object(vec![Some(vec![2])]),
                    created_at_ms,
                }
            )),
        ]
    }

    fn response() -> impl Strategy<Value = Response> {
        let bytes = || prop::collection::vec(any::<u8>(), 0..64);
        prop_oneof![
            (prop::collection::vec(bytes(), 0..4), any::<bool>(), bytes()).prop_map(
                |(values, deleted, context)| Response::Get(GetReply {
                    values,
                    deleted,
                    context
                })
            ),
            bytes().prop_map(|context| Response::Written { context }),
            prop::collection::vec(prop::option::of(bytes()), 0..4)
                .prop_map(|v| Response::Object(Some(object(v)))),
            Just(Response::Object(None)),
            Just(Response::Ack),
            any::<bool>().prop_map(Response::Replaced),
            (any::<bool>(), any::<u64>()).prop_map(|(running, n)| Response::Repair(RepairReport {
                node: "node1".into(),
                running,
                partitions_done: n % 7,
                partitions_total: 7,
                keys_repaired: n,
                segments_differing: n / 2,
                failures: n % 3,
            })),
            prop::collection::vec(any::<u64>(), 0..64).prop_map(Response::Digests),
            (key(), any::<bool>()).prop_map(|(k, more)| Response::Objects {
                objects: vec![(k, object(vec![Some(vec![7])]))],
                more
            }),
            (any::<u64>(), any::<u64>()).prop_map(|(pending, ring_version)| {
                Response::TransferStatus {
                    pending,
                    ring_version,
                }
            }),
            (any::<u64>(), any::<bool>()).prop_map(|(n, started)| Response::Plan(PlanReport {
                change: "drain node3".into(),
                started,
                partitions: n,
                moves: vec![PlannedMove {
                    to: "node1".into(),
                    from: vec!["node3".into()],
                    partitions: n,
                    keys: n / 2,
                    bytes: n.wrapping_mul(3),
                }],
            })),
            prop::collection::vec((key(), any::<u64>()), 0..8).prop_map(Response::KeyDigests),
            (".{0,20}", "[a-z]{1,8}").prop_map(|(message, node)| Response::Error(WireError {
                kind: ErrorKind::Unavailable,
                message,
                node
            })),
            (any::<u64>(), 0.0f64..1.0).prop_map(|(v, share)| Response::Status(StatusReport {
                node: "node1".into(),
                ring_version: v,
                partitions: 1024,
                replicas: 3,
                nodes: vec![NodeReport {
                    id: "node2".into(),
                    addr: "127.0.0.1:7002".into(),
                    zone: "z1".into(),
                    host: "h1".into(),
                    status: "UP".into(),
                    alive: true,
                    ring_share: share,
                    transfer: String::new(),
                    resp: "127.0.0.1:6380".into(),
                    admin: String::new(),
                }],
            })),
            (any::<u64>(), any::<u32>()).prop_map(|(hash, partition)| Response::Explain(
                ExplainReport {
                    node: "node1".into(),
                    hash,
                    partition,
                    ring_version: 3,
                    replicas: vec![ExplainReplica {
                        id: "node2".into(),
                        addr: "127.0.0.1:7002".into(),
                        zone: "z1".into(),
                        status: "UP".into(),
                        alive: false,
                        score: 0.5,
                        latency_ms: Some(1.5),
                        excluded: Some("dead".into()),
                    }],
                    read_order: vec!["node2".into()],
                }
            )),
        ]
    }

    proptest! {
        #[test]
        fn requests_round_trip(id in any::<u64>(), body in body()) {
            let req = Request { id, body };
            let bytes = frame::encode(FrameKind::Request, &req).unwrap();
            prop_assert_eq!(frame::decode::<Request>(FrameKind::Request, &bytes).unwrap(), req);
        }

        #[test]
        fn responses_round_trip(resp in response()) {
            let bytes = frame::encode(FrameKind::Response, &resp).unwrap();
            let back = frame::decode::<Response>(FrameKind::Response, &bytes).unwrap();
            prop_assert!(back.validate().is_ok());
            prop_assert_eq!(back, resp);
        }

        #[test]
        fn garbage_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..256)) {
            let _ = frame::decode::<Request>(FrameKind::Request, &bytes);
            let _ = frame::decode::<Response>(FrameKind::Response, &bytes);
        }
    }

    #[test]
    fn validation_enforces_bounds() {
        let too_long = vec![b'k'; kv_types::limits::MAX_KEY_BYTES + 1];
        let req = |body| Request { id: 1, body };
        assert!(
            req(RequestBody::Get {
                key: too_long,
                r: None
            })
            .validate()
            .is_err()
        );
        assert!(
            req(RequestBody::Get {
                key: vec![],
                r: None
            })
            .validate()
            .is_err()
        );
        assert!(
            req(RequestBody::Get {
                key: b"k".to_vec(),
                r: Some(0)
            })
            .validate()
            .is_err()
        );
        assert!(
            req(RequestBody::Put {
                key: b"k".to_vec(),
                value: vec![0; kv_types::limits::MAX_VALUE_BYTES + 1],
                context: vec![],
                w: None
            })
            .validate()
            .is_err()
        );
        assert!(
            req(RequestBody::Put {
                key: b"k".to_vec(),
                value: b"v".to_vec(),
                context: vec![],
                w: Some(2)
            })
            .validate()
            .is_ok()
        );
    }
}
