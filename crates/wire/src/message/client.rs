//! What clients ask nodes, and the answers.

use serde::{Deserialize, Serialize};

use kv_types::Object;
use kv_types::limits::{MAX_CONTEXT_BYTES, check_key, check_value};

use crate::{
    CertsReport, Error, ExplainReport, PlanReport, RepairReport, Result, RingReport, RingReportV2,
    StatusReport,
};

/// One request: an id chosen by the sender and what it asks.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Request {
    /// Sender-chosen id, echoed in logs on both sides.
    pub id: u64,
    /// The operation.
    pub body: RequestBody,
}

/// What a client (kvctl, the client library, a health check) asks a node.
/// Every certificate role may send these; admin operations check the role
/// themselves. Node-to-node calls are [`crate::PeerCall`]s, on frames of
/// their own.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum RequestBody {
    /// Quorum read; `r` overrides the cluster's default R for this request.
    Get {
        /// The key.
        key: Vec<u8>,
        /// Replicas that must answer (1..=N), or the default.
        r: Option<u8>,
        /// This read is itself a client's hedge: the coordinator must not
        /// hedge it again.
        hedged: bool,
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
        /// For a read or a write.
        op: Op,
    },
    /// The decisions the receiving node logged (a sample), newest last.
    Decisions {
        /// Only those of this key; all when `None`.
        key: Option<Vec<u8>>,
        /// At most this many (1..=1000).
        last: u32,
    },
    /// Admin: switch the receiving node's routing mode (`plain`, `snitch`,
    /// `hwlb`, `c3`, `p2c`, `scoring`) and reset what its router learned.
    RouterMode {
        /// The mode's name.
        mode: String,
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
    /// The receiving node's ring, members and their reports, for a client
    /// that routes each request to a replica of its key (any role).
    Ring,
    /// Every node's certificate as the receiving node knows it: its own as
    /// loaded last, the others' as they gossip them (any role). A node of
    /// a build without it refuses it as an invalid request.
    Certs,
    /// [`RequestBody::Ring`] with each member's process generation (any
    /// role): a routing client tells a restarted node from one it only
    /// lost sight of by it. A node of a build without it refuses it as an
    /// invalid request; the client then asks `Ring`.
    RingV2,
}

/// A node's answer to a [`Request`]: the answer, and the ring the answering
/// node routes with, so that a client whose ring differs refreshes it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ClientReply {
    /// Version of the answering node's ring (its placement id; see
    /// `kv_router::Ring::version`).
    pub ring_version: u64,
    /// The answer.
    pub response: Response,
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
    /// Answer to `LocalGet`: the object the node stores (no quorum).
    Object(Option<Object>),
    /// Answer to `Remove`: done.
    Ack,
    /// Answer to `Status`.
    Status(StatusReport),
    /// Answer to `Explain`.
    Explain(ExplainReport),
    /// Answer to `Repair` and `RepairStatus`.
    Repair(RepairReport),
    /// Answer to `Drain` and `PlanJoin`.
    Plan(PlanReport),
    /// Answer to `Decisions`: each a logged decision as JSON (its router
    /// settings, inputs, draw and outcome: it replays through
    /// `kv_router::decide`).
    Decisions(Vec<String>),
    /// The request failed.
    Error(WireError),
    /// Answer to `Ring`.
    Ring(RingReport),
    /// Answer to `Certs`.
    Certs(CertsReport),
    /// Answer to `RingV2`.
    RingV2(RingReportV2),
}

/// What an explained request is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Op {
    /// A read.
    Get,
    /// A write.
    Put,
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
    /// A bug, or an I/O failure on the node whose outcome is unknown.
    Internal,
    /// A node's storage failed before applying anything (the engine is
    /// failed and reopening, the disk is full, a record cannot be
    /// encoded): nothing was stored.
    Storage,
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
            RequestBody::Get { key, r, .. } => {
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
            RequestBody::LocalGet { key } | RequestBody::Explain { key, .. } => Ok(check_key(key)?),
            RequestBody::Decisions { key, last } => {
                if let Some(k) = key {
                    check_key(k)?;
                }
                if !(1..=1000).contains(last) {
                    return Err(Error::Invalid(kv_types::Error::Decode(
                        "decisions: last must be in 1..=1000".into(),
                    )));
                }
                Ok(())
            }
            RequestBody::RouterMode { mode } => {
                if mode.is_empty() || mode.len() > 16 {
                    return Err(Error::Invalid(kv_types::Error::Decode(
                        "router mode: a name of 1..=16 characters".into(),
                    )));
                }
                Ok(())
            }
            RequestBody::Status
            | RequestBody::Ring
            | RequestBody::RingV2
            | RequestBody::Certs
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
            Response::Ring(ring) => ring.validate()?,
            Response::RingV2(ring) => ring.validate()?,
            _ => {}
        }
        Ok(())
    }
}
