//! Anti-entropy: replicas of a partition compare Merkle trees and repair
//! the keys that differ, so data converges without reads (Dynamo section
//! 4.7).
//!
//! The tree of a partition has three levels: its root (`combine` of the
//! segment digests), the 65536/Q segment digests under it, and the keys of
//! each segment with their item digests (xxh3 of key and causal metadata).
//! Storage keeps the segment digests up to date as writes land, so an
//! exchange costs one round trip when the partition agrees: fetch the
//! peer's segment digests and compare. Differing segments are drilled into
//! by key; each differing key is read on both sides, merged causally
//! (`DvvSet::sync`, never last-writer-wins) and the merge written wherever
//! it is newer. Repairs are paced (`keys_per_sec`).
//!
//! The scheduler walks this node's partitions round robin, one exchange per
//! partition and live peer replica per tick; `kvctl repair` runs a full pass
//! at once and reports progress.
//!
//! **Tombstone purge.** After exchanging a partition, its first live current
//! replica purges the tombstones of that partition that are safe to forget:
//! every version of the key is a tombstone older than the grace period
//! (`tombstone_grace`), and every current replica of the partition holds
//! exactly that object (checked by reading it from each). A replica that is
//! down, or a partition that is moving, blocks the purge: a node that was
//! down longer than the grace period therefore still finds the tombstone
//! when it returns, and its stale value is superseded instead of coming back
//! (the rule is "purge only with every replica's agreement", not a time
//! limit). The grace period is never shorter than hints live
//! (`NodeConfig::hint_lifetime`): a hint still holding a value the tombstone
//! superseded would otherwise deliver it, after the purge, to a replica with
//! nothing left to supersede it. The purge replaces each replica's record
//! only if it is still the one checked, so a write racing the purge
//! survives.
//!
//! **Clock compaction** (bounded causal metadata, SPEC item 6). A clock
//! keeps one entry per actor (node incarnation) that ever coordinated the
//! key; a node that lost its data comes back as a new actor, so entries of
//! retired actors pile up. The same pass drops them under the same
//! agreement rule (every replica holds the identical object, all alive,
//! nothing moving), only for entries holding no current value, and only
//! once the key's newest write is older than `compaction_age` (longer than
//! hints live), so no copy anywhere still holds a value they superseded:
//! compaction never loses a write and cannot make a sibling. A compacted
//! clock holds the live actors that wrote the key: at most the replicas
//! that coordinated it.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use kv_storage::Storage;
use kv_storage::digest::{partition_segments, segment_hashes};
use kv_types::{Actor, NodeId, Object};
use kv_wire::{PeerRequest, RepairReport, Response};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::{debug, info, warn};

use crate::cluster::Cluster;
use crate::config::NodeConfig;
use crate::peers::Peers;
use crate::replica::Replica;

/// Anti-entropy settings (config section `[anti_entropy]`).
#[derive(Clone, Debug)]
pub struct AntiEntropyConfig {
    /// Time between two scheduled partition exchanges.
    pub interval: Duration,
    /// Keys repaired per second at most.
    pub keys_per_sec: u32,
    /// Deadline of one call to a peer.
    pub timeout: Duration,
    /// Age after which a tombstone every replica holds may be purged.
    pub tombstone_grace: Duration,
    /// Age of a key's newest write after which retired actors may be
    /// compacted out of its clock: longer than hints live, so that no hint
    /// still carries a value those entries superseded.
    pub compaction_age: Duration,
}

impl AntiEntropyConfig {
    /// The settings of `config`: the grace period and the compaction age
    /// are never shorter than hints live ([`NodeConfig::hint_lifetime`]), or a
    /// late hint would bring a superseded value back to replicas with
    /// nothing left to supersede it.
    pub fn from_config(config: &NodeConfig) -> Self {
        AntiEntropyConfig {
            interval: Duration::from_millis(config.anti_entropy.interval_ms),
            keys_per_sec: config.anti_entropy.keys_per_sec,
            timeout: config.replica_timeout(),
            tombstone_grace: Duration::from_secs(config.anti_entropy.tombstone_grace_secs)
                .max(config.hint_lifetime()),
            compaction_age: config.hint_lifetime(),
        }
    }
}

/// Progress of the current or last full pass, and lifetime counters.
#[derive(Debug, Default)]
pub struct Progress {
    running: AtomicBool,
    partitions_total: AtomicU64,
    partitions_done: AtomicU64,
    /// Keys repaired since the node started.
    pub keys_repaired: AtomicU64,
    /// Exchanges completed since the node started.
    pub exchanges: AtomicU64,
    /// Segments found different since the node started.
    pub segments_differing: AtomicU64,
    /// Tombstones purged since the node started.
    pub tombstones_purged: AtomicU64,
    /// Clocks compacted (retired actors dropped) since the node started.
    pub clocks_compacted: AtomicU64,
    /// Steps (a partition's or segment's comparison, a key's repair) that
    /// could not complete since the node started, because a peer or the
    /// local store did not answer: what they cover was not compared.
    pub failures: AtomicU64,
    /// The same, in the current or last full pass.
    pass_failures: AtomicU64,
}

