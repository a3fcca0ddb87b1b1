//! Quorum writes: one replica coordinates (issues the dot), then the
//! result is copied to the others ([`super::copies`]). Success after W
//! durable copies.

use std::sync::Arc;

use kv_router::Op;
use kv_types::{NodeId, Object, VersionVector};

use super::copies::Copies;
use super::{Coordinator, Written, list};
use crate::network::{CallError, Coordinate};
use crate::{Error, Result};

/// Which versions a write supersedes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WriteMode {
    /// Exactly what the client's causal context saw (kvctl, client library).
    Context,
    /// The context and everything the coordinating replica holds (RESP,
    /// which carries no context).
    Overwrite,
}

/// A client's write of one key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClientWrite {
    /// The key.
    pub key: Vec<u8>,
    /// The value, or `None` for a delete (a tombstone).
    pub value: Option<Vec<u8>>,
    /// The opaque causal context of a previous read; empty for a blind
    /// write (which never discards another write: it becomes a sibling).
    pub context: Vec<u8>,
    /// Which versions the write supersedes.
    pub mode: WriteMode,
    /// Durable copies required (1..=N), or the default W.
    pub w: Option<u8>,
}

impl Coordinator {
    /// Writes a value (or a tombstone) under the causal context the client
    /// read, on W durable copies.
    ///
    /// # Errors
    /// [`Error::Unavailable`] (nothing stored) when too few replicas and
    /// fallbacks are alive or none could take the write;
    /// [`Error::Storage`] when every replica that could take it failed in
    /// its storage; [`Error::Indeterminate`] when it may be stored on fewer
    /// than W; a refusal (bad context, impossible W, sibling cap).
    pub async fn write(self: &Arc<Self>, request_id: u64, write: ClientWrite) -> Result<Written> {
        let ClientWrite {
            key,
            value,
            context,
            mode,
            w,
        } = write;
        let context = VersionVector::from_context(&context).map_err(|e| {
            Error::invalid(format!(
                "{e}: pass the context exactly as a read printed it"
            ))
        })?;
        let placement = self.cluster.placement();
        let (partition, replicas) = placement.key_replicas(&key);
        let preference = replicas.current.clone();
        let n = preference.len();
        let w = self.quorum(w, self.quorums.w, n, "W")?;
        // While the partition moves, its pending new owners must get the
        // write too: W + (pending) acks (Cassandra's rule for pending ranges).
        let required = w + replicas.pending.len();
        self.await_startup_view(&preference, w).await;
        self.scoring.on_request();
        let route = self
            .scoring
            .route(&self.cluster, &preference, Op::Put, &key, 1);
        let order = route.order;
        let pending_alive: Vec<NodeId> = replicas
            .pending
            .iter()
            .filter(|id| self.cluster.is_alive(id))
            .cloned()
            .collect();
        let all = replicas.all();
        let dead = all.len() - order.len() - pending_alive.len();
        // Fallbacks follow the ring walk; in score order when a replica is
        // already known dead, so that the stand-ins are the best ones (a
        // second decision per write otherwise, for fallbacks that are
        // used only when a live replica then fails; durable SET went
        // from 1.064 to 1.031 of the pre-crate build, docs/benchmarks.md,
        // set 7).
        let mut fallbacks = self.fallbacks(&placement.target, partition, &all);
        if dead > 0 && fallbacks.len() > 1 {
            fallbacks = self
                .scoring
                .route(&self.cluster, &fallbacks, Op::Put, &key, 1)
                .order;
        }
        let reachable = order.len() + pending_alive.len() + dead.min(fallbacks.len());
        if order.is_empty() || reachable < required {
            return Err(Error::Unavailable {
                needed: required,
                got: reachable,
                detail: format!(
                    "only {} of the {n} replicas of this key are alive ({}), with {} pending owner(s) and {} fallback node(s); W={w} needs {required}; nothing was stored",
                    order.len(),
                    list(&order),
                    pending_alive.len(),
                    fallbacks.len()
                ),
            });
        }
        let deadline = self.cluster.clock().now() + self.quorums.request_timeout;
        let mut candidates = order.clone();
        // The coordinating replica: this node when it holds the key and
        // scores within the near-tie band of the best (no extra hop),
        // otherwise the best-scored live replica.
        let me = self.cluster.id();
        if route.local_near_best
            && let Some(i) = candidates.iter().position(|id| id == me)
        {
            let local = candidates.remove(i);
            candidates.insert(0, local);
        }
        let (coordinator, object, errors) = self
            .coordinate(
                request_id,
                &key,
                value,
                context,
                mode,
                &candidates,
                deadline,
                required,
            )
            .await?;
        let context = object
            .join()
            .to_context()
            .map_err(|e| Error::Internal(format!("cannot encode the context: {e}")))?;
        let copies = Copies::plan(
            request_id,
            key,
            object,
            required,
            deadline,
            &coordinator,
            &order,
            &pending_alive,
            &all,
            fallbacks,
        );
        self.replicate(copies, coordinator, errors).await?;
        Ok(Written { context })
    }

