//! Quorum reads with causal merge and read repair.

use std::sync::Arc;

use futures::StreamExt;
use futures::stream::FuturesUnordered;
use kv_router::Op;
use kv_types::{NodeId, Object};
use kv_wire::{ErrorKind, GetReply, PeerRequest, Response};
use tokio::time::Instant;
use tracing::debug;

use super::Coordinator;
use crate::peers::CallError;

impl Coordinator {
    /// Reads `key` from R replicas (default or `r`), best-scored first; a
    /// failed replica is replaced by the next one. Answers every live
    /// sibling and the causal context of everything read.
    ///
    /// While the key's partition moves, R counts the current holders (the
    /// nodes that have its data); the pending new owners are back-filled
    /// with what was read.
    pub async fn get(self: &Arc<Self>, request_id: u64, key: Vec<u8>, r: Option<u8>) -> Response {
        let placement = self.cluster.placement();
        let (_, replicas) = placement.key_replicas(&key);
        let preference = replicas.current.clone();
        let r = match self.quorum(r, self.quorums.r, preference.len(), "R") {
            Ok(r) => r,
            Err(e) => return e,
        };
        self.await_startup_view(&preference, r).await;
        let order = self.scoring.order(&self.cluster, &preference, Op::Get);
        if order.len() < r {
            return self.error(
                ErrorKind::Unavailable,
                format!(
                    "only {} of the {} replicas of this key are alive ({}); R={r} needs {r}: retry when nodes are back, or lower --r",
                    order.len(),
                    preference.len(),
                    list(&order)
                ),
            );
        }
        let deadline = Instant::now() + self.quorums.request_timeout;
        let mut inflight = FuturesUnordered::new();
        let mut next = 0;
        while next < r {
            inflight.push(self.read_one(order[next].clone(), request_id, key.clone()));
            next += 1;
        }
        let mut answers: Vec<(NodeId, Option<Object>)> = Vec::with_capacity(r);
        let mut errors: Vec<String> = Vec::new();
        while answers.len() < r {
            match tokio::time::timeout_at(deadline, inflight.next()).await {
                Err(_) => {
                    errors.push("request deadline passed".into());
                    break;
                }
                Ok(None) => break,
                Ok(Some((_, Ok(object)))) => answers.push(object),
                Ok(Some((node, Err(e)))) => {
                    debug!(%node, error = %e, "replica read failed");
                    errors.push(e.to_string());
                    if next < order.len() {
                        inflight.push(self.read_one(order[next].clone(), request_id, key.clone()));
                        next += 1;
                    }
                }
            }
        }
        if answers.len() < r {
            return self.error(
                ErrorKind::Unavailable,
                format!(
                    "only {} of R={r} replicas answered: {}; retry, or lower --r",
                    answers.len(),
                    errors.join("; ")
                ),
            );
        }
        let merged = answers
            .iter()
            .filter_map(|(_, o)| o.as_ref())
            .fold(Object::new(), |acc, o| acc.sync(o));
        self.read_repair(request_id, &key, &answers, &merged);
        self.back_fill(request_id, &key, &replicas.pending, &merged);
        let context = match merged.join().to_context() {
            Ok(c) => c,
            Err(e) => {
                return self.error(
                    ErrorKind::Internal,
                    format!("cannot encode the context: {e}"),
                );
            }
        };
        Response::Get(GetReply {
            values: merged.live_values().map(<[u8]>::to_vec).collect(),
            deleted: merged.is_deleted(),
            context,
        })
    }

    async fn read_one(
        self: &Arc<Self>,
        node: NodeId,
        request_id: u64,
        key: Vec<u8>,
    ) -> (NodeId, Result<(NodeId, Option<Object>), CallError>) {
        let request = PeerRequest::ReplicaGet { key };
        let result = match self
            .peers
            .call(&node, request_id, request, self.quorums.replica_timeout)
            .await
        {
            Ok(Response::Object(o)) => Ok((node.clone(), o)),
            Ok(other) => Err(CallError::NotDone(format!(
                "{node}: unexpected answer {other:?}"
            ))),
            Err(e) => Err(e),
        };
        (node, result)
    }

    /// Sends the merged object, in the background, to every replica that
    /// answered with something older (or nothing).
    fn read_repair(
        self: &Arc<Self>,
        request_id: u64,
        key: &[u8],
        answers: &[(NodeId, Option<Object>)],
        merged: &Object,
    ) {
        if merged.is_empty() {
            return;
        }
        for (node, object) in answers {
            if object.as_ref() == Some(merged) {
                continue;
            }
            let (this, node, key, merged) =
                (self.clone(), node.clone(), key.to_vec(), merged.clone());
            self.background.spawn(async move {
                let request = PeerRequest::Replicate {
                    key,
                    object: merged,
                };
                match this
                    .peers
                    .call(&node, request_id, request, this.quorums.replica_timeout)
                    .await
                {
                    Ok(_) => debug!(%node, "read repair applied"),
                    Err(e) => debug!(%node, error = %e, "read repair failed"),
                }
            });
        }
    }
}

impl Coordinator {
    /// Sends what a read found to the pending new owners of the key, in the
    /// background (they may not have pulled it yet).
    fn back_fill(
        self: &Arc<Self>,
        request_id: u64,
        key: &[u8],
        pending: &[NodeId],
        merged: &Object,
    ) {
        if merged.is_empty() {
            return;
        }
        for node in pending.iter().filter(|n| self.cluster.is_alive(n)) {
            let (this, node, key, merged) =
                (self.clone(), node.clone(), key.to_vec(), merged.clone());
            self.background.spawn(async move {
                let request = PeerRequest::Replicate {
                    key,
                    object: merged,
                };
                if let Err(e) = this
                    .peers
                    .call(&node, request_id, request, this.quorums.replica_timeout)
                    .await
                {
                    debug!(%node, error = %e, "back-fill failed");
                }
            });
        }
    }
}

/// Comma-separated node ids.
pub(super) fn list(ids: &[NodeId]) -> String {
    if ids.is_empty() {
        return "none".into();
    }
    ids.iter()
        .map(NodeId::as_str)
        .collect::<Vec<_>>()
        .join(", ")
}
