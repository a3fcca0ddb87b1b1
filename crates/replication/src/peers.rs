//! Calls to a key's replicas, wherever they are: this node's own replica
//! is a plain function call, every other node a call through the
//! [`Network`]. Every outcome feeds the scorer, and every remote answer's
//! ring version is compared with this node's.

use std::sync::Arc;
use std::time::Duration;

use kv_router::{Feedback, Op, Outcome, Ticket};
use kv_types::{NodeId, Object};

use crate::network::{
    CallError, Coordinate, Envelope, HintCopy, Network, ReplaceIf, Reply, ScanPage, ScanRequest,
    TransferStatus,
};
use crate::replica::Replica;
use crate::{Cluster, Error, Rng, Scoring};

/// One call in flight, for the scorer. A call dropped before its outcome
/// is recorded (the request it served was cancelled: a hedged read's
/// loser is not, it runs on to its answer) leaves the in-flight count at
/// once (the peer did not fail, it was no longer waited for), but its age
/// keeps flooring the peer's latency until the peer answers something,
/// the call's deadline passes, or its hold has passed
/// ([`kv_router::Scorer::abandon`]).
struct Call<'a> {
    scoring: &'a Scoring,
    peer: &'a NodeId,
    op: Op,
    ticket: Option<Ticket>,
    started: tokio::time::Instant,
    timeout: Duration,
    feedback: Option<Feedback>,
}

impl Drop for Call<'_> {
    fn drop(&mut self) {
        if let Some(ticket) = self.ticket.take() {
            self.scoring
                .abandon(&ticket, self.started, self.started + self.timeout);
        }
    }
}

/// The coordinator's view of replicas.
pub struct Peers {
    cluster: Arc<Cluster>,
    replica: Arc<Replica>,
    network: Arc<dyn Network>,
    scoring: Arc<Scoring>,
    rng: Arc<Rng>,
}

impl Peers {
    /// Calls through `network`, and to `replica` for this node itself.
    pub fn new(
        cluster: Arc<Cluster>,
        replica: Arc<Replica>,
        network: Arc<dyn Network>,
        scoring: Arc<Scoring>,
        rng: Arc<Rng>,
    ) -> Self {
        Peers {
            cluster,
            replica,
            network,
            scoring,
            rng,
        }
    }

    /// A fresh request id for background work (handoff, transfer,
    /// anti-entropy).
    pub fn fresh_id(&self) -> u64 {
        self.rng.next_u64()
    }

    fn is_local(&self, node: &NodeId) -> bool {
        node == self.cluster.id()
    }

    fn envelope(&self, request_id: u64, timeout: Duration) -> Envelope {
        Envelope {
            request_id,
            ring_version: self.cluster.ring_version(),
            timeout,
        }
    }

    /// Unwraps a remote answer, noting its ring version.
    fn answered<T>(&self, reply: Result<Reply<T>, CallError>) -> Result<T, CallError> {
        reply.map(|r| {
            self.cluster.observe_ring_version(r.ring_version);
            r.value
        })
    }

    /// Unwraps a remote answer, noting its ring version and keeping what
    /// it piggybacked for the scorer.
    fn answered_with<T>(
        &self,
        reply: Result<Reply<T>, CallError>,
        feedback: &mut Option<Feedback>,
    ) -> Result<T, CallError> {
        reply.map(|r| {
            self.cluster.observe_ring_version(r.ring_version);
            *feedback = r.feedback;
            r.value
        })
    }

    /// Starts a call: the scorer counts it in flight.
    fn start<'a>(&'a self, to: &'a NodeId, op: Op, timeout: Duration) -> Call<'a> {
        Call {
            scoring: &self.scoring,
            peer: to,
            op,
            timeout,
            ticket: Some(self.scoring.begin(to, op)),
            started: self.cluster.clock().now(),
            feedback: None,
        }
    }

    /// Ends a call: its outcome and feedback go to the scorer. A refusal
    /// is an answer (the replica is healthy); a call that may have
    /// executed without answering counts as a timeout.
    fn record<T>(&self, mut call: Call<'_>, result: &Result<T, CallError>) {
        let (to, op) = (call.peer, call.op);
        let now = self.cluster.clock().now();
        let outcome = match result {
            Ok(_) | Err(CallError::Replica(Error::Refused(_))) => Outcome::Ok {
                latency: now.saturating_duration_since(call.started),
            },
            Err(e) if e.may_be_applied() => Outcome::Timeout,
            Err(_) => Outcome::Error,
        };
        if let Some(ticket) = call.ticket.take() {
            self.scoring
                .end(&ticket, to, op, outcome, call.feedback.take());
        }
    }

    /// The object `to` stores for `key`.
    ///
    /// # Errors
    /// See [`CallError`].
    pub async fn get(
        &self,
        to: &NodeId,
        request_id: u64,
        key: &[u8],
        timeout: Duration,
    ) -> Result<Option<Object>, CallError> {
        let mut call = self.start(to, Op::Get, timeout);
        let result = if self.is_local(to) {
            self.replica.get(key).await.map_err(CallError::Replica)
        } else {
            let envelope = self.envelope(request_id, timeout);
            let reply = self.network.get(to, envelope, key.to_vec()).await;
            self.answered_with(reply, &mut call.feedback)
        };
        self.record(call, &result);
        result
    }

