//! Streaming partitions to their new owners, and finishing joins and
//! drains.
//!
//! Every node pulls the partitions that are pending for it (it is a target
//! replica but not yet a current one, see [`crate::placement`]) page by
//! page, merging each object causally, in two steps per partition:
//!
//! 1. **A full pull from one live current holder**: the one the target ring
//!    displaces when it is alive (Cassandra's "consistent range movement":
//!    the new replica set then holds every copy the old one held, so a
//!    write that was on W of the old replicas is on W of the new), else the
//!    first live one.
//! 2. **A digest comparison with every other live holder**: the
//!    partition's segment digests (the anti-entropy Merkle tree's middle
//!    level, [`crate::antientropy`]) on both sides, and a pull of each
//!    segment that differs. Afterwards this node holds the union of what
//!    every live holder held, as a full pull from each would give, for one
//!    round trip per agreeing holder instead of every object again (three
//!    times the merges at N = 3 before 2026-12-06).
//!
//! Writes that land meanwhile reach it anyway (pending ranges), so one
//! such pass per partition is enough. Pulls are paced per stream
//! (`pages_per_sec`) and, together, by one node-wide budget of objects this
//! node pulls per second (`objects_per_sec`; Cassandra's
//! `stream_throughput_outbound` bounds what a node sends, in bytes: here
//! the receiver bounds what it merges, since at 100-byte values it is the
//! merge work that competes with the foreground requests). A partition
//! whose comparison with some holder failed is retried with the
//! comparisons only: its full pull is not repeated under the same target
//! ring.
//!
//! - A JOINING node that has pulled all its pending partitions becomes UP,
//!   once the membership has shown it at least one live UP member (before
//!   that it only knows itself; `--join` is for joining a running cluster).
//! - A DRAINING node becomes LEFT once every live node reports no pending
//!   partition under the same target ring and it holds no hints; its
//!   undeliverable hints are passed on to another node first (see
//!   [`crate::handoff`]). A needed new owner that is down holds the drain
//!   until it is back.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kv_storage::digest::{partition_segments, segment_hashes};
use kv_types::{NodeId, NodeStatus};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::{debug, info, warn};

use crate::membership::Announcement;
use crate::network::{ScanRequest, TransferStatus};
use crate::periodic::spawn_every;
use crate::rate::Pacer;
use crate::replica::Replica;
use crate::{Cluster, Peers, TransferSettings};

/// Partitions pulled at the same time.
const PARALLEL_PULLS: usize = 8;

/// Objects per page of a pull.
const PAGE: u32 = 500;

/// What this node still has to pull.
#[derive(Debug, Default)]
struct State {
    /// Target ring the sets refer to.
    ring_version: u64,
    /// Partitions pulled completely under that ring.
    done: BTreeSet<u32>,
    /// Partitions whose full pull from one holder finished under that ring
    /// (a retry only compares digests with the others).
    full_pulled: BTreeSet<u32>,
    /// Partitions pending for this node under that ring.
    pending: BTreeSet<u32>,
}

/// The streaming service of one node.
pub struct Transfer {
    cluster: Arc<Cluster>,
    peers: Arc<Peers>,
    replica: Arc<Replica>,
    settings: TransferSettings,
    state: Mutex<State>,
    /// Objects received since the node started.
    objects_received: AtomicU64,
    /// Segments found different from a holder's after the full pull (and
    /// pulled from it) since the node started.
    segments_reconciled: AtomicU64,
    /// The node-wide objects-per-second budget all pulls share.
    budget: Pacer,
    /// The progress last announced, `(done, total)`.
    announced: Mutex<Option<(u64, u64)>>,
}

