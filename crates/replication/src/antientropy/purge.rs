//! Tombstone purge and clock compaction, both only with every replica's
//! agreement (see the module documentation of [`super`]).

use std::collections::HashMap;
use std::sync::atomic::Ordering;

use kv_types::{Actor, NodeId, Object};

use super::AntiEntropy;
use crate::network::ReplaceIf;
use crate::offload::offload;

/// Candidates examined per purge of one partition.
const PURGE_BATCH: usize = 1000;

impl AntiEntropy {
    /// Purges the partition's tombstones that every replica holds and that
    /// are older than the grace period, and compacts old clocks.
    pub(super) async fn purge_tombstones(&self, partition: u32) {
        let placement = self.cluster.placement();
        let replicas = placement.replicas(partition);
        let me = self.cluster.id();
        // Only the first live replica collects, and only when every replica
        // is alive and nothing moves.
        if !replicas.pending.is_empty()
            || replicas.current.iter().find(|id| self.cluster.is_alive(id)) != Some(me)
            || replicas.current.iter().any(|id| !self.cluster.is_alive(id))
        {
            return;
        }
        let (from, to) = placement.current.partition_range(partition);
        let now = self.cluster.clock().wall_ms();
        let purge_before = now.saturating_sub(self.settings.tombstone_grace.as_millis() as u64);
        let compact_before = now.saturating_sub(self.settings.compaction_age.as_millis() as u64);
        let retired = self.retired_actors();
        let storage = self.replica.storage().clone();
        // (key, stored object, what replaces it: None = purge).
        let candidates: Vec<(Vec<u8>, Object, Option<Object>)> = offload(move || {
            storage
                .scan(from, to)
                .flatten()
                .filter_map(|(key, o)| {
                    if o.is_empty() {
                        return None;
                    }
                    if o.values()
                        .all(|s| s.is_tombstone() && s.written_at_ms < purge_before)
                    {
                        return Some((key, o, None));
                    }
                    if o.values().all(|s| s.written_at_ms < compact_before) {
                        let compacted = o.compact(|a| retired(a));
                        if compacted != o {
                            return Some((key, o, Some(compacted)));
                        }
                    }
                    None
                })
                .take(PURGE_BATCH)
                .collect()
        })
        .await
        .unwrap_or_default();
        let others: Vec<NodeId> = replicas
            .current
            .iter()
            .filter(|id| *id != me)
            .cloned()
            .collect();
        for (key, object, replacement) in candidates {
            self.replace_everywhere(&others, key, object, replacement)
                .await;
        }
    }

    /// Replaces `object` of `key` with `replacement` on every replica, only
    /// where it is still exactly `object`: the peers first, this node last,
    /// so anything that changed meanwhile (or a peer that cannot be
    /// reached) keeps this node's copy and anti-entropy restores agreement.
    async fn replace_everywhere(
        &self,
        others: &[NodeId],
        key: Vec<u8>,
        object: Object,
        replacement: Option<Object>,
    ) {
        let timeout = self.settings.timeout;
        for peer in others {
            let id = self.peers.fresh_id();
            match self.peers.get(peer, id, &key, timeout).await {
                Ok(Some(o)) if o == object => {}
                _ => return,
            }
        }
        let request = ReplaceIf {
            key,
            expected: object,
            replacement,
        };
        for peer in others {
            if !matches!(
                self.peers.replace_if(peer, request.clone(), timeout).await,
                Ok(true)
            ) {
                return;
            }
        }
        let purge = request.replacement.is_none();
        if matches!(self.replica.replace_if(request).await, Ok(true)) {
            let counter = if purge {
                &self.progress.tombstones_purged
            } else {
                &self.progress.clocks_compacted
            };
            counter.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Which clock actors are retired: their node left the ring, or now
    /// runs a newer incarnation (it lost its data dir). A node whose
    /// incarnation is not known yet retires nothing.
    fn retired_actors(&self) -> impl Fn(&Actor) -> bool + Send + 'static {
        let members: Vec<NodeId> = self.cluster.members().into_iter().map(|m| m.id).collect();
        let view = self.cluster.view();
        let mine = (self.cluster.id().clone(), self.replica.actor().incarnation);
        let current: HashMap<NodeId, u64> = view
            .members
            .iter()
            .filter_map(|(id, m)| Some((id.clone(), m.incarnation?)))
            .chain(std::iter::once(mine))
            .collect();
        move |actor: &Actor| {
            if !members.contains(&actor.node) {
                return true;
            }
            current
                .get(&actor.node)
                .is_some_and(|inc| *inc != actor.incarnation)
        }
    }
}
