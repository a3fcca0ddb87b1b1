//! The node's request handler: admission (bounded, "overloaded" when
//! full), then dispatch to the coordinator, the local replica, or reports.

use std::sync::Arc;
use std::time::Instant;

use kv_tls::{PeerIdentity, Role};
use kv_transport::Handler;
use kv_wire::{ErrorKind, Request, RequestBody, Response, WireError};
use tokio::sync::Semaphore;
use tracing::Instrument;

use crate::antientropy::AntiEntropy;
use crate::cluster::Cluster;
use crate::coordinator::Coordinator;
use crate::peers::Peers;
use crate::plan;
use crate::replica::Replica;
use crate::report;
use crate::scoring::Scoring;
use crate::transfer::Transfer;

/// Serves every request that reaches this node.
pub struct NodeHandler {
    pub(crate) cluster: Arc<Cluster>,
    pub(crate) coordinator: Arc<Coordinator>,
    pub(crate) replica: Arc<Replica>,
    pub(crate) scoring: Arc<Scoring>,
    pub(crate) anti_entropy: Arc<AntiEntropy>,
    pub(crate) transfer: Arc<Transfer>,
    pub(crate) peers: Arc<Peers>,
    /// Client requests in flight (bounded queue).
    pub(crate) client_slots: Arc<Semaphore>,
    /// Replica requests in flight, apart so clients cannot starve
    /// replication.
    pub(crate) peer_slots: Arc<Semaphore>,
}

impl NodeHandler {
    fn overloaded(&self, what: &str) -> Response {
        Response::Error(WireError {
            kind: ErrorKind::Overloaded,
            message: format!("overloaded: too many {what} requests in flight; retry later"),
            node: self.cluster.me().id.to_string(),
        })
    }

    fn needs_admin(&self, peer: &PeerIdentity, what: &str) -> Response {
        Response::Error(WireError {
            kind: ErrorKind::Refused,
            message: format!(
                "{what} needs an admin certificate; {} has a {} certificate: use --identity admin",
                peer.name,
                peer.role.as_str()
            ),
            node: self.cluster.me().id.to_string(),
        })
    }

    fn internal(&self, message: String) -> Response {
        Response::Error(WireError {
            kind: ErrorKind::Internal,
            message,
            node: self.cluster.me().id.to_string(),
        })
    }

    /// Starts draining this node (or only plans it), answering the plan.
    async fn drain(&self, dry_run: bool) -> Response {
        use kv_types::NodeStatus;
        let status = self.cluster.status();
        if !dry_run && status != NodeStatus::Up && status != NodeStatus::Draining {
            return Response::Error(WireError {
                kind: ErrorKind::Invalid,
                message: format!(
                    "{} is {status}: only an UP node can be drained",
                    self.cluster.me().id
                ),
                node: self.cluster.me().id.to_string(),
            });
        }
        let report = match plan::drain(&self.cluster, &self.peers, !dry_run).await {
            Ok(r) => r,
            Err(e) => return self.internal(format!("cannot plan the drain: {e:#}")),
        };
        if !dry_run
            && status == NodeStatus::Up
            && let Err(e) = self.cluster.set_status(NodeStatus::Draining).await
        {
            return self.internal(format!("cannot start draining: {e:#}"));
        }
        Response::Plan(report)
    }

    async fn client(&self, peer: &PeerIdentity, id: u64, body: RequestBody) -> Response {
        match body {
            RequestBody::Get { key, r } => self.coordinator.get(id, key, r).await,
            RequestBody::Put {
                key,
                value,
                context,
                w,
            } => {
                self.coordinator
                    .put(id, key, Some(value), &context, w)
                    .await
            }
            RequestBody::Delete { key, context, w } => {
                self.coordinator.put(id, key, None, &context, w).await
            }
            RequestBody::LocalGet { key } => match self.replica.get(key).await {
                Ok(object) => Response::Object(object),
                Err(e) => Response::Error(e),
            },
            RequestBody::Status => Response::Status(report::status(&self.cluster)),
            RequestBody::Explain { key } => {
                Response::Explain(report::explain(&self.cluster, &self.scoring, &key))
            }
            RequestBody::Repair => {
                if peer.role != Role::Admin {
                    return self.needs_admin(peer, "repair");
                }
                Response::Repair(self.anti_entropy.start_full_pass())
            }
            RequestBody::RepairStatus => Response::Repair(self.anti_entropy.report()),
            RequestBody::Drain { dry_run } => {
                if peer.role != Role::Admin {
                    return self.needs_admin(peer, "drain");
                }
                self.drain(dry_run).await
            }
            RequestBody::Remove { node } => {
                if peer.role != Role::Admin {
                    return self.needs_admin(peer, "remove");
                }
                let result = match kv_types::NodeId::new(node) {
                    Ok(id) => self.cluster.remove(&id).await,
                    Err(e) => Err(e.into()),
                };
                match result {
                    Ok(()) => Response::Ack,
                    Err(e) => Response::Error(WireError {
                        kind: ErrorKind::Invalid,
                        message: format!("{e:#}"),
                        node: self.cluster.me().id.to_string(),
                    }),
                }
            }
            RequestBody::PlanJoin { zone, weight } => {
                match plan::join(&self.cluster, &self.peers, &zone, weight).await {
                    Ok(report) => Response::Plan(report),
                    Err(e) => self.internal(format!("cannot plan the join: {e:#}")),
                }
            }
            RequestBody::Peer(p) => self.replica.handle(p).await,
        }
    }
}

#[async_trait::async_trait]
impl Handler for NodeHandler {
    async fn handle(&self, peer: &PeerIdentity, request: Request) -> Response {
        let span = tracing::debug_span!("request", id = request.id, peer = %peer.name);
        async move {
            if let RequestBody::Peer(p) = request.body {
                let Ok(_slot) = self.peer_slots.try_acquire() else {
                    return self.overloaded("replica");
                };
                if matches!(p, kv_wire::PeerRequest::TransferStatus) {
                    let (pending, ring_version) = self.transfer.status();
                    return Response::TransferStatus {
                        pending,
                        ring_version,
                    };
                }
                return self.replica.handle(p).await;
            }
            let (op, started) = (crate::metrics::quic_op(&request.body), Instant::now());
            let response = match self.client_slots.try_acquire() {
                Ok(_slot) => self.client(peer, request.id, request.body).await,
                Err(_) => self.overloaded("client"),
            };
            let outcome = crate::metrics::Outcome::of_response(&response);
            crate::metrics::record_request("quic", op, outcome, started.elapsed());
            response
        }
        .instrument(span)
        .await
    }
}
