//! Quorum reads with causal merge and read repair.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use futures::StreamExt;
use futures::stream::FuturesUnordered;
use kv_router::Op;
use kv_types::{NodeId, Object};
use tracing::debug;

use super::{Coordinator, Read, list};
use crate::network::CallError;
use crate::{Error, Result};

impl Coordinator {
    /// Reads `key` from R replicas (default or `r`), in the router's
    /// order; a failed replica is replaced by the next one, and a slow one
    /// is hedged (see [`Coordinator::read`]).
    ///
    /// # Errors
    /// See [`Coordinator::read`].
    pub async fn get(self: &Arc<Self>, request_id: u64, key: &[u8], r: Option<u8>) -> Result<Read> {
        self.read(request_id, key, r, false).await
    }

    /// Reads `key` from R replicas, best first; a failed replica is
    /// replaced by the next one. When the first ones have not all answered
    /// after the router's hedge delay (p95 of recent reads), the next
    /// replica is asked too, within the hedge budget, unless the request
    /// is itself a client's hedge (`already_hedged`); the first R answers
    /// win and the others run on in the background (their answers are
    /// latency samples for the router). Answers every live sibling and the
    /// causal context of everything read.
    ///
    /// While the key's partition moves, R counts the current holders (the
    /// nodes that have its data); the pending new owners are back-filled
    /// with what was read, at most `[transfer] back_fills_per_sec` a
    /// second from this coordinator: the pull brings them every key
    /// anyway, and a back-fill of every read (about 2,000 writes a second
    /// on a joiner under a 4,400 ops/s 90%-read load, 2026-12-06) made
    /// the requests' p99 while a node joined 1.5x that with the bound
    /// (82 against 55 ms, docs/benchmarks.md).
    ///
    /// # Errors
    /// [`Error::Unavailable`] when fewer than R replicas are alive or
    /// answered; a refusal for an impossible R.
    pub async fn read(
        self: &Arc<Self>,
        request_id: u64,
        key: &[u8],
        r: Option<u8>,
        already_hedged: bool,
    ) -> Result<Read> {
        let placement = self.cluster.placement();
        let (_, replicas) = placement.key_replicas(key);
        let preference = &replicas.current;
        let r = self.quorum(r, self.quorums.r, preference.len(), "R")?;
        self.await_startup_view(preference, r).await;
        self.scoring.on_request();
        let route = self
            .scoring
            .route(&self.cluster, preference, Op::Get, key, r);
        let mut order = route.order;
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
        let now = self.cluster.clock().now();
        let deadline = now + self.quorums.request_timeout;
        let mut hedge_at = route
            .hedge_after
            .filter(|_| !already_hedged && order.len() > r)
            .map(|delay| now + delay);
        let mut hedged_to: Option<NodeId> = None;
        let shared_key: Arc<[u8]> = Arc::from(key);
        let mut inflight = FuturesUnordered::new();
        // Replicas whose read failed (rare: no allocation otherwise).
        let mut failed: Vec<NodeId> = Vec::new();
        let mut next = 0;
        while next < r {
            inflight.push(self.read_one(order[next].clone(), request_id, &shared_key));
            next += 1;
        }
        // A replica this node keeps out is re-tested by this read too
        // (`kv_router::Decision::latency_probe`), when the hedge budget
        // allows: its answer counts as any replica's, and it leaves the
        // order so that no hedge or failover asks it again.
        if let Some(probe) = route.latency_probe.filter(|p| !order[..r].contains(p))
            && self.scoring.try_hedge()
        {
            debug!(node = %probe, "probing a replica kept out");
            order.retain(|n| *n != probe);
            inflight.push(self.read_one(probe, request_id, &shared_key));
        }
        let mut answers: Vec<(NodeId, Option<Object>)> = Vec::with_capacity(r);
        let mut errors: Vec<String> = Vec::new();
        // Replicas that answered `Corrupt`: their record failed its checks.
        // They count for nothing toward R (the damaged record may have
        // held the only copy of an acknowledged write this read must see),
        // but they are repaired with whatever was read.
        let mut corrupt: Vec<NodeId> = Vec::new();
        while answers.len() < r {
            let hedge = async {
                match hedge_at {
                    Some(at) => tokio::time::sleep_until(at).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                biased;
                answer = inflight.next() => match answer {
                    None => break,
                    Some((node, Ok(object))) => {
                        if hedged_to.as_ref() == Some(&node) {
                            self.scoring.hedge_won();
                        }
                        answers.push((node, object));
                    }
                    Some((node, Err(e))) => {
                        debug!(%node, error = %e, "replica read failed");
                        failed.push(node.clone());
                        if matches!(e, CallError::Replica(Error::Corrupt { .. })) {
                            corrupt.push(node);
                        }
                        errors.push(e.to_string());
                        if next < order.len() {
                            inflight.push(self.read_one(order[next].clone(), request_id, &shared_key));
                            next += 1;
                        }
                    }
                },
                _ = tokio::time::sleep_until(deadline) => {
                    errors.push("request deadline passed".into());
                    break;
                }
                _ = hedge => {
                    hedge_at = None;
                    // Not to a replica as slow as the first R (the
                    // slowness is shared: the read waits for them).
                    if next < order.len()
                        && (!route.budgeted
                            || (self.scoring.hedge_may_help(&order[next], now)
                                && self.scoring.try_hedge()))
                    {
                        debug!(node = %order[next], "hedging the read");
                        hedged_to = Some(order[next].clone());
                        inflight.push(self.read_one(order[next].clone(), request_id, &shared_key));
                        next += 1;
                    }
                }
            }
        }
        // A request the hedge was sent past (one of the first R, neither
        // answered nor failed) when the read has its answers was outrun:
        // its replica's latency is floored at once by its age (over the
        // hedge delay), not only after five estimates
        // (`kv_router::Scorer::outrun`). Not outrun: the hedge, and a
        // replacement for a failed read; they were sent later, and their
        // age says nothing.
        if hedged_to.is_some() && answers.len() >= r {
            let outrun = order[..r]
                .iter()
                .filter(|n| !answers.iter().any(|(a, _)| a == *n) && !failed.contains(n));
            for node in outrun {
                self.scoring.outrun(node);
            }
        }
        // The losers (a hedge or the request it hedged, a failed-over
        // read) run on in the background to their answers or deadlines:
        // they stay in flight for the scorer, and how long their replicas
        // took is a latency sample (a cancelled loser left only an
        // abandoned request's floor; docs/design.md, "A hedge's loser runs
        // on").
        if !inflight.is_empty() {
            tokio::spawn(async move { while inflight.next().await.is_some() {} });
        }
        let merged = answers
            .iter()
            .filter_map(|(_, o)| o.as_ref())
            .fold(Object::new(), |acc, o| acc.sync(o));
        // A damaged record is rewritten even when the read fails: a causal
        // merge never loses anything the damaged replica still holds
        // elsewhere, and it stops answering `Corrupt`.
        self.repair_corrupt(request_id, key, &corrupt, &merged);
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
        // Affinity: a replica that answered, a peer rather than this node
        // when one did. The local replica needs no note (it leads for its
        // hop credit); which peer holds the key in its cache is what the
        // next read's choice among peers needs.
        let me = self.cluster.id();
        if let Some((served, _)) = answers.iter().rfind(|(n, _)| n != me).or(answers.first()) {
            self.scoring.served(key, served);
        }
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

    /// Reads `key` from `node`: a future of its own (it owns what it
    /// needs), so that a loser can run on after the read has its answers.
    fn read_one(
        &self,
        node: NodeId,
        request_id: u64,
        key: &Arc<[u8]>,
    ) -> impl Future<Output = (NodeId, std::result::Result<Option<Object>, CallError>)> + Send + 'static
    {
        let peers = Arc::clone(&self.peers);
        let key = Arc::clone(key);
        let timeout = self.quorums.replica_timeout;
        async move {
            let result = peers.get(&node, request_id, &key, timeout).await;
            (node, result)
        }
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

    /// Sends the merged object, in the background, to every replica that
    /// answered `Corrupt` (the replica quarantines the damaged record and
    /// stores the merge: `Storage::update`). Nothing is sent when the read
    /// found nothing readable anywhere: an empty object would not replace
    /// the damaged record, and anti-entropy or a later read repairs it.
    fn repair_corrupt(
        self: &Arc<Self>,
        request_id: u64,
        key: &[u8],
        corrupt: &[NodeId],
        merged: &Object,
    ) {
        if merged.is_empty() {
            return;
        }
        for node in corrupt {
            self.send_in_background(
                request_id,
                node,
                key,
                merged,
                "read repair of a corrupt record",
            );
        }
    }

    /// Sends what a read found to the pending new owners of the key, in the
    /// background (they may not have pulled it yet), within the
    /// coordinator's back-fill rate; what is over it is skipped (and
    /// counted): the key still reaches them by their pull.
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
            if !self.back_fills.try_take(self.cluster.clock().now()) {
                self.back_fills_skipped.fetch_add(1, Ordering::Relaxed);
                continue;
            }
            self.back_fills_sent.fetch_add(1, Ordering::Relaxed);
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
