//! The node's request handler: admission (bounded, "overloaded" when
//! full), then dispatch to the coordinator, the local replica, or reports.

use std::sync::Arc;

use kv_tls::{PeerIdentity, Role};
use kv_transport::Handler;
use kv_wire::{ErrorKind, Request, RequestBody, Response, WireError};
use tokio::sync::Semaphore;
use tracing::Instrument;

use crate::antientropy::AntiEntropy;
use crate::cluster::Cluster;
use crate::coordinator::Coordinator;
use crate::replica::Replica;
use crate::report;
use crate::scoring::Scoring;

/// Serves every request that reaches this node.
pub struct NodeHandler {
    pub(crate) cluster: Arc<Cluster>,
    pub(crate) coordinator: Arc<Coordinator>,
    pub(crate) replica: Arc<Replica>,
    pub(crate) scoring: Arc<Scoring>,
    pub(crate) anti_entropy: Arc<AntiEntropy>,
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
                    return Response::Error(WireError {
                        kind: ErrorKind::Refused,
                        message: format!(
                            "repair needs an admin certificate; {} has a {} certificate: use --identity admin",
                            peer.name,
                            peer.role.as_str()
                        ),
                        node: self.cluster.me().id.to_string(),
                    });
                }
                Response::Repair(self.anti_entropy.start_full_pass())
            }
            RequestBody::RepairStatus => Response::Repair(self.anti_entropy.report()),
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
                return self.replica.handle(p).await;
            }
            let Ok(_slot) = self.client_slots.try_acquire() else {
                return self.overloaded("client");
            };
            self.client(peer, request.id, request.body).await
        }
        .instrument(span)
        .await
    }
}
