//! The copies of a coordinated write, with a sloppy quorum: every other
//! live replica gets the object directly, a replica that is down (or whose
//! copy fails) is stood in for by the next live node on the ring, which
//! keeps a hint naming it (Dynamo section 4.6).

use std::collections::VecDeque;
use std::sync::Arc;

use futures::StreamExt;
use futures::stream::FuturesUnordered;
use kv_router::Ring;
use kv_types::{NodeId, Object};
use tokio::time::Instant;
use tracing::debug;

use super::{Coordinator, list};
use crate::network::{CallError, HintCopy};
use crate::{Error, Result};

/// Where one copy of a write goes: the replica itself, or a fallback that
/// holds a hint for it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Copy {
    /// The replica the copy is for.
    pub owner: NodeId,
    /// The node that receives it (the owner, or a fallback).
    pub via: NodeId,
}

/// What every copy of one write carries, and where they go.
pub(super) struct Copies {
    request_id: u64,
    key: Vec<u8>,
    object: Object,
    /// Durable copies needed, the coordinating replica's included.
    needed: usize,
    deadline: Instant,
    /// The first copies to send.
    targets: Vec<Copy>,
    /// Fallbacks not used yet, in ring order.
    spare: VecDeque<NodeId>,
}

impl Copies {
    /// Every other live replica (and live pending owner) directly, every
    /// dead one through the next spare fallback.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn plan(
        request_id: u64,
        key: Vec<u8>,
        object: Object,
        needed: usize,
        deadline: Instant,
        coordinator: &NodeId,
        live: &[NodeId],
        pending_alive: &[NodeId],
        all: &[NodeId],
        fallbacks: Vec<NodeId>,
    ) -> Self {
        let mut spare: VecDeque<NodeId> = fallbacks.into();
        let mut targets: Vec<Copy> = live
            .iter()
            .chain(pending_alive.iter())
            .filter(|id| *id != coordinator)
            .map(|id| Copy {
                owner: id.clone(),
                via: id.clone(),
            })
            .collect();
        for owner in all
            .iter()
            .filter(|id| !live.contains(id) && !pending_alive.contains(id))
        {
            if let Some(via) = spare.pop_front() {
                targets.push(Copy {
                    owner: owner.clone(),
                    via,
                });
            }
        }
        Copies {
            request_id,
            key,
            object,
            needed,
            deadline,
            targets,
            spare,
        }
    }
}

impl Coordinator {
    /// Sends the coordinated object to its copies and returns once enough
    /// copies (the coordinator's included) are durable. A copy that fails
    /// is retried as a hint on the next spare fallback. Copies still in
    /// flight then complete in the background.
    ///
    /// # Errors
    /// [`Error::Indeterminate`] when fewer than the needed copies were
    /// confirmed by the deadline.
    pub(super) async fn replicate(
        self: &Arc<Self>,
        copies: Copies,
        coordinator: NodeId,
        mut errors: Vec<String>,
    ) -> Result<()> {
        let copies = Arc::new(copies);
        let mut spare = copies.spare.clone();
        let mut stored = vec![coordinator];
        let mut inflight = FuturesUnordered::new();
        for copy in &copies.targets {
            inflight.push(self.send_copy(&copies, copy.clone()));
        }
        while stored.len() < copies.needed {
            match tokio::time::timeout_at(copies.deadline, inflight.next()).await {
                Err(_) => {
                    errors.push("request deadline passed".into());
                    break;
                }
                Ok(None) => break,
                Ok(Some((copy, Ok(())))) => stored.push(copy.via),
                Ok(Some((copy, Err(e)))) => {
                    debug!(owner = %copy.owner, via = %copy.via, error = %e, "copy failed");
                    errors.push(e.to_string());
                    if let Some(via) = spare.pop_front() {
                        let owner = copy.owner;
                        inflight.push(self.send_copy(&copies, Copy { owner, via }));
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
        if stored.len() >= copies.needed {
            return Ok(());
        }
        Err(Error::Indeterminate {
            needed: copies.needed,
            stored: stored.len(),
            detail: format!(
                "stored on {} of the required W={} nodes ({}): {}; the write may survive: read the key to find out",
                stored.len(),
                copies.needed,
                list(&stored),
                errors.join("; ")
            ),
        })
    }

    /// One copy: a direct replication to its owner, or a hint on a fallback.
    fn send_copy(
        self: &Arc<Self>,
        copies: &Arc<Copies>,
        copy: Copy,
    ) -> impl Future<Output = (Copy, std::result::Result<(), CallError>)> + Send + 'static {
        let (this, copies) = (self.clone(), copies.clone());
        let timeout = self.quorums.replica_timeout;
        async move {
            let (peers, id) = (&this.peers, copies.request_id);
            let result = if copy.owner == copy.via {
                peers
                    .replicate(&copy.via, id, &copies.key, &copies.object, timeout)
                    .await
            } else {
                let hint = HintCopy {
                    owner: copy.owner.clone(),
                    key: copies.key.clone(),
                    object: copies.object.clone(),
                    age_ms: 0,
                };
                peers.store_hint(&copy.via, id, hint, timeout).await
            };
            (copy, result)
        }
    }

    /// Live nodes after the preference list on the ring walk, in order: the
    /// nodes a sloppy quorum falls back to (Dynamo section 4.6).
    pub(super) fn fallbacks(
        &self,
        ring: &Ring,
        partition: u32,
        preference: &[NodeId],
    ) -> Vec<NodeId> {
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
}