    /// Has `to` coordinate a client write; answers the object it stored.
    ///
    /// # Errors
    /// See [`CallError`].
    pub async fn coordinate(
        &self,
        to: &NodeId,
        request_id: u64,
        write: Coordinate,
        timeout: Duration,
    ) -> Result<Object, CallError> {
        let mut call = self.start(to, Op::Put, timeout);
        let result = if self.is_local(to) {
            self.replica
                .coordinate(request_id, write)
                .await
                .map_err(CallError::Replica)
        } else {
            let envelope = self.envelope(request_id, timeout);
            let reply = self.network.coordinate(to, envelope, write).await;
            self.answered_with(reply, &mut call.feedback)
        };
        self.record(call, &result);
        result
    }

    /// Has `to` merge `object` into its copy of `key`, durably.
    ///
    /// # Errors
    /// See [`CallError`].
    pub async fn replicate(
        &self,
        to: &NodeId,
        request_id: u64,
        key: &[u8],
        object: &Object,
        timeout: Duration,
    ) -> Result<(), CallError> {
        let mut call = self.start(to, Op::Put, timeout);
        let result = if self.is_local(to) {
            self.replica
                .replicate(key, object)
                .await
                .map(|_| ())
                .map_err(CallError::Replica)
        } else {
            let envelope = self.envelope(request_id, timeout);
            let reply = self
                .network
                .replicate(to, envelope, key.to_vec(), object.clone())
                .await;
            self.answered_with(reply, &mut call.feedback)
        };
        self.record(call, &result);
        result
    }

    /// Has `to` hold a hint for a replica that is down.
    ///
    /// # Errors
    /// See [`CallError`].
    pub async fn store_hint(
        &self,
        to: &NodeId,
        request_id: u64,
        hint: HintCopy,
        timeout: Duration,
    ) -> Result<(), CallError> {
        let mut call = self.start(to, Op::Put, timeout);
        let result = if self.is_local(to) {
            self.replica
                .store_hint(hint)
                .await
                .map_err(CallError::Replica)
        } else {
            let envelope = self.envelope(request_id, timeout);
            let reply = self.network.store_hint(to, envelope, hint).await;
            self.answered_with(reply, &mut call.feedback)
        };
        self.record(call, &result);
        result
    }

    /// `count` anti-entropy segment digests of `to` from `first`.
    ///
    /// # Errors
    /// See [`CallError`].
    pub async fn segment_digests(
        &self,
        to: &NodeId,
        first: u32,
        count: u32,
        timeout: Duration,
    ) -> Result<Vec<u64>, CallError> {
        if self.is_local(to) {
            return self
                .replica
                .segment_digests(first, count)
                .await
                .map_err(CallError::Replica);
        }
        let envelope = self.envelope(self.fresh_id(), timeout);
        let call = self.network.segment_digests(to, envelope, first, count);
        self.answered(call.await)
    }

    /// Every key of `to` in a hash range, with its item digest.
    ///
    /// # Errors
    /// See [`CallError`].
    pub async fn key_digests(
        &self,
        to: &NodeId,
        from_hash: u64,
        to_hash: u64,
        timeout: Duration,
    ) -> Result<Vec<(Vec<u8>, u64)>, CallError> {
        if self.is_local(to) {
            return self
                .replica
                .key_digests(from_hash, to_hash)
                .await
                .map_err(CallError::Replica);
        }
        let envelope = self.envelope(self.fresh_id(), timeout);
        let call = self.network.key_digests(to, envelope, from_hash, to_hash);
        self.answered(call.await)
    }

    /// One page of the objects `to` stores in a hash range.
    ///
    /// # Errors
    /// See [`CallError`].
    pub async fn scan(
        &self,
        to: &NodeId,
        request: ScanRequest,
        timeout: Duration,
    ) -> Result<ScanPage, CallError> {
        if self.is_local(to) {
            return self.replica.scan(request).await.map_err(CallError::Replica);
        }
        let envelope = self.envelope(self.fresh_id(), timeout);
        self.answered(self.network.scan(to, envelope, request).await)
    }

    /// Keys and bytes `to` stores per partition.
    ///
    /// # Errors
    /// See [`CallError`].
    pub async fn partition_stats(
        &self,
        to: &NodeId,
        partitions: Vec<u32>,
        q: u32,
        timeout: Duration,
    ) -> Result<Vec<(u32, u64, u64)>, CallError> {
        if self.is_local(to) {
            return self
                .replica
                .partition_stats(partitions, q)
                .await
                .map_err(CallError::Replica);
        }
        let envelope = self.envelope(self.fresh_id(), timeout);
        let call = self.network.partition_stats(to, envelope, partitions, q);
        self.answered(call.await)
    }

    /// What `to` still has to pull (never asked of this node itself).
    ///
    /// # Errors
    /// See [`CallError`].
    pub async fn transfer_status(
        &self,
        to: &NodeId,
        timeout: Duration,
    ) -> Result<TransferStatus, CallError> {
        let envelope = self.envelope(self.fresh_id(), timeout);
        self.answered(self.network.transfer_status(to, envelope).await)
    }

    /// Has `to` replace its record of a key only if it is unchanged.
    ///
    /// # Errors
    /// See [`CallError`].
    pub async fn replace_if(
        &self,
        to: &NodeId,
        request: ReplaceIf,
        timeout: Duration,
    ) -> Result<bool, CallError> {
        if self.is_local(to) {
            return self
                .replica
                .replace_if(request)
                .await
                .map_err(CallError::Replica);
        }
        let envelope = self.envelope(self.fresh_id(), timeout);
        self.answered(self.network.replace_if(to, envelope, request).await)
    }
}
