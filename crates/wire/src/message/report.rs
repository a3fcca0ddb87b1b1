//! Reports a node answers for operators: status, explain, repair, plans.

use serde::{Deserialize, Serialize};

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
    /// The answering node's routing mode.
    pub mode: String,
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

/// Every node's certificate as one node knows it (the answer to
/// `RequestBody::Certs`): what `kvctl status` shows beside membership.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CertsReport {
    /// Id of the answering node.
    pub node: String,
    /// One entry per node it knows, itself included.
    pub nodes: Vec<NodeCert>,
}

/// One node's certificate in a [`CertsReport`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeCert {
    /// Node id.
    pub id: String,
    /// When its certificate stops being valid (`notAfter`), seconds since
    /// the Unix epoch; 0 when unknown (gossip has not carried it yet, or
    /// the node's build does not publish it).
    pub not_after: u64,
    /// The SHA-256 fingerprint (64 lowercase hex digits) of the CA that
    /// signed its certificate; empty when unknown.
    pub ca: String,
    /// The SHA-256 fingerprints of the CAs it trusts (its CA bundle, in
    /// file order: two while the cluster CA is rotated); empty when
    /// unknown.
    pub trusted: Vec<String>,
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
    /// Node ids in the order the request would try them.
    pub read_order: Vec<String>,
    /// The routing mode that decided.
    pub mode: String,
    /// `get` or `put`.
    pub op: String,
    /// The whole decision as JSON: the router settings, every candidate's
    /// inputs, dimensions, penalties and score, the draw, the order.
    pub decision: String,
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
