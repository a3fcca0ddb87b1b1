//! Quorum writes with a sloppy quorum: one replica coordinates (issues the
//! dot), the other replicas merge its result, and a replica that is down or
//! fails is stood in for by the next live node on the ring, which keeps a
//! hint naming it (Dynamo section 4.6). Success after W durable copies.

use std::collections::VecDeque;
use std::sync::Arc;

use futures::StreamExt;
use futures::stream::FuturesUnordered;
use kv_router::{Op, Ring};
use kv_types::{NodeId, Object, VersionVector};
use kv_wire::{ErrorKind, PeerRequest, Response};
use tokio::time::Instant;
use tracing::debug;

use super::get::list;
use super::{Coordinator, now_ms};
use crate::peers::CallError;

/// Where one copy of a write goes: the replica itself, or a fallback that
/// holds a hint for it.
#[derive(Clone, Debug)]
struct Copy {
    /// The replica the copy is for.
    owner: NodeId,
    /// The node that receives it (the owner, or a fallback).
    via: NodeId,
}

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
        self.write(request_id, key, data, context, WriteMode::Context, w)
            .await
    }

    /// Writes `data` under `context` or, with [`WriteMode::Overwrite`], also
    /// superseding everything the coordinating replica holds for the key
    /// (for RESP `SET`/`DEL`, which carry no context).
    pub async fn write(
        self: &Arc<Self>,
        request_id: u64,
        key: Vec<u8>,
        data: Option<Vec<u8>>,
        context: &[u8],
        mode: WriteMode,
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
        let placement = self.cluster.placement();
        let (partition, replicas) = placement.key_replicas(&key);
        let preference = replicas.current.clone();
        let n = preference.len();
        let w = match self.quorum(w, self.quorums.w, n, "W") {
            Ok(w) => w,
            Err(e) => return e,
        };
        // While the partition moves, its pending new owners must get the
        // write too: W + (pending) acks (Cassandra's rule for pending ranges).
        let required = w + replicas.pending.len();
        self.await_startup_view(&preference, w).await;
        let order = self.scoring.order(&self.cluster, &preference, Op::Put);
        let pending_alive: Vec<NodeId> = replicas
            .pending
            .iter()
            .filter(|id| self.cluster.is_alive(id))
            .cloned()
            .collect();
        let all = replicas.all();
        let fallbacks = self.fallbacks(&placement.target, partition, &all);
        let dead = all.len() - order.len() - pending_alive.len();
        let reachable = order.len() + pending_alive.len() + dead.min(fallbacks.len());
        if order.is_empty() || reachable < required {
            return self.error(
                ErrorKind::Unavailable,
                format!(
                    "only {} of the {n} replicas of this key are alive ({}), with {} pending owner(s) and {} fallback node(s); W={w} needs {required}; nothing was stored: retry when nodes are back, or lower --w",
                    order.len(),
                    list(&order),
                    pending_alive.len(),
                    fallbacks.len()
                ),
            );
        }
        let deadline = Instant::now() + self.quorums.request_timeout;
        // The coordinating replica: this node when it holds the key (no
        // extra hop), otherwise the best-scored live replica. Only a replica
        // holding the key's clock may issue a dot.
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
                overwrite: mode == WriteMode::Overwrite,
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
        // Copies: every other live replica directly; every dead one through
        // a fallback.
        let mut spare: VecDeque<NodeId> = fallbacks.into();
        let mut copies: Vec<Copy> = order
            .iter()
            .chain(pending_alive.iter())
            .filter(|id| **id != coordinator)
            .map(|id| Copy {
                owner: id.clone(),
                via: id.clone(),
            })
            .collect();
        for owner in all
            .iter()
            .filter(|id| !order.contains(id) && !pending_alive.contains(id))
        {
            if let Some(via) = spare.pop_front() {
                copies.push(Copy {
                    owner: owner.clone(),
                    via,
                });
            }
        }
        let write = Write {
            request_id,
            key,
            object,
            w: required,
            deadline,
        };
        self.replicate(write, coordinator, copies, spare, errors, context)
            .await
    }

    /// Sends the coordinated object to its copies and answers once `w`
    /// copies (the coordinator's included) are durable. A copy that fails
    /// is retried as a hint on the next spare fallback. Copies still in
    /// flight then complete in the background.
    async fn replicate(
        self: &Arc<Self>,
        write: Write,
        coordinator: NodeId,
        copies: Vec<Copy>,
        mut spare: VecDeque<NodeId>,
        mut errors: Vec<String>,
        context: Vec<u8>,
    ) -> Response {
        let mut stored = vec![coordinator];
        let mut inflight = FuturesUnordered::new();
        for copy in copies {
            inflight.push(self.send_copy(&write, copy));
        }
        while stored.len() < write.w {
            match tokio::time::timeout_at(write.deadline, inflight.next()).await {
                Err(_) => {
                    errors.push("request deadline passed".into());
                    break;
                }
                Ok(None) => break,
                Ok(Some((copy, Ok(_)))) => stored.push(copy.via),
                Ok(Some((copy, Err(e)))) => {
                    debug!(owner = %copy.owner, via = %copy.via, error = %e, "copy failed");
                    errors.push(e.to_string());
                    if let Some(via) = spare.pop_front() {
                        inflight.push(self.send_copy(
                            &write,
                            Copy {
                                owner: copy.owner,
                                via,
                            },
                        ));
                    }
                }
            }
        }
        if !inflight.is_empty() {
            // Finish the remaining copies: they make the write durable on
            // all N replicas (or their fallbacks), not only W.
            self.background.spawn(async move {
                while let Some((copy, result)) = inflight.next().await {
                    if let Err(e) = result {
                        debug!(owner = %copy.owner, via = %copy.via, error = %e, "background copy failed");
                    }
                }
            });
        }
        if stored.len() >= write.w {
            return Response::Written { context };
        }
        let w = write.w;
        self.error(
            ErrorKind::Indeterminate,
            format!(
                "stored on {} of the required W={w} nodes ({}): {}; the write may survive: read the key to find out",
                stored.len(),
                list(&stored),
                errors.join("; ")
            ),
        )
    }

    /// One copy: a direct replication to its owner, or a hint on a fallback.
    fn send_copy(
        self: &Arc<Self>,
        write: &Write,
        copy: Copy,
    ) -> impl Future<Output = (Copy, Result<Response, CallError>)> + Send + 'static {
        let this = self.clone();
        let (request_id, key, object) = (write.request_id, write.key.clone(), write.object.clone());
        let timeout = self.quorums.replica_timeout;
        async move {
            let request = if copy.owner == copy.via {
                PeerRequest::Replicate { key, object }
            } else {
                PeerRequest::StoreHint {
                    owner: copy.owner.to_string(),
                    key,
                    object,
                    created_at_ms: now_ms(),
                }
            };
            let result = this
                .peers
                .call(&copy.via, request_id, request, timeout)
                .await;
            (copy, result)
        }
    }

    /// Live nodes after the preference list on the ring walk, in order: the
    /// nodes a sloppy quorum falls back to (Dynamo section 4.6).
    fn fallbacks(&self, ring: &Ring, partition: u32, preference: &[NodeId]) -> Vec<NodeId> {
        let q = ring.partitions();
        let mut out: Vec<NodeId> = Vec::new();
        for step in 1..q {
            let owner = ring.owner((partition + step) % q);
            if preference.contains(owner) || out.contains(owner) {
                continue;
            }
            if self.cluster.is_alive(owner) {
                out.push(owner.clone());
            }
            if out.len() + preference.len() >= ring.members().len() {
                break;
            }
        }
        out
    }

    fn remaining(&self, deadline: Instant) -> std::time::Duration {
        deadline
            .saturating_duration_since(Instant::now())
            .min(self.quorums.replica_timeout)
    }
}

/// Which versions a write supersedes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WriteMode {
    /// Exactly what the client's causal context saw (kvctl, client library).
    Context,
    /// The context and everything the coordinating replica holds (RESP).
    Overwrite,
}

/// What every copy of one write carries.
struct Write {
    request_id: u64,
    key: Vec<u8>,
    object: Object,
    w: usize,
    deadline: Instant,
}
