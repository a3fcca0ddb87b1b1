//! The QUIC front door: admission of client requests (bounded,
//! "overloaded" when full), dispatch to the replication core, reports, and
//! the receiving side of replica calls. Wire types are translated here
//! ([`crate::translate`]) and go no further.

use std::sync::Arc;
use std::time::Instant;

use kv_replication::{ClientWrite, Coordinate, Core, HintCopy, ReplaceIf, ScanRequest, WriteMode};
use kv_tls::{PeerIdentity, Role};
use kv_transport::Handler;
use kv_types::NodeId;
use kv_wire::{
    ClientReply, ErrorKind, Op as WireOp, PeerCall, PeerReply, PeerRequest, PeerResponse, Request,
    RequestBody, Response, WireError,
};
use tokio::sync::Semaphore;
use tracing::Instrument;

use crate::certs::NodeCerts;
use crate::membership::GossipMembership;
use crate::report;
use crate::translate::{error_to_wire, plan_to_wire, read_to_wire, repair_to_wire};

/// Serves every request that reaches this node over QUIC.
pub struct NodeHandler {
    /// The replication core.
    pub core: Arc<Core>,
    /// Gossip, for the reports' addresses.
    pub gossip: Arc<GossipMembership>,
    /// Client requests in flight (bounded queue, shared with RESP).
    pub client_slots: Arc<Semaphore>,
    /// The node's certificate, for status.
    pub certs: Arc<NodeCerts>,
}

impl NodeHandler {
    fn me(&self) -> &NodeId {
        self.core.cluster().id()
    }

    fn error(&self, kind: ErrorKind, message: String) -> Response {
        Response::Error(WireError {
            kind,
            message,
            node: self.me().to_string(),
        })
    }

    fn core_error(&self, e: &kv_replication::Error) -> Response {
        Response::Error(error_to_wire(self.me(), e))
    }

    fn needs_admin(&self, peer: &PeerIdentity, what: &str) -> Option<Response> {
        (peer.role != Role::Admin).then(|| {
            self.error(
                ErrorKind::Refused,
                format!(
                    "{what} needs an admin certificate; {} has a {} certificate: use --identity admin",
                    peer.name,
                    peer.role.as_str()
                ),
            )
        })
    }

    async fn client(&self, peer: &PeerIdentity, id: u64, body: RequestBody) -> Response {
        let core = &self.core;
        let coordinator = core.coordinator();
        let write = |key, value, context, w| ClientWrite {
            key,
            value,
            context,
            mode: WriteMode::Context,
            w,
        };
        let result = match body {
            RequestBody::Get { key, r, hedged } => coordinator
                .read(id, &key, r, hedged)
                .await
                .map(|read| Response::Get(read_to_wire(read))),
            RequestBody::Put {
                key,
                value,
                context,
                w,
            } => coordinator
                .write(id, write(key, Some(value), context, w))
                .await
                .map(|w| Response::Written { context: w.context }),
            RequestBody::Delete { key, context, w } => coordinator
                .write(id, write(key, None, context, w))
                .await
                .map(|w| Response::Written { context: w.context }),
            RequestBody::LocalGet { key } => core.replica().get(&key).await.map(Response::Object),
            RequestBody::Status => Ok(Response::Status(report::status(core, &self.gossip))),
            RequestBody::Certs => Ok(Response::Certs(report::certs(
                core,
                &self.gossip,
                &self.certs,
            ))),
            RequestBody::Ring => Ok(Response::Ring(report::ring(core, &self.gossip))),
            RequestBody::RingV2 => Ok(Response::RingV2(report::ring_v2(core, &self.gossip))),
            RequestBody::Explain { key, op } => {
                let op = match op {
                    WireOp::Get => kv_router::Op::Get,
                    WireOp::Put => kv_router::Op::Put,
                };
                Ok(Response::Explain(report::explain(
                    core,
                    &self.gossip,
                    &key,
                    op,
                )))
            }
            RequestBody::Decisions { key, last } => {
                let records = core
                    .scoring()
                    .decisions(key.as_deref(), last as usize)
                    .iter()
                    .filter_map(|r| serde_json::to_string(r).ok())
                    .collect();
                Ok(Response::Decisions(records))
            }
            RequestBody::RouterMode { mode } => {
                if let Some(refusal) = self.needs_admin(peer, "switching the routing mode") {
                    return refusal;
                }
                match mode.parse::<kv_router::Mode>() {
                    Ok(mode) => {
                        core.scoring().set_mode(mode);
                        tracing::info!(%mode, "routing mode switched; the router starts afresh");
                        Ok(Response::Ack)
                    }
                    Err(e) => Err(kv_replication::Error::invalid(e.to_string())),
                }
            }
            RequestBody::Repair => {
                if let Some(refusal) = self.needs_admin(peer, "repair") {
                    return refusal;
                }
                Ok(Response::Repair(repair_to_wire(
                    core.anti_entropy().start_full_pass(),
                )))
            }
            RequestBody::RepairStatus => Ok(Response::Repair(repair_to_wire(
                core.anti_entropy().report(),
            ))),
            RequestBody::Drain { dry_run } => {
                if let Some(refusal) = self.needs_admin(peer, "drain") {
                    return refusal;
                }
                core.drain(dry_run)
                    .await
                    .map(|plan| Response::Plan(plan_to_wire(plan)))
            }
            RequestBody::Remove { node } => {
                if let Some(refusal) = self.needs_admin(peer, "remove") {
                    return refusal;
                }
                match NodeId::new(node) {
                    // Already out of the ring (drained or removed before):
                    // nothing to do, as for a delete of what is not there.
                    Ok(id) if core.cluster().has_left(&id) => Ok(Response::Ack),
                    Ok(id) => core.cluster().remove(&id).await.map(|()| Response::Ack),
                    Err(e) => Err(kv_replication::Error::invalid(e.to_string())),
                }
            }
            RequestBody::PlanJoin { zone, weight } => core
                .plan_join(&zone, weight)
                .await
                .map(|plan| Response::Plan(plan_to_wire(plan))),
        };
        result.unwrap_or_else(|e| self.core_error(&e))
    }

