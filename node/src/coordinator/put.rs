//! Quorum writes: one replica coordinates (issues the dot), the others
//! merge its result; success after W durable copies.

use std::sync::Arc;

use futures::StreamExt;
use futures::stream::FuturesUnordered;
use kv_router::Op;
use kv_types::{NodeId, Object, VersionVector};
use kv_wire::{ErrorKind, PeerRequest, Response};
use tokio::time::Instant;
use tracing::debug;

use super::get::list;
use super::{Coordinator, now_ms};
use crate::peers::CallError;

impl Coordinator {
    /// Writes `data` (a value, or `None` for a delete) under the causal
    /// `context` the client read (encoded; empty for a blind write).
    pub async fn put(
        self: &Arc<Self>,
        request_id: u64,
        key: Vec<u8>,
        data: Option<Vec<u8>>,
        context: &[u8],
        w: Option<u8>,
    ) -> Response {
        let context = match VersionVector::from_context(context) {
            Ok(c) => c,
            Err(e) => {
                return self.error(
                    ErrorKind::Invalid,
                    format!("{e}: pass the context exactly as a read printed it"),
                );
            }
        };
        let ring = self.cluster.ring();
        let preference = ring.key_preference_list(&key).to_vec();
        let n = preference.len();
        let w = match self.quorum(w, self.quorums.w, n, "W") {
            Ok(w) => w,
            Err(e) => return e,
        };
        let order = self.scoring.order(&self.cluster, &preference, Op::Put);
        if order.len() < w {
            return self.error(
                ErrorKind::Unavailable,
                format!(
                    "only {} of the {n} replicas of this key are alive ({}); W={w} needs {w}; nothing was stored: retry when nodes are back, or lower --w",
                    order.len(),
                    list(&order)
                ),
            );
        }
        let deadline = Instant::now() + self.quorums.request_timeout;
        // The coordinating replica: this node when it holds the key (no
        // extra hop), otherwise the best-scored replica.
        let me = &self.cluster.me().id;
        let mut coordinators = order.clone();
        if let Some(i) = coordinators.iter().position(|id| id == me) {
            let local = coordinators.remove(i);
            coordinators.insert(0, local);
        }
        let mut errors: Vec<String> = Vec::new();
        let mut coordinated: Option<(NodeId, Object)> = None;
        for candidate in coordinators {
            let timeout = self.remaining(deadline);
            let request = PeerRequest::Coordinate {
                key: key.clone(),
                data: data.clone(),
                context: context.clone(),
                written_at_ms: now_ms(),
            };
            match self
                .peers
                .call(&candidate, request_id, request, timeout)
                .await
            {
                Ok(Response::Object(Some(object))) => {
                    coordinated = Some((candidate, object));
                    break;
                }
                Ok(other) => {
                    // A replica that answers nonsense may still have written.
                    return self.error(
                        ErrorKind::Indeterminate,
                        format!("{candidate} answered {other:?} to a write; it may be stored"),
                    );
                }
                Err(CallError::NotDone(e)) => errors.push(e),
                Err(CallError::Refused(e)) => return Response::Error(e),
                Err(CallError::Unknown(e)) => {
                    return self.error(
                        ErrorKind::Indeterminate,
                        format!("{e}; the write may be stored: read the key to find out"),
                    );
                }
            }
        }
        let Some((coordinator, object)) = coordinated else {
            return self.error(
                ErrorKind::Unavailable,
                format!(
                    "no replica could take the write ({}); nothing was stored",
                    errors.join("; ")
                ),
            );
        };
        let context = match object.join().to_context() {
            Ok(c) => c,
            Err(e) => {
                return self.error(
                    ErrorKind::Internal,
                    format!("cannot encode the context: {e}"),
                );
            }
        };
        self.replicate(
            request_id,
            key,
            object,
            coordinator,
            &order,
            w,
            deadline,
            errors,
            context,
        )
        .await
    }

    /// Sends the coordinated object to the other live replicas and answers
    /// once `w` copies (the coordinator's included) are durable. Copies
    /// still in flight then complete in the background.
    #[allow(clippy::too_many_arguments)]
    async fn replicate(
        self: &Arc<Self>,
        request_id: u64,
        key: Vec<u8>,
        object: Object,
        coordinator: NodeId,
        order: &[NodeId],
        w: usize,
        deadline: Instant,
        mut errors: Vec<String>,
        context: Vec<u8>,
    ) -> Response {
        let mut stored = vec![coordinator.clone()];
        let mut inflight = FuturesUnordered::new();
        for node in order.iter().filter(|id| **id != coordinator) {
            let (this, node, key, object) =
                (self.clone(), node.clone(), key.clone(), object.clone());
            let timeout = self.quorums.replica_timeout;
            inflight.push(async move {
                let request = PeerRequest::Replicate { key, object };
                let result = this.peers.call(&node, request_id, request, timeout).await;
                (node, result)
            });
        }
        while stored.len() < w {
            match tokio::time::timeout_at(deadline, inflight.next()).await {
                Err(_) => {
                    errors.push("request deadline passed".into());
                    break;
                }
                Ok(None) => break,
                Ok(Some((node, Ok(_)))) => stored.push(node),
                Ok(Some((node, Err(e)))) => {
                    debug!(%node, error = %e, "replication failed");
                    errors.push(e.to_string());
                }
            }
        }
        if !inflight.is_empty() {
            // Finish the remaining copies: they make the write durable on
            // all N replicas, not only W.
            self.background.spawn(async move {
                while let Some((node, result)) = inflight.next().await {
                    if let Err(e) = result {
                        debug!(%node, error = %e, "background replication failed");
                    }
                }
            });
        }
        if stored.len() >= w {
            return Response::Written { context };
        }
        self.error(
            ErrorKind::Indeterminate,
            format!(
                "stored on {} of the required W={w} replicas ({}): {}; the write may survive: read the key to find out",
                stored.len(),
                list(&stored),
                errors.join("; ")
            ),
        )
    }

    fn remaining(&self, deadline: Instant) -> std::time::Duration {
        deadline
            .saturating_duration_since(Instant::now())
            .min(self.quorums.replica_timeout)
    }
}
