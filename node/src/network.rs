//! The replication core's network seam on the node's QUIC endpoint: each
//! replica call becomes one [`PeerCall`] frame on a stream of its own, and
//! its [`kv_wire::PeerReply`] is translated back. Peers are found through
//! gossip (their advertised address) and must present the certificate of
//! the node id called.

use std::sync::{Arc, OnceLock};

use kv_replication::{
    CallError, Coordinate, Envelope, HintCopy, Network, ReplaceIf, Reply, ScanPage, ScanRequest,
    TransferStatus,
};
use kv_transport::Endpoint;
use kv_types::{NodeId, Object};
use kv_wire::{PeerCall, PeerRequest, PeerResponse};

use crate::membership::GossipMembership;
use crate::translate::error_from_wire;

/// Replica calls over QUIC.
pub struct QuicNetwork {
    /// Set once the endpoint is bound (it needs the node's handler, which
    /// needs the core this network belongs to).
    endpoint: OnceLock<Arc<Endpoint>>,
    /// Where peers are.
    membership: Arc<GossipMembership>,
}

type Answer<T> = Result<Reply<T>, CallError>;

impl QuicNetwork {
    /// A network that finds peers through `membership`.
    pub fn new(membership: Arc<GossipMembership>) -> Arc<Self> {
        Arc::new(QuicNetwork {
            endpoint: OnceLock::new(),
            membership,
        })
    }

    /// Sets the endpoint calls go through (once).
    pub fn set_endpoint(&self, endpoint: Arc<Endpoint>) {
        let _ = self.endpoint.set(endpoint);
    }

    /// One call: `body` to `to`, the answer picked out by `pick` (an answer
    /// of another kind is a broken peer: the call may have executed).
    async fn call<T>(
        &self,
        to: &NodeId,
        envelope: Envelope,
        body: PeerRequest,
        pick: impl FnOnce(PeerResponse) -> Result<T, PeerResponse>,
    ) -> Answer<T> {
        let not_sent = |reason: String| CallError::NotSent {
            node: to.clone(),
            reason,
        };
        let Some(endpoint) = self.endpoint.get() else {
            return Err(not_sent("this node is still starting".into()));
        };
        let Some(addr) = self.membership.peer_addr(to) else {
            return Err(not_sent(format!("no address known for {to}")));
        };
        let call = PeerCall {
            id: envelope.request_id,
            ring_version: envelope.ring_version,
            body,
        };
        let reply = endpoint
            .call_peer(addr, to.as_str(), &call, envelope.timeout)
            .await
            .map_err(|e| {
                if e.is_unsent() {
                    not_sent(e.to_string())
                } else {
                    CallError::Unknown {
                        node: to.clone(),
                        reason: e.to_string(),
                    }
                }
            })?;
        let value = match reply.response {
            PeerResponse::Error(e) => return Err(CallError::Replica(error_from_wire(e))),
            other => pick(other).map_err(|other| CallError::Unknown {
                node: to.clone(),
                reason: format!("unexpected answer {other:?}"),
            })?,
        };
        Ok(Reply {
            value,
            ring_version: reply.ring_version,
            feedback: reply.feedback.map(|f| kv_router::Feedback {
                queue: f.queue,
                service_us: f.service_us,
            }),
        })
    }
}

#[async_trait::async_trait]
impl Network for QuicNetwork {
    async fn get(&self, to: &NodeId, envelope: Envelope, key: Vec<u8>) -> Answer<Option<Object>> {
        self.call(to, envelope, PeerRequest::ReplicaGet { key }, |r| match r {
            PeerResponse::Object(o) => Ok(o),
            other => Err(other),
        })
        .await
    }

    async fn coordinate(
        &self,
        to: &NodeId,
        envelope: Envelope,
        write: Coordinate,
    ) -> Answer<Object> {
        let body = PeerRequest::Coordinate {
            key: write.key,
            data: write.data,
            context: write.context,
            overwrite: write.overwrite,
            written_at_ms: write.written_at_ms,
        };
        self.call(to, envelope, body, |r| match r {
            PeerResponse::Object(Some(o)) => Ok(o),
            other => Err(other),
        })
        .await
    }

    async fn replicate(
        &self,
        to: &NodeId,
        envelope: Envelope,
        key: Vec<u8>,
        object: Object,
    ) -> Answer<()> {
        let body = PeerRequest::Replicate { key, object };
        self.call(to, envelope, body, |r| match r {
            PeerResponse::Ack => Ok(()),
            other => Err(other),
        })
        .await
    }

    async fn store_hint(&self, to: &NodeId, envelope: Envelope, hint: HintCopy) -> Answer<()> {
        let body = PeerRequest::StoreHint {
            owner: hint.owner.to_string(),
            key: hint.key,
            object: hint.object,
            age_ms: hint.age_ms,
        };
        self.call(to, envelope, body, |r| match r {
            PeerResponse::Ack => Ok(()),
            other => Err(other),
        })
        .await
    }

    async fn segment_digests(
        &self,
        to: &NodeId,
        envelope: Envelope,
        first: u32,
        count: u32,
    ) -> Answer<Vec<u64>> {
        let body = PeerRequest::SegmentDigests { first, count };
        self.call(to, envelope, body, |r| match r {
            PeerResponse::Digests(d) => Ok(d),
            other => Err(other),
        })
        .await
    }

    async fn key_digests(
        &self,
        to: &NodeId,
        envelope: Envelope,
        from_hash: u64,
        to_hash: u64,
    ) -> Answer<Vec<(Vec<u8>, u64)>> {
        let body = PeerRequest::KeyDigests { from_hash, to_hash };
        self.call(to, envelope, body, |r| match r {
            PeerResponse::KeyDigests(d) => Ok(d),
            other => Err(other),
        })
        .await
    }

    async fn scan(
        &self,
        to: &NodeId,
        envelope: Envelope,
        request: ScanRequest,
    ) -> Answer<ScanPage> {
        let body = PeerRequest::Scan {
            from_hash: request.from_hash,
            to_hash: request.to_hash,
            after: request.after,
            limit: request.limit,
        };
        self.call(to, envelope, body, |r| match r {
            PeerResponse::Objects { objects, more } => Ok(ScanPage { objects, more }),
            other => Err(other),
        })
        .await
    }

    async fn partition_stats(
        &self,
        to: &NodeId,
        envelope: Envelope,
        partitions: Vec<u32>,
        q: u32,
    ) -> Answer<Vec<(u32, u64, u64)>> {
        let body = PeerRequest::PartitionStats { partitions, q };
        self.call(to, envelope, body, |r| match r {
            PeerResponse::PartitionStats(s) => Ok(s),
            other => Err(other),
        })
        .await
    }

    async fn transfer_status(&self, to: &NodeId, envelope: Envelope) -> Answer<TransferStatus> {
        self.call(to, envelope, PeerRequest::TransferStatus, |r| match r {
            PeerResponse::TransferStatus {
                pending,
                ring_version,
            } => Ok(TransferStatus {
                pending,
                ring_version,
            }),
            other => Err(other),
        })
        .await
    }

    async fn replace_if(
        &self,
        to: &NodeId,
        envelope: Envelope,
        request: ReplaceIf,
    ) -> Answer<bool> {
        let body = PeerRequest::ReplaceIf {
            key: request.key,
            expected: request.expected,
            replacement: request.replacement,
        };
        self.call(to, envelope, body, |r| match r {
            PeerResponse::Replaced(done) => Ok(done),
            other => Err(other),
        })
        .await
    }
}
