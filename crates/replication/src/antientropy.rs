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
//! it is newer. Repairs are paced (`keys_per_sec`). A peer whose storage
//! refuses a repair (its disk is full) is left alone for a growing delay:
//! its exchanges count as steps that could not complete.
//!
//! The scheduler walks this node's partitions round robin, one exchange per
//! partition and live peer replica per tick; `kvctl repair` runs a full pass
//! at once and reports progress.
//!
//! **Tombstone purge.** After exchanging a partition, its first live current
//! replica purges the tombstones of that partition that are safe to forget:
//! every version of the key is a tombstone that this node has held,
//! unchanged, for the grace period (`tombstone_grace`), and every current replica of the partition holds
//! exactly that object (checked by reading it from each). A replica that is
//! down, or a partition that is moving, blocks the purge: a node that was
//! down longer than the grace period therefore still finds the tombstone
//! when it returns, and its stale value is superseded instead of coming back
//! (the rule is "purge only with every replica's agreement", not a time
//! limit). The grace period is never shorter than hints live
//! (the node derives both from `[handoff] max_age_secs`): a hint still holding a value the tombstone
//! superseded would otherwise deliver it, after the purge, to a replica with
//! nothing left to supersede it. The purge replaces each replica's record
//! only if it is still the one checked, so a write racing the purge
//! survives.
//!
//! **Ages on one clock.** A tombstone's age is measured on the purging
//! node's own monotonic clock, from the first pass that found it unchanged
//! there (never from a sibling's `written_at_ms`, which the coordinating
//! replica's wall clock wrote): a coordinator whose clock runs hours
//! behind cannot make a tombstone look old enough to purge early. These
//! first sightings live in memory: a restart, or a new first replica,
//! starts them again, which only delays a purge. Clock compaction waits
//! the same way.
//!
//! **Clock compaction** (bounded causal metadata, ARCHITECTURE.md
//! "Invariants"). A clock
//! keeps one entry per actor (node incarnation) that ever coordinated the
//! key; a node that lost its data comes back as a new actor, so entries of
//! retired actors pile up. The same pass drops them under the same
//! agreement rule (every replica holds the identical object, all alive,
//! nothing moving), only for entries holding no current value, and only
//! once this node has held the key unchanged for `compaction_age` (longer
//! than hints live), so no copy anywhere still holds a value they superseded:
//! compaction never loses a write and cannot make a sibling. A compacted
//! clock holds the live actors that wrote the key: at most the replicas
//! that coordinated it.

mod exchange;
mod purge;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use kv_types::NodeId;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::{info, warn};

use crate::backoff::Backoff;
use crate::periodic::spawn_every;
use crate::replica::Replica;
use crate::{AntiEntropySettings, Cluster, Peers};

/// Progress of the current or last full pass, and lifetime counters.
#[derive(Debug, Default)]
pub struct Progress {
    running: AtomicBool,
    /// A full pass was asked for and has not started yet.
    requested: AtomicBool,
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

/// Where a full pass (`kvctl repair`) stands on one node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RepairProgress {
    /// The node running it.
    pub node: NodeId,
    /// Whether a full pass is running (or asked for).
    pub running: bool,
    /// Partitions of the pass compared with every live peer replica.
    pub partitions_done: u64,
    /// Partitions this node replicates (the pass's length).
    pub partitions_total: u64,
    /// Keys repaired since the node started.
    pub keys_repaired: u64,
    /// Segments found different since the node started.
    pub segments_differing: u64,
    /// Steps of the current or last pass that could not complete.
    pub failures: u64,
}

/// The anti-entropy service of one node.
pub struct AntiEntropy {
    cluster: Arc<Cluster>,
    peers: Arc<Peers>,
    replica: Arc<Replica>,
    settings: AntiEntropySettings,
    /// Progress, shared with status reports and metrics.
    progress: Arc<Progress>,
    /// Wakes the loop: a full pass was asked for, or partitions gained.
    wake: Arc<Notify>,
    /// Peers whose storage refused a repair (disk full), left alone for a
    /// while.
    backoff: Backoff,
    /// Purge and compaction candidates per partition, with when this node
    /// first saw each unchanged, on its own monotonic clock (`purge`).
    seen: purge::Seen,
}

impl AntiEntropy {
    /// An anti-entropy service for this node.
    pub fn new(
        cluster: Arc<Cluster>,
        peers: Arc<Peers>,
        replica: Arc<Replica>,
        settings: AntiEntropySettings,
    ) -> Self {
        AntiEntropy {
            wake: cluster.gained_notify().clone(),
            cluster,
            peers,
            replica,
            settings,
            progress: Arc::new(Progress::default()),
            backoff: Backoff::default(),
            seen: purge::Seen::default(),
        }
    }

    /// The counters.
    pub fn progress(&self) -> &Arc<Progress> {
        &self.progress
    }

