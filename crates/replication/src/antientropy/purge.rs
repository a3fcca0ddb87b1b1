//! Tombstone purge and clock compaction, both only with every replica's
//! agreement (see the module documentation of [`super`]).

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::Ordering;
use std::time::Duration;

use kv_types::{Actor, NodeId, Object};
use tokio::time::Instant;

use super::AntiEntropy;
use crate::network::ReplaceIf;
use crate::offload::offload;

/// Candidates examined per purge of one partition.
const PURGE_BATCH: usize = 1000;

/// Purge and compaction candidates of each partition, with when this node
/// first found each one (its object unchanged since) on its own monotonic
/// clock: at most [`PURGE_BATCH`] per partition this node purges.
#[derive(Debug, Default)]
pub(super) struct Seen(Mutex<HashMap<u32, Sightings>>);

/// One partition's candidates: key -> (digest of its object, first seen).
type Sightings = HashMap<Vec<u8>, (u64, Instant)>;

impl Seen {
    /// Forgets a partition (this node no longer purges it).
    fn forget(&self, partition: u32) {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&partition);
    }

    /// Records the partition's `candidates` (key, digest of the object,
    /// how long it must have been held) seen `now`, forgetting the ones no
    /// longer there; answers which have been held that long unchanged.
    fn due(
        &self,
        partition: u32,
        candidates: &[(Vec<u8>, u64, Duration)],
        now: Instant,
    ) -> Vec<bool> {
        let mut all = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let before = all.remove(&partition).unwrap_or_default();
        let mut after = HashMap::with_capacity(candidates.len());
        let due = candidates
            .iter()
            .map(|(key, digest, wait)| {
                let first = match before.get(key) {
                    Some((d, first)) if d == digest => *first,
                    _ => now,
                };
                after.insert(key.clone(), (*digest, first));
                now.duration_since(first) >= *wait
            })
            .collect();
        if !after.is_empty() {
            all.insert(partition, after);
        }
        due
    }
}

/// A digest of an object's encoding: tells whether a key changed between
/// two passes.
fn digest(object: &Object) -> u64 {
    kv_types::codec::encode(object).map_or(0, |bytes| kv_types::hash::key_hash(&bytes))
}

impl AntiEntropy {
    /// Purges the partition's tombstones that every replica holds and that
    /// this node has held unchanged for the grace period, and compacts
    /// clocks held unchanged for the compaction age (both measured on this
    /// node's monotonic clock only).
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
            self.seen.forget(partition);
            return;
        }
        let (from, to) = placement.current.partition_range(partition);
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
                    if o.values().all(|s| s.is_tombstone()) {
                        return Some((key, o, None));
                    }
                    let compacted = o.compact(|a| retired(a));
                    (compacted != o).then_some((key, o, Some(compacted)))
                })
                .take(PURGE_BATCH)
                .collect()
        })
        .await
        .unwrap_or_default();
        let (grace, compaction) = (self.settings.tombstone_grace, self.settings.compaction_age);
        let marks: Vec<(Vec<u8>, u64, Duration)> = candidates
            .iter()
            .map(|(key, object, replacement)| {
                let wait = if replacement.is_none() {
                    grace
                } else {
                    compaction
                };
                (key.clone(), digest(object), wait)
            })
            .collect();
        let due = self.seen.due(partition, &marks, self.cluster.clock().now());
        let candidates = candidates
            .into_iter()
            .zip(due)
            .filter_map(|(candidate, due)| due.then_some(candidate));
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