/// The anti-entropy service of one node.
pub struct AntiEntropy {
    cluster: Arc<Cluster>,
    peers: Arc<Peers>,
    replica: Arc<Replica>,
    storage: Arc<dyn Storage>,
    config: AntiEntropyConfig,
    /// This node's incarnation (its own actor is never retired).
    incarnation: u64,
    /// Progress, shared with status reports.
    pub progress: Arc<Progress>,
    /// Triggers a full pass (kvctl repair).
    full_pass: tokio::sync::Notify,
}

impl AntiEntropy {
    /// An anti-entropy service for this node.
    pub fn new(
        cluster: Arc<Cluster>,
        peers: Arc<Peers>,
        replica: Arc<Replica>,
        storage: Arc<dyn Storage>,
        config: AntiEntropyConfig,
        incarnation: u64,
    ) -> Self {
        AntiEntropy {
            cluster,
            peers,
            replica,
            storage,
            config,
            incarnation,
            progress: Arc::new(Progress::default()),
            full_pass: tokio::sync::Notify::new(),
        }
    }

    /// Runs scheduled exchanges, and full passes on request, until `stop`.
    pub fn spawn(self: Arc<Self>, tasks: &TaskTracker, stop: CancellationToken) {
        tasks.spawn(async move {
            let mut next_partition = 0u32;
            let mut tick = tokio::time::interval(self.config.interval);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    _ = stop.cancelled() => break,
                    _ = self.full_pass.notified() => self.run_full_pass(&stop).await,
                    _ = self.cluster.gained_notify.notified() => self.repair_gained(&stop).await,
                    _ = tick.tick() => {
                        next_partition = self.scheduled_exchange(next_partition, &stop).await;
                    }
                }
            }
        });
    }

    /// Asks for a full pass now; returns the progress report.
    pub fn start_full_pass(&self) -> RepairReport {
        if !self.progress.running.load(Ordering::Acquire) {
            // Mark it running now so a status poll right after sees it.
            self.progress.running.store(true, Ordering::Release);
            self.progress.partitions_done.store(0, Ordering::Release);
            self.progress.partitions_total.store(0, Ordering::Release);
            self.progress.pass_failures.store(0, Ordering::Release);
            self.full_pass.notify_one();
        }
        self.report()
    }

    /// The current progress.
    pub fn report(&self) -> RepairReport {
        let p = &self.progress;
        RepairReport {
            node: self.cluster.me().id.to_string(),
            running: p.running.load(Ordering::Acquire),
            partitions_done: p.partitions_done.load(Ordering::Acquire),
            partitions_total: p.partitions_total.load(Ordering::Acquire),
            keys_repaired: p.keys_repaired.load(Ordering::Acquire),
            segments_differing: p.segments_differing.load(Ordering::Acquire),
            failures: p.pass_failures.load(Ordering::Acquire),
        }
    }

    /// The partitions this node replicates (now or once a move completes),
    /// with their live peer replicas.
    fn my_partitions(&self) -> Vec<(u32, Vec<NodeId>)> {
        let placement = self.cluster.placement();
        let me = &self.cluster.me().id;
        (0..placement.target.partitions())
            .filter_map(|p| {
                let pref = placement.replicas(p).all();
                pref.contains(me).then(|| {
                    let peers = pref
                        .iter()
                        .filter(|id| *id != me && self.cluster.is_alive(id))
                        .cloned()
                        .collect();
                    (p, peers)
                })
            })
            .collect()
    }

    async fn scheduled_exchange(&self, start: u32, stop: &CancellationToken) -> u32 {
        let mine = self.my_partitions();
        let Some(index) = mine
            .iter()
            .position(|(p, _)| *p >= start)
            .or(if mine.is_empty() { None } else { Some(0) })
        else {
            return 0;
        };
        let (partition, peers) = &mine[index];
        for peer in peers {
            if stop.is_cancelled() {
                break;
            }
            self.exchange(*partition, peer).await;
        }
        self.purge_tombstones(*partition).await;
        partition + 1
    }

    /// Exchanges the partitions this node gained without a pull with every
    /// live peer replica.
    async fn repair_gained(&self, stop: &CancellationToken) {
        let gained = self.cluster.take_gained();
        let mine = self.my_partitions();
        for (partition, peers) in mine.iter().filter(|(p, _)| gained.contains(p)) {
            for peer in peers {
                if stop.is_cancelled() {
                    return;
                }
                self.exchange(*partition, peer).await;
            }
        }
    }

    async fn run_full_pass(&self, stop: &CancellationToken) {
        let mine = self.my_partitions();
        let p = &self.progress;
        p.running.store(true, Ordering::Release);
        p.partitions_total
            .store(mine.len() as u64, Ordering::Release);
        p.partitions_done.store(0, Ordering::Release);
        p.pass_failures.store(0, Ordering::Release);
        let before = p.keys_repaired.load(Ordering::Acquire);
        info!(partitions = mine.len(), "anti-entropy full pass started");
        for (partition, peers) in &mine {
            if stop.is_cancelled() {
                break;
            }
            for peer in peers {
                self.exchange(*partition, peer).await;
            }
            p.partitions_done.fetch_add(1, Ordering::AcqRel);
        }
        let repaired = p.keys_repaired.load(Ordering::Acquire) - before;
        let failures = p.pass_failures.load(Ordering::Acquire);
        if failures > 0 {
            warn!(
                repaired,
                failures, "anti-entropy full pass done, with steps that could not complete"
            );
        } else {
            info!(repaired, "anti-entropy full pass done");
        }
        p.running.store(false, Ordering::Release);
    }

    /// Compares one partition with one peer and repairs what differs.
    async fn exchange(&self, partition: u32, peer: &NodeId) {
        let q = self.cluster.ring().partitions();
        let segments = partition_segments(partition, q);
        let (first, count) = (segments.start, segments.end - segments.start);
        let Ok(local) = self.replica.segment_digests(first, count).await else {
            return self.failed();
        };
        let remote = match self
            .call(peer, PeerRequest::SegmentDigests { first, count })
            .await
        {
            Some(Response::Digests(d)) if d.len() == local.len() => d,
            _ => return self.failed(),
        };
        self.progress.exchanges.fetch_add(1, Ordering::Relaxed);
        if local == remote {
            return;
        }
        for (i, (l, r)) in local.iter().zip(remote.iter()).enumerate() {
            if l == r {
                continue;
            }
            self.progress
                .segments_differing
                .fetch_add(1, Ordering::Relaxed);
            let (from, to) = segment_hashes(first + i as u32);
            self.repair_segment(peer, from, to).await;
        }
    }

    async fn repair_segment(&self, peer: &NodeId, from: u64, to: u64) {
        let Ok(local) = self.replica.key_digests(from, to).await else {
            return self.failed();
        };
        let remote = match self
            .call(
                peer,
                PeerRequest::KeyDigests {
                    from_hash: from,
                    to_hash: to,
                },
            )
            .await
        {
            Some(Response::KeyDigests(d)) => d,
            _ => return self.failed(),
        };
        let mut differing: Vec<Vec<u8>> = Vec::new();
        let remote_map: std::collections::HashMap<&[u8], u64> =
            remote.iter().map(|(k, d)| (k.as_slice(), *d)).collect();
        let local_map: std::collections::HashMap<&[u8], u64> =
            local.iter().map(|(k, d)| (k.as_slice(), *d)).collect();
        for (k, d) in &local {
            if remote_map.get(k.as_slice()) != Some(d) {
                differing.push(k.clone());
            }
        }
        for (k, _) in &remote {
            if !local_map.contains_key(k.as_slice()) {
                differing.push(k.clone());
            }
        }
        let pace = Duration::from_secs(1) / self.config.keys_per_sec.max(1);
        for key in differing {
            if self.repair_key(peer, key).await {
                self.progress.keys_repaired.fetch_add(1, Ordering::Relaxed);
            }
            tokio::time::sleep(pace).await;
        }
    }

    /// Merges both sides of one key and writes the merge where it is news.
    async fn repair_key(&self, peer: &NodeId, key: Vec<u8>) -> bool {
        let storage = self.storage.clone();
        let k = key.clone();
        // A corrupt local record counts as absent: the merge repairs it.
        let local: Option<Object> =
            tokio::task::spawn_blocking(move || storage.get(&k).ok().flatten())
                .await
                .ok()
                .flatten();
        let remote = match self
            .call(peer, PeerRequest::ReplicaGet { key: key.clone() })
            .await
        {
            Some(Response::Object(o)) => o,
            _ => {
                self.failed();
                return false;
            }
        };
        let merged = match (&local, &remote) {
            (Some(l), Some(r)) => l.sync(r),
            (Some(l), None) => l.clone(),
            (None, Some(r)) => r.clone(),
            (None, None) => return false,
        };
        let mut repaired = false;
        if local.as_ref() != Some(&merged) {
            match self.replica.replicate(key.clone(), merged.clone()).await {
                Ok(_) => repaired = true,
                Err(_) => self.failed(),
            }
        }
        if remote.as_ref() != Some(&merged) {
            let request = PeerRequest::Replicate {
                key,
                object: merged,
            };
            match self.call(peer, request).await {
                Some(Response::Ack) => repaired = true,
                _ => self.failed(),
            }
        }
        repaired
    }

    /// Purges the partition's tombstones that every replica holds and that
    /// are older than the grace period (see the module documentation).
    async fn purge_tombstones(&self, partition: u32) {
        let placement = self.cluster.placement();
        let replicas = placement.replicas(partition);
        let me = &self.cluster.me().id;
        // Only the first live replica collects, and only when every replica
        // is alive and nothing moves.
        if !replicas.pending.is_empty()
            || replicas.current.iter().find(|id| self.cluster.is_alive(id)) != Some(me)
            || replicas.current.iter().any(|id| !self.cluster.is_alive(id))
        {
            return;
        }
        let (from, to) = placement.current.partition_range(partition);
        let now = crate::coordinator::now_ms();
        let purge_before = now.saturating_sub(self.config.tombstone_grace.as_millis() as u64);
        let compact_before = now.saturating_sub(self.config.compaction_age.as_millis() as u64);
        let retired = self.retired_actors();
        let storage = self.storage.clone();
        // (key, stored object, what replaces it: None = purge).
        let candidates: Vec<(Vec<u8>, Object, Option<Object>)> =
            tokio::task::spawn_blocking(move || {
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
                    .take(1000)
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
        'keys: for (key, object, replacement) in candidates {
            for peer in &others {
                match self
                    .call(peer, PeerRequest::ReplicaGet { key: key.clone() })
                    .await
                {
                    Some(Response::Object(Some(o))) if o == object => {}
                    _ => continue 'keys,
                }
            }
            for peer in &others {
                let request = PeerRequest::ReplaceIf {
                    key: key.clone(),
                    expected: object.clone(),
                    replacement: replacement.clone(),
                };
                if !matches!(
                    self.call(peer, request).await,
                    Some(Response::Replaced(true))
                ) {
                    // It changed or could not be reached: keep ours, so
                    // anti-entropy restores consistency either way.
                    continue 'keys;
                }
            }
            let purge = replacement.is_none();
            if matches!(
                self.replica.replace_if(key, object, replacement).await,
                Ok(true)
            ) {
                let counter = if purge {
                    &self.progress.tombstones_purged
                } else {
                    &self.progress.clocks_compacted
                };
                counter.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// Which clock actors are retired: their node left the ring, or now
    /// runs a newer incarnation (it lost its data dir). A node whose
    /// incarnation is not known yet retires nothing.
    fn retired_actors(&self) -> impl Fn(&Actor) -> bool + Send + 'static {
        let members: Vec<NodeId> = self.cluster.members().into_iter().map(|m| m.id).collect();
        let view = self.cluster.view();
        let mine = (self.cluster.me().id.clone(), self.incarnation);
        let current: std::collections::HashMap<NodeId, u64> = view
            .members
            .iter()
            .filter_map(|(id, m)| {
                let inc = m.extra.get(crate::node::INCARNATION_KEY)?;
                Some((id.clone(), u64::from_str_radix(inc, 16).ok()?))
            })
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

    /// Counts a step that could not complete (see [`Progress::failures`]).
    fn failed(&self) {
        self.progress.failures.fetch_add(1, Ordering::Relaxed);
        self.progress.pass_failures.fetch_add(1, Ordering::Relaxed);
    }

    async fn call(&self, peer: &NodeId, request: PeerRequest) -> Option<Response> {
        match self
            .peers
            .call(peer, rand::random(), request, self.config.timeout)
            .await
        {
            Ok(r) => Some(r),
            Err(e) => {
                debug!(%peer, error = %e, "anti-entropy call failed");
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(extra: &str) -> NodeConfig {
        toml::from_str(&format!("{}\n{extra}", crate::config::MINIMAL)).unwrap()
    }

    #[test]
    fn tombstones_and_retired_clock_entries_outlive_every_hint() {
        // A late hint must find the tombstone that superseded its value.
        let c = AntiEntropyConfig::from_config(&config(
            "[anti_entropy]\ntombstone_grace_secs = 60\n[handoff]\nmax_age_secs = 7200\n",
        ));
        assert!(c.tombstone_grace > Duration::from_secs(7200));
        assert!(c.compaction_age > Duration::from_secs(7200));
        // A grace longer than hints live is kept as configured.
        let c = AntiEntropyConfig::from_config(&config(
            "[anti_entropy]\ntombstone_grace_secs = 864000\n[handoff]\nmax_age_secs = 3600\n",
        ));
        assert_eq!(c.tombstone_grace, Duration::from_secs(864_000));
        assert!(c.compaction_age > Duration::from_secs(3600));
        assert!(c.compaction_age < Duration::from_secs(864_000));
    }
}