    /// Serves one replica call from node `from`.
    async fn peer(&self, from: NodeId, call: PeerCall) -> PeerResponse {
        let service = self.core.service();
        self.core.cluster().observe_ring_version(call.ring_version);
        let result = match call.body {
            PeerRequest::ReplicaGet { key } => service.get(&key).await.map(PeerResponse::Object),
            PeerRequest::Coordinate {
                key,
                data,
                context,
                overwrite,
                written_at_ms,
            } => {
                let write = Coordinate {
                    key,
                    data,
                    context,
                    overwrite,
                    written_at_ms,
                };
                service
                    .coordinate(call.id, write)
                    .await
                    .map(|o| PeerResponse::Object(Some(o)))
            }
            PeerRequest::Replicate { key, object } => service
                .replicate(&from, call.ring_version, &key, &object)
                .await
                .map(|()| PeerResponse::Ack),
            PeerRequest::StoreHint {
                owner,
                key,
                object,
                age_ms,
            } => match NodeId::new(owner) {
                Ok(owner) => {
                    let hint = HintCopy {
                        owner,
                        key,
                        object,
                        age_ms,
                    };
                    service.store_hint(hint).await.map(|()| PeerResponse::Ack)
                }
                Err(e) => Err(kv_replication::Error::invalid(e.to_string())),
            },
            PeerRequest::SegmentDigests { first, count } => service
                .segment_digests(first, count)
                .await
                .map(PeerResponse::Digests),
            PeerRequest::KeyDigests { from_hash, to_hash } => service
                .key_digests(from_hash, to_hash)
                .await
                .map(PeerResponse::KeyDigests),
            PeerRequest::Scan {
                from_hash,
                to_hash,
                after,
                limit,
            } => {
                let request = ScanRequest {
                    from_hash,
                    to_hash,
                    after,
                    limit,
                };
                service
                    .scan(request)
                    .await
                    .map(|page| PeerResponse::Objects {
                        objects: page.objects,
                        more: page.more,
                    })
            }
            PeerRequest::PartitionStats { partitions, q } => service
                .partition_stats(partitions, q)
                .await
                .map(PeerResponse::PartitionStats),
            PeerRequest::TransferStatus => {
                let status = service.transfer_status();
                Ok(PeerResponse::TransferStatus {
                    pending: status.pending,
                    ring_version: status.ring_version,
                })
            }
            PeerRequest::ReplaceIf {
                key,
                expected,
                replacement,
            } => {
                let request = ReplaceIf {
                    key,
                    expected,
                    replacement,
                };
                service
                    .replace_if(request)
                    .await
                    .map(PeerResponse::Replaced)
            }
        };
        result.unwrap_or_else(|e| PeerResponse::Error(error_to_wire(self.me(), &e)))
    }
}

#[async_trait::async_trait]
impl Handler for NodeHandler {
    async fn handle(&self, peer: &PeerIdentity, request: Request) -> ClientReply {
        let span = tracing::debug_span!("request", id = request.id, peer = %peer.name);
        async move {
            let (op, started) = (crate::metrics::quic_op(&request.body), Instant::now());
            let response = match self.client_slots.try_acquire() {
                Ok(_slot) => self.client(peer, request.id, request.body).await,
                Err(_) => self.error(
                    ErrorKind::Overloaded,
                    "overloaded: too many client requests in flight; retry later".into(),
                ),
            };
            let outcome = crate::metrics::Outcome::of_response(&response);
            crate::metrics::record_request("quic", op, outcome, started.elapsed());
            ClientReply {
                ring_version: self.core.cluster().ring_version(),
                response,
            }
        }
        .instrument(span)
        .await
    }

    async fn handle_peer(&self, peer: &PeerIdentity, call: PeerCall) -> PeerReply {
        let span = tracing::debug_span!("replica call", id = call.id, peer = %peer.name);
        async move {
            let response = match NodeId::new(peer.name.as_str()) {
                Ok(from) => self.peer(from, call).await,
                Err(e) => PeerResponse::Error(WireError {
                    kind: ErrorKind::Refused,
                    message: format!("the node certificate's name is not a node id: {e}"),
                    node: self.me().to_string(),
                }),
            };
            let feedback = self.core.service().feedback();
            PeerReply {
                ring_version: self.core.cluster().ring_version(),
                feedback: Some(kv_wire::Feedback {
                    queue: feedback.queue,
                    service_us: feedback.service_us,
                }),
                response,
            }
        }
        .instrument(span)
        .await
    }
}