    /// Runs scheduled exchanges, full passes on request, and repairs of
    /// gained partitions, until `stop`.
    pub fn spawn(self: Arc<Self>, tasks: &TaskTracker, stop: CancellationToken) {
        let (interval, wake) = (self.settings.interval, Some(self.wake.clone()));
        let token = stop.clone();
        let next = Arc::new(AtomicU64::new(0));
        spawn_every(tasks, stop, interval, wake, move || {
            let (this, stop, next) = (self.clone(), token.clone(), next.clone());
            async move { this.step(&next, &stop).await }
        });
    }

    /// What one wake-up of the loop does: a full pass when asked for, else
    /// the gained partitions, else the next scheduled exchange.
    async fn step(&self, next: &AtomicU64, stop: &CancellationToken) {
        if self.progress.requested.swap(false, Ordering::AcqRel) {
            self.run_full_pass(stop).await;
            return;
        }
        let gained = self.cluster.take_gained();
        if !gained.is_empty() {
            self.repair_gained(&gained, stop).await;
            return;
        }
        let start = next.load(Ordering::Relaxed) as u32;
        let after = self.scheduled_exchange(start, stop).await;
        next.store(u64::from(after), Ordering::Relaxed);
    }

    /// Asks for a full pass now; returns the progress.
    pub fn start_full_pass(&self) -> RepairProgress {
        let p = &self.progress;
        if !p.running.load(Ordering::Acquire) {
            // Mark it running now so a status poll right after sees it.
            p.running.store(true, Ordering::Release);
            p.partitions_done.store(0, Ordering::Release);
            p.partitions_total.store(0, Ordering::Release);
            p.pass_failures.store(0, Ordering::Release);
            p.requested.store(true, Ordering::Release);
            self.wake.notify_one();
        }
        self.report()
    }

    /// The current progress.
    pub fn report(&self) -> RepairProgress {
        let p = &self.progress;
        RepairProgress {
            node: self.cluster.id().clone(),
            running: p.running.load(Ordering::Acquire),
            partitions_done: p.partitions_done.load(Ordering::Acquire),
            partitions_total: p.partitions_total.load(Ordering::Acquire),
            keys_repaired: p.keys_repaired.load(Ordering::Acquire),
            segments_differing: p.segments_differing.load(Ordering::Acquire),
            failures: p.pass_failures.load(Ordering::Acquire),
        }
    }

    /// The partitions this node replicates (now or once a move completes),
    /// with their live peer replicas and how many of their peer replicas
    /// are down.
    fn my_partitions(&self) -> Vec<(u32, Vec<NodeId>, u64)> {
        let placement = self.cluster.placement();
        let me = self.cluster.id();
        (0..placement.target.partitions())
            .filter_map(|p| {
                let pref = placement.replicas(p).all();
                pref.contains(me).then(|| {
                    let (live, dead): (Vec<NodeId>, Vec<NodeId>) = pref
                        .into_iter()
                        .filter(|id| id != me)
                        .partition(|id| self.cluster.is_alive(id));
                    (p, live, dead.len() as u64)
                })
            })
            .collect()
    }

    /// Exchanges the next partition of this node from `start` (round
    /// robin) with each live peer replica, then purges it; returns where
    /// the next exchange starts.
    async fn scheduled_exchange(&self, start: u32, stop: &CancellationToken) -> u32 {
        let mine = self.my_partitions();
        let Some(index) = mine
            .iter()
            .position(|(p, _, _)| *p >= start)
            .or(if mine.is_empty() { None } else { Some(0) })
        else {
            return 0;
        };
        let (partition, peers, _) = &mine[index];
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
    async fn repair_gained(&self, gained: &[u32], stop: &CancellationToken) {
        let mine = self.my_partitions();
        for (partition, peers, _) in mine.iter().filter(|(p, _, _)| gained.contains(p)) {
            for peer in peers {
                if stop.is_cancelled() {
                    return;
                }
                self.exchange(*partition, peer).await;
            }
        }
    }

    /// A full pass: every partition of this node with every live peer
    /// replica. A peer replica that is down counts as a step that could not
    /// complete: nothing was compared with it.
    pub async fn run_full_pass(&self, stop: &CancellationToken) {
        let mine = self.my_partitions();
        let p = &self.progress;
        p.running.store(true, Ordering::Release);
        p.partitions_total
            .store(mine.len() as u64, Ordering::Release);
        p.partitions_done.store(0, Ordering::Release);
        p.pass_failures.store(0, Ordering::Release);
        let before = p.keys_repaired.load(Ordering::Acquire);
        info!(partitions = mine.len(), "anti-entropy full pass started");
        for (partition, peers, down) in &mine {
            if stop.is_cancelled() {
                break;
            }
            if *down > 0 {
                p.failures.fetch_add(*down, Ordering::Relaxed);
                p.pass_failures.fetch_add(*down, Ordering::Relaxed);
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

    /// Counts a step that could not complete (see [`Progress::failures`]).
    fn failed(&self) {
        self.progress.failures.fetch_add(1, Ordering::Relaxed);
        self.progress.pass_failures.fetch_add(1, Ordering::Relaxed);
    }
}