impl Transfer {
    /// A streaming service.
    pub fn new(
        cluster: Arc<Cluster>,
        peers: Arc<Peers>,
        replica: Arc<Replica>,
        settings: TransferSettings,
    ) -> Self {
        Transfer {
            cluster,
            peers,
            replica,
            budget: Pacer::new(settings.objects_per_sec),
            settings,
            state: Mutex::new(State::default()),
            objects_received: AtomicU64::new(0),
            segments_reconciled: AtomicU64::new(0),
            announced: Mutex::new(None),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Objects received by pulls since the node started.
    pub fn objects_received(&self) -> u64 {
        self.objects_received.load(Ordering::Relaxed)
    }

    /// Segments found different from a holder's after a partition's full
    /// pull (each then pulled from that holder) since the node started.
    pub fn segments_reconciled(&self) -> u64 {
        self.segments_reconciled.load(Ordering::Relaxed)
    }

    /// Partitions still to pull and the target ring version they refer to
    /// (the answer to a peer's transfer-status call).
    pub fn status(&self) -> TransferStatus {
        let placement = self.cluster.placement();
        let version = placement.target.version();
        let pending = placement.pending_for(self.cluster.id());
        let state = self.state();
        let left = if state.ring_version == version {
            pending.iter().filter(|p| !state.done.contains(p)).count()
        } else {
            pending.len()
        };
        TransferStatus {
            pending: left as u64,
            ring_version: version,
        }
    }

    /// `(done, total)` of this node's pulls under the current target ring.
    pub fn progress(&self) -> (u64, u64) {
        let state = self.state();
        let done = state.pending.intersection(&state.done).count();
        (done as u64, state.pending.len() as u64)
    }

    /// Announces the progress when it changed (nothing to pull: `0/0`).
    async fn announce_progress(&self) {
        let (done, total) = self.progress();
        let now = if total == 0 || done == total {
            (0, 0)
        } else {
            (done, total)
        };
        {
            let mut last = self.announced.lock().unwrap_or_else(|p| p.into_inner());
            if *last == Some(now) {
                return;
            }
            *last = Some(now);
        }
        self.cluster
            .announce(Announcement::Transfer {
                done: now.0,
                total: now.1,
            })
            .await;
    }

    /// Runs until `stop`.
    pub fn spawn(self: Arc<Self>, tasks: &TaskTracker, stop: CancellationToken) {
        let interval = self.settings.interval;
        let token = stop.clone();
        spawn_every(tasks, stop, interval, None, move || {
            let (this, stop) = (self.clone(), token.clone());
            async move { this.round(&stop).await }
        });
    }

    /// One round: pull what is pending, then finish a join or a drain.
    pub async fn round(&self, stop: &CancellationToken) {
        let placement = self.cluster.placement();
        let me = self.cluster.id().clone();
        let pending: BTreeSet<u32> = placement.pending_for(&me).into_iter().collect();
        let version = placement.target.version();
        let todo: Vec<u32> = {
            let mut state = self.state();
            if state.ring_version != version {
                // Partitions pulled under the previous target stay pulled.
                let kept: BTreeSet<u32> = state.done.intersection(&pending).copied().collect();
                *state = State {
                    ring_version: version,
                    full_pulled: kept.clone(),
                    done: kept,
                    pending: pending.clone(),
                };
            }
            pending.difference(&state.done).copied().collect()
        };
        if !todo.is_empty() {
            info!(partitions = todo.len(), "pulling pending partitions");
        }
        // A few partitions at a time: each pull is mostly waiting on peers.
        for batch in todo.chunks(PARALLEL_PULLS) {
            if stop.is_cancelled() || self.cluster.placement().target.version() != version {
                return;
            }
            self.announce_progress().await;
            let pulled = futures::future::join_all(batch.iter().map(|p| self.pull(*p))).await;
            let mut state = self.state();
            for (p, ok) in batch.iter().zip(pulled) {
                if ok {
                    state.done.insert(*p);
                }
            }
        }
        self.announce_progress().await;
        match self.cluster.status() {
            NodeStatus::Joining => self.finish_join(version).await,
            NodeStatus::Draining => self.finish_drain(version).await,
            NodeStatus::Up | NodeStatus::Left => {}
        }
    }

    /// UP once everything pending is pulled, under an unchanged target.
    async fn finish_join(&self, version: u64) {
        // Until the membership has shown it a live UP member, a joining
        // node sees only itself and would wrongly find nothing to pull.
        let me = self.cluster.id();
        let knows_cluster = self
            .cluster
            .members()
            .iter()
            .any(|m| m.id != *me && m.status == NodeStatus::Up && self.cluster.is_alive(&m.id));
        let left = self.status().pending;
        if knows_cluster && left == 0 && self.cluster.placement().target.version() == version {
            info!("every pending partition pulled: this node is UP");
            if let Err(e) = self.cluster.set_status(NodeStatus::Up).await {
                warn!(error = %e, "cannot become UP");
            }
        }
    }

    /// Pulls partition `p`: in full from one live current holder, then the
    /// segments where another live holder differs (module docs); true when
    /// every live holder was read or compared to the end.
    async fn pull(&self, p: u32) -> bool {
        let placement = self.cluster.placement();
        let me = self.cluster.id();
        let mut holders: Vec<NodeId> = placement
            .replicas(p)
            .current
            .into_iter()
            .filter(|id| id != me && self.cluster.is_alive(id))
            .collect();
        if holders.is_empty() {
            debug!(partition = p, "no live holder to pull from yet");
            return false;
        }
        // The holder the target ring displaces, when alive.
        let target = placement.target.preference_list(p);
        let source = holders
            .iter()
            .position(|h| !target.contains(h))
            .unwrap_or(0);
        let source = holders.remove(source);
        let version = placement.target.version();
        let pulled = {
            let state = self.state();
            state.ring_version == version && state.full_pulled.contains(&p)
        };
        if !pulled {
            let (from_hash, to_hash) = placement.target.partition_range(p);
            if !self.pull_from(&source, p, from_hash, to_hash).await {
                return false;
            }
            let mut state = self.state();
            if state.ring_version == version {
                state.full_pulled.insert(p);
            }
        }
        let compared = holders.iter().map(|holder| self.reconcile(holder, p));
        futures::future::join_all(compared)
            .await
            .into_iter()
            .all(|ok| ok)
    }

    /// Compares partition `p`'s segment digests with `holder`'s and pulls
    /// the segments that differ from it (a run of adjacent ones as one
    /// range); true when done to the end.
    async fn reconcile(&self, holder: &NodeId, p: u32) -> bool {
        let segments = partition_segments(p, self.cluster.placement().target.partitions());
        let (first, count) = (segments.start, segments.end - segments.start);
        let timeout = self.settings.timeout;
        let remote = match self
            .peers
            .segment_digests(holder, first, count, timeout)
            .await
        {
            Ok(d) => d,
            Err(e) => {
                debug!(%holder, partition = p, error = %e, "digest call failed; retrying later");
                return false;
            }
        };
        let local = match self.replica.segment_digests(first, count).await {
            Ok(d) if d.len() == remote.len() => d,
            Ok(_) => {
                warn!(%holder, partition = p, "a holder sent the wrong number of segment digests");
                return false;
            }
            Err(e) => {
                warn!(partition = p, error = %e, "reading segment digests failed; retrying later");
                return false;
            }
        };
        let differing: Vec<u32> = (0..count)
            .zip(local.iter().zip(&remote))
            .filter(|(_, (l, r))| l != r)
            .map(|(i, _)| first + i)
            .collect();
        for run in differing.chunk_by(|a, b| a + 1 == *b) {
            let (Some(&low), Some(&high)) = (run.first(), run.last()) else {
                continue;
            };
            let (from, _) = segment_hashes(low);
            let (_, to) = segment_hashes(high);
            if !self.pull_from(holder, p, from, to).await {
                return false;
            }
            self.segments_reconciled
                .fetch_add(run.len() as u64, Ordering::Relaxed);
        }
        true
    }

    /// Pulls one hash range from one holder, page by page, within the
    /// stream's pace and the node's budget.
    async fn pull_from(&self, holder: &NodeId, p: u32, from_hash: u64, to_hash: u64) -> bool {
        let pace = Duration::from_secs(1) / self.settings.pages_per_sec.max(1);
        let mut after: Option<Vec<u8>> = None;
        loop {
            let request = ScanRequest {
                from_hash,
                to_hash,
                after: after.clone(),
                limit: PAGE,
            };
            let page = match self
                .peers
                .scan(holder, request, self.settings.timeout)
                .await
            {
                Ok(page) => page,
                Err(e) => {
                    debug!(%holder, partition = p, error = %e, "pull failed; retrying later");
                    return false;
                }
            };
            after = page.objects.last().map(|(k, _)| k.clone());
            let count = page.objects.len() as u64;
            if let Err(e) = self.replica.replicate_page(page.objects).await {
                warn!(%holder, partition = p, error = %e, "storing a pulled page failed; retrying later");
                return false;
            }
            self.objects_received.fetch_add(count, Ordering::Relaxed);
            self.budget.spend(count).await;
            if !page.more || after.is_none() {
                break;
            }
            tokio::time::sleep(pace).await;
        }
        true
    }

    /// LEFT once every live node has pulled what it needs and no hint is
    /// held here.
    async fn finish_drain(&self, version: u64) {
        if self.replica.storage().hint_count() > 0 {
            return;
        }
        let view = self.cluster.view();
        let me = self.cluster.id();
        for (id, peer) in &view.members {
            if id == me || !peer.alive || peer.member.status == NodeStatus::Left {
                continue;
            }
            match self.peers.transfer_status(id, self.settings.timeout).await {
                Ok(status) if status.pending == 0 && status.ring_version == version => {}
                Ok(status) => {
                    debug!(node = %id, pending = status.pending, "drain waits for a node still pulling");
                    return;
                }
                Err(_) => return,
            }
        }
        info!(
            "every partition of this draining node has moved: this node is LEFT and may be stopped"
        );
        if let Err(e) = self.cluster.set_status(NodeStatus::Left).await {
            warn!(error = %e, "cannot become LEFT");
        }
    }
}
