//! The network seam: replica calls to other nodes.
//!
//! [`Network`] has one method per replica operation, in the core's own
//! types. A running node implements it on its QUIC endpoint (translating to
//! and from the wire protocol there and nowhere else); tests and the
//! simulation use [`crate::testkit::MemoryNetwork`], whose links can be
//! cut, delayed and made lossy. Calls to this node's own replica never go
//! through it: [`crate::Peers`] makes them plain function calls.
//!
//! The receiving side of every method is the same-named method of
//! [`crate::PeerService`].

use std::time::Duration;

use kv_types::{NodeId, Object, VersionVector};

use crate::Error;

/// What travels with every replica call besides its arguments.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Envelope {
    /// The id of the client request this call serves (or a fresh one for
    /// background work), for tracing and for telling retries apart.
    pub request_id: u64,
    /// The ring version (placement id) the caller routes with.
    pub ring_version: u64,
    /// How long the caller waits for the answer, connecting included.
    pub timeout: Duration,
}

/// A replica's answer, with the ring version the answering node routes
/// with and what it piggybacks about its load.
#[derive(Clone, Debug, PartialEq)]
pub struct Reply<T> {
    /// The answer.
    pub value: T,
    /// The answering node's ring version.
    pub ring_version: u64,
    /// Its request-queue depth and recent service time (C3's feedback).
    pub feedback: Option<kv_router::Feedback>,
}

/// Why a replica call failed, in the terms a coordinator decides with.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CallError {
    /// The call certainly did not execute (not sent, no connection, refused
    /// before anything was done): another replica may be tried.
    #[error("{node}: {reason}")]
    NotSent {
        /// The node called.
        node: NodeId,
        /// What failed.
        reason: String,
    },
    /// It may have executed (timeout, lost connection after sending).
    #[error("{node}: {reason}")]
    Unknown {
        /// The node called.
        node: NodeId,
        /// What failed.
        reason: String,
    },
    /// The replica answered with an error of its own.
    #[error("{0}")]
    Replica(Error),
}

impl CallError {
    /// Whether the call may have been applied by the replica (then a write
    /// must not be coordinated again elsewhere).
    pub fn may_be_applied(&self) -> bool {
        match self {
            CallError::NotSent { .. } => false,
            CallError::Unknown { .. } => true,
            CallError::Replica(e) => e.may_be_applied(),
        }
    }

    /// The replica's refusal, when it refused the request itself (the
    /// client must see it; another replica would refuse it too).
    pub fn refusal(&self) -> Option<&Error> {
        match self {
            CallError::Replica(e @ Error::Refused(_)) => Some(e),
            _ => None,
        }
    }
}

/// A client write for the replica that coordinates it: apply under this
/// replica's own actor (a fresh dot), durably.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Coordinate {
    /// The key.
    pub key: Vec<u8>,
    /// The value, or `None` for a delete (a tombstone).
    pub data: Option<Vec<u8>>,
    /// What the client had seen (its causal context).
    pub context: VersionVector,
    /// Also supersede everything this replica holds for the key (RESP
    /// `SET`/`DEL`, which carry no context).
    pub overwrite: bool,
    /// The coordinator's wall clock, ms since the Unix epoch
    /// (informational: RESP's `newest` sibling rule reads it).
    pub written_at_ms: u64,
}

/// A copy of a write for a replica that is down, held by a fallback.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HintCopy {
    /// The replica the write is for.
    pub owner: NodeId,
    /// The key.
    pub key: Vec<u8>,
    /// The coordinated object.
    pub object: Object,
    /// How long the hint has existed already, ms, each part measured on the
    /// clock of the node that held it then: 0 for a new hint, the time it
    /// was held for a hint passed on. The receiver stores its own now minus
    /// this, so no two nodes' wall clocks are ever compared (a sender's
    /// skew cannot shorten or extend a hint's life).
    pub age_ms: u64,
}

/// One page of a partition pull.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScanRequest {
    /// First hash of the range.
    pub from_hash: u64,
    /// Last hash of the range, inclusive.
    pub to_hash: u64,
    /// Resume after this key (exclusive); `None` starts at the range.
    pub after: Option<Vec<u8>>,
    /// Most objects in the answer (1..=10000).
    pub limit: u32,
}

/// The answer to a [`ScanRequest`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ScanPage {
    /// Keys with their objects, in hash order.
    pub objects: Vec<(Vec<u8>, Object)>,
    /// Whether the range holds more after the last one.
    pub more: bool,
}

/// What a node still has to pull, under which target ring.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TransferStatus {
    /// Partitions still to pull.
    pub pending: u64,
    /// The target ring the count refers to.
    pub ring_version: u64,
}

/// A conditional replacement (tombstone purge, clock compaction).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReplaceIf {
    /// The key.
    pub key: Vec<u8>,
    /// What the receiver must still hold.
    pub expected: Object,
    /// What to store instead; `None` deletes the record.
    pub replacement: Option<Object>,
}

/// Replica calls to other nodes. Every method sends one call to `to` and
/// waits at most `envelope.timeout` for its answer.
#[async_trait::async_trait]
pub trait Network: Send + Sync + 'static {
    /// The object `to` stores for `key`.
    async fn get(
        &self,
        to: &NodeId,
        envelope: Envelope,
        key: Vec<u8>,
    ) -> Result<Reply<Option<Object>>, CallError>;

    /// Has `to` coordinate a client write; answers the object it stored.
    async fn coordinate(
        &self,
        to: &NodeId,
        envelope: Envelope,
        write: Coordinate,
    ) -> Result<Reply<Object>, CallError>;

    /// Has `to` merge `object` into what it stores for `key`, durably.
    async fn replicate(
        &self,
        to: &NodeId,
        envelope: Envelope,
        key: Vec<u8>,
        object: Object,
    ) -> Result<Reply<()>, CallError>;

    /// Has `to` hold a hint for a replica that is down, durably.
    async fn store_hint(
        &self,
        to: &NodeId,
        envelope: Envelope,
        hint: HintCopy,
    ) -> Result<Reply<()>, CallError>;

    /// `count` anti-entropy segment digests of `to` from `first`.
    async fn segment_digests(
        &self,
        to: &NodeId,
        envelope: Envelope,
        first: u32,
        count: u32,
    ) -> Result<Reply<Vec<u64>>, CallError>;

    /// Every key `to` stores in a hash range, with its item digest.
    async fn key_digests(
        &self,
        to: &NodeId,
        envelope: Envelope,
        from_hash: u64,
        to_hash: u64,
    ) -> Result<Reply<Vec<(Vec<u8>, u64)>>, CallError>;

    /// One page of the objects `to` stores in a hash range.
    async fn scan(
        &self,
        to: &NodeId,
        envelope: Envelope,
        request: ScanRequest,
    ) -> Result<Reply<ScanPage>, CallError>;

    /// Keys and bytes `to` stores per partition (`(partition, keys,
    /// bytes)`), for plans.
    async fn partition_stats(
        &self,
        to: &NodeId,
        envelope: Envelope,
        partitions: Vec<u32>,
        q: u32,
    ) -> Result<Reply<Vec<(u32, u64, u64)>>, CallError>;

    /// What `to` still has to pull.
    async fn transfer_status(
        &self,
        to: &NodeId,
        envelope: Envelope,
    ) -> Result<Reply<TransferStatus>, CallError>;

    /// Has `to` replace its record of a key only if it is unchanged.
    async fn replace_if(
        &self,
        to: &NodeId,
        envelope: Envelope,
        request: ReplaceIf,
    ) -> Result<Reply<bool>, CallError>;
}
