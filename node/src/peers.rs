//! Calls to a key's replicas, local or remote, with per-call deadlines and
//! the scorer fed on the way.

use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use kv_router::{Op, Outcome};
use kv_transport::Endpoint;
use kv_types::NodeId;
use kv_wire::{ErrorKind, PeerRequest, Request, RequestBody, Response, WireError};

use crate::cluster::Cluster;
use crate::replica::Replica;
use crate::scoring::Scoring;

/// Why a replica call failed, in the terms a coordinator decides with.
#[derive(Debug)]
pub enum CallError {
    /// The request certainly did not execute (not sent, refused before
    /// doing anything): another replica may be tried.
    NotDone(String),
    /// It may have executed (timeout, lost connection, I/O failure while
    /// writing).
    Unknown(String),
    /// The replica refused it for a reason the client must see (sibling
    /// cap, invalid request).
    Refused(WireError),
}

impl std::fmt::Display for CallError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CallError::NotDone(m) | CallError::Unknown(m) => f.write_str(m),
            CallError::Refused(e) => write!(f, "{} ({:?})", e.message, e.kind),
        }
    }
}

/// The coordinator's view of replicas.
pub struct Peers {
    cluster: Arc<Cluster>,
    replica: Arc<Replica>,
    scoring: Arc<Scoring>,
    endpoint: OnceLock<Arc<Endpoint>>,
}

impl Peers {
    /// Peers of this node; the endpoint is set once it is bound.
    pub fn new(cluster: Arc<Cluster>, replica: Arc<Replica>, scoring: Arc<Scoring>) -> Self {
        Peers {
            cluster,
            replica,
            scoring,
            endpoint: OnceLock::new(),
        }
    }

    /// Sets the endpoint remote calls go through (once).
    pub fn set_endpoint(&self, endpoint: Arc<Endpoint>) {
        let _ = self.endpoint.set(endpoint);
    }

    /// Sends `request` to replica `id` (served in-process when it is this
    /// node), waiting at most `timeout`.
    pub async fn call(
        &self,
        id: &NodeId,
        request_id: u64,
        request: PeerRequest,
        timeout: Duration,
    ) -> Result<Response, CallError> {
        let op = match request {
            PeerRequest::ReplicaGet { .. } => Op::Get,
            _ => Op::Put,
        };
        let started = Instant::now();
        let result = if *id == self.cluster.me().id {
            Ok(self.replica.handle(request).await)
        } else {
            self.remote(id, request_id, request, timeout).await
        };
        let outcome = match &result {
            Ok(Response::Error(_)) | Err(CallError::NotDone(_)) | Err(CallError::Refused(_)) => {
                Outcome::Error
            }
            Ok(_) => Outcome::Ok {
                latency: started.elapsed(),
            },
            Err(CallError::Unknown(_)) => Outcome::Timeout,
        };
        self.scoring.record(id, op, outcome);
        match result {
            Ok(Response::Error(e)) => Err(classify(e)),
            other => other,
        }
    }

    async fn remote(
        &self,
        id: &NodeId,
        request_id: u64,
        request: PeerRequest,
        timeout: Duration,
    ) -> Result<Response, CallError> {
        let Some(endpoint) = self.endpoint.get() else {
            return Err(CallError::NotDone("the node is still starting".into()));
        };
        let Some(addr) = self.cluster.peer_addr(id) else {
            return Err(CallError::NotDone(format!("no address known for {id}")));
        };
        let request = Request {
            id: request_id,
            body: RequestBody::Peer(request),
        };
        endpoint
            .call(addr, id.as_str(), &request, timeout)
            .await
            .map_err(|e| {
                let message = format!("{id}: {e}");
                if e.is_unsent() {
                    CallError::NotDone(message)
                } else {
                    CallError::Unknown(message)
                }
            })
    }
}

/// What a replica's error answer means for the write it answered.
fn classify(e: WireError) -> CallError {
    match e.kind {
        // An internal failure may have struck after the write reached disk.
        ErrorKind::Internal | ErrorKind::Indeterminate => {
            CallError::Unknown(format!("{}: {}", e.node, e.message))
        }
        ErrorKind::TooManySiblings | ErrorKind::Invalid => CallError::Refused(e),
        ErrorKind::Unavailable
        | ErrorKind::Overloaded
        | ErrorKind::Refused
        | ErrorKind::Corrupt => {
            CallError::NotDone(format!("{}: {} ({:?})", e.node, e.message, e.kind))
        }
    }
}
