//! Quorum reads with causal merge and read repair.

use std::sync::Arc;

use futures::StreamExt;
use futures::stream::FuturesUnordered;
use kv_router::Op;
use kv_types::{NodeId, Object};
use tracing::debug;

use super::{Coordinator, Read, list};
use crate::network::CallError;
use crate::{Error, Result};

impl Coordinator {
    /// Reads `key` from R replicas (default or `r`), best-scored first; a
    /// failed replica is replaced by the next one. Answers every live
    /// sibling and the causal context of everything read.
    ///
    /// While the key's partition moves, R counts the current holders (the
    /// nodes that have its data); the pending new owners are back-filled
    /// with what was read.
    ///
    /// # Errors
    /// [`Error::Unavailable`] when fewer than R replicas are alive or
    /// answered; a refusal for an impossible R.
    pub async fn get(self: &Arc<Self>, request_id: u64, key: &[u8], r: Option<u8>) -> Result<Read> {
        let placement = self.cluster.placement();
        let (_, replicas) = placement.key_replicas(key);
        let preference = &replicas.current;
        let r = self.quorum(r, self.quorums.r, preference.len(), "R")?;
        self.await_startup_view(preference, r).await;
        let order = self.scoring.order(&self.cluster, preference, Op::Get);
        if order.len() < r {
            return Err(Error::Unavailable {
                needed: r,
                got: order.len(),
                detail: format!(
                    "only {} of the {} replicas of this key are alive ({}); R={r} needs {r}",
                    order.len(),
                    preference.len(),
                    list(&order)
                ),
            });
        }
        let deadline = self.cluster.clock().now() + self.quorums.request_timeout;
        let mut inflight = FuturesUnordered::new();
        let mut next = 0;
        while next < r {
            inflight.push(self.read_one(order[next].clone(), request_id, key));
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
                Ok(Some((node, Ok(object)))) => answers.push((node, object)),
                Ok(Some((node, Err(e)))) => {
                    debug!(%node, error = %e, "replica read failed");
                    errors.push(e.to_string());
                    if next < order.len() {
                        inflight.push(self.read_one(order[next].clone(), request_id, key));
                        next += 1;
                    }
                }
            }
        }
        if answers.len() < r {
            return Err(Error::Unavailable {
                needed: r,
                got: answers.len(),
                detail: format!(
                    "only {} of R={r} replicas answered: {}",
                    answers.len(),
                    errors.join("; ")
                ),
            });
        }
        let merged = answers
            .iter()
            .filter_map(|(_, o)| o.as_ref())
            .fold(Object::new(), |acc, o| acc.sync(o));
        self.read_repair(request_id, key, &answers, &merged);
        self.back_fill(request_id, key, &replicas.pending, &merged);
        let context = merged
            .join()
            .to_context()
            .map_err(|e| Error::Internal(format!("cannot encode the context: {e}")))?;
        Ok(Read {
            object: merged,
            context,
        })
    }

    async fn read_one(
        &self,
        node: NodeId,
        request_id: u64,
        key: &[u8],
    ) -> (NodeId, std::result::Result<Option<Object>, CallError>) {
        let timeout = self.quorums.replica_timeout;
        let result = self.peers.get(&node, request_id, key, timeout).await;
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
        let stale = answers
            .iter()
            .filter(|(_, object)| object.as_ref() != Some(merged))
            .map(|(node, _)| node);
        for node in stale {
            self.send_in_background(request_id, node, key, merged, "read repair");
        }
    }

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
            self.send_in_background(request_id, node, key, merged, "back-fill");
        }
    }

    /// Replicates `object` to `node` in the background (shutdown waits).
    fn send_in_background(
        self: &Arc<Self>,
        request_id: u64,
        node: &NodeId,
        key: &[u8],
        object: &Object,
        what: &'static str,
    ) {
        let (this, node, key, object) = (self.clone(), node.clone(), key.to_vec(), object.clone());
        self.background.spawn(async move {
            let timeout = this.quorums.replica_timeout;
            match this
                .peers
                .replicate(&node, request_id, &key, &object, timeout)
                .await
            {
                Ok(()) => debug!(%node, what, "applied"),
                Err(e) => debug!(%node, what, error = %e, "failed"),
            }
        });
    }
}