    /// Has one replica apply the write, the candidates in order, the next
    /// only when one certainly did not apply it (a write that may have been
    /// applied is never coordinated a second time). Only a replica holding
    /// the key's clock may issue a dot. Answers the coordinating replica,
    /// its object, and the failures before it.
    #[allow(clippy::too_many_arguments)]
    async fn coordinate(
        &self,
        request_id: u64,
        key: &[u8],
        value: Option<Vec<u8>>,
        context: VersionVector,
        mode: WriteMode,
        order: &[NodeId],
        deadline: tokio::time::Instant,
        required: usize,
    ) -> Result<(NodeId, Object, Vec<String>)> {
        let mut errors: Vec<String> = Vec::new();
        let mut storage_failures: Vec<(NodeId, String)> = Vec::new();
        for candidate in order.iter().cloned() {
            let write = Coordinate {
                key: key.to_vec(),
                data: value.clone(),
                context: context.clone(),
                overwrite: mode == WriteMode::Overwrite,
                written_at_ms: self.cluster.clock().wall_ms(),
            };
            let timeout = self.remaining(deadline);
            match self
                .peers
                .coordinate(&candidate, request_id, write, timeout)
                .await
            {
                Ok(object) => {
                    tracing::debug!(
                        node = %self.cluster.id(),
                        request_id,
                        coordinator = %candidate,
                        "write coordinated"
                    );
                    return Ok((candidate, object, errors));
                }
                Err(e) => {
                    tracing::debug!(
                        node = %self.cluster.id(),
                        request_id,
                        coordinator = %candidate,
                        may_be_applied = e.may_be_applied(),
                        error = %e,
                        "coordinating replica did not answer with the write"
                    );
                    if let Some(refusal) = e.refusal() {
                        return Err(refusal.clone());
                    }
                    if e.may_be_applied() {
                        return Err(Error::Indeterminate {
                            needed: required,
                            stored: 0,
                            detail: format!(
                                "{e}; the write may be stored: read the key to find out"
                            ),
                        });
                    }
                    if let CallError::Replica(Error::Storage { node, message }) = &e {
                        storage_failures.push((node.clone(), message.clone()));
                    }
                    errors.push(e.to_string());
                }
            }
        }
        if !storage_failures.is_empty() && storage_failures.len() == errors.len() {
            let (node, _) = &storage_failures[0];
            let message = storage_failures
                .iter()
                .map(|(n, m)| format!("{n}: {m}"))
                .collect::<Vec<_>>()
                .join("; ");
            return Err(Error::Storage {
                node: node.clone(),
                message,
            });
        }
        Err(Error::Unavailable {
            needed: required,
            got: 0,
            detail: format!(
                "no replica could take the write ({}); nothing was stored",
                errors.join("; ")
            ),
        })
    }

    /// What is left of `deadline`, at most one replica call's deadline.
    pub(super) fn remaining(&self, deadline: tokio::time::Instant) -> std::time::Duration {
        deadline
            .saturating_duration_since(self.cluster.clock().now())
            .min(self.quorums.replica_timeout)
    }
}
