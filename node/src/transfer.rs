//! Streaming partitions to their new owners, and finishing joins and
//! drains.
//!
//! Every node pulls the partitions that are pending for it (it is a target
//! replica but not yet a current one, see `placement`) from every live
//! current holder, page by page, merging each object causally. Writes that
//! land meanwhile reach it anyway (pending ranges), so one full pull per
//! partition is enough. Pulls are paced (`pages_per_sec`).
//!
//! - A JOINING node that has pulled all its pending partitions becomes UP,
//!   once gossip has shown it at least one live UP member (before that it
//!   only knows itself; `--join` is for joining a running cluster).
//! - A DRAINING node becomes LEFT once every live node reports no pending
//!   partition under the same target ring and it holds no hints; its
//!   undeliverable hints are passed on to another node first (see
//!   `handoff`). A needed new owner that is down holds the drain until it
//!   is back.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kv_storage::Storage;
use kv_types::{NodeId, NodeStatus};
use kv_wire::{PeerRequest, Response};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::{debug, info, warn};

use crate::cluster::Cluster;
use crate::peers::Peers;
use crate::replica::Replica;

/// Gossip key under which a node publishes its progress, `done/total`
/// partitions (empty when it has nothing to pull).
pub const GOSSIP_KEY: &str = "transfer";

/// Partitions pulled at the same time.
const PARALLEL_PULLS: usize = 8;

/// Objects per page of a pull.
const PAGE: u32 = 500;

/// Streaming settings.
#[derive(Clone, Debug)]
pub struct TransferConfig {
    /// Time between checks for pending partitions.
    pub interval: Duration,
    /// Pages pulled per second at most (each up to 500 objects).
    pub pages_per_sec: u32,
    /// Deadline of one call.
    pub timeout: Duration,
}

/// What this node still has to pull.
#[derive(Debug, Default)]
struct State {
    /// Target ring the sets refer to.
    ring_version: u64,
    /// Partitions pulled completely under that ring.
    done: BTreeSet<u32>,
    /// Partitions pending for this node under that ring.
    pending: BTreeSet<u32>,
}

/// The streaming service of one node.
pub struct Transfer {
    cluster: Arc<Cluster>,
    peers: Arc<Peers>,
    replica: Arc<Replica>,
    storage: Arc<dyn Storage>,
    config: TransferConfig,
    state: Mutex<State>,
    /// Objects received since the node started.
    pub objects_received: AtomicU64,
    /// Progress text for gossip (see [`GOSSIP_KEY`]).
    progress_text: tokio::sync::watch::Sender<String>,
}

impl Transfer {
    /// A streaming service.
    pub fn new(
        cluster: Arc<Cluster>,
        peers: Arc<Peers>,
        replica: Arc<Replica>,
        storage: Arc<dyn Storage>,
        config: TransferConfig,
    ) -> Self {
        Transfer {
            cluster,
            peers,
            replica,
            storage,
            config,
            state: Mutex::new(State::default()),
            objects_received: AtomicU64::new(0),
            progress_text: tokio::sync::watch::channel(String::new()).0,
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Partitions still to pull and the target ring version they refer to
    /// (the answer to a peer's `TransferStatus`).
    pub fn status(&self) -> (u64, u64) {
        let placement = self.cluster.placement();
        let version = placement.target.version();
        let pending = placement.pending_for(&self.cluster.me().id);
        let state = self.state();
        let left = if state.ring_version == version {
            pending.iter().filter(|p| !state.done.contains(p)).count()
        } else {
            pending.len()
        };
        (left as u64, version)
    }

    /// `(done, total)` of this node's pulls under the current target ring.
    pub fn progress(&self) -> (u64, u64) {
        let state = self.state();
        let done = state.pending.intersection(&state.done).count();
        (done as u64, state.pending.len() as u64)
    }

    /// A receiver of the progress text this node publishes in gossip.
    pub fn subscribe_progress(&self) -> tokio::sync::watch::Receiver<String> {
        self.progress_text.subscribe()
    }

    fn publish_progress(&self) {
        let (done, total) = self.progress();
        let text = if total == 0 || done == total {
            String::new()
        } else {
            format!("{done}/{total}")
        };
        self.progress_text.send_if_modified(|old| {
            let changed = *old != text;
            *old = text;
            changed
        });
    }

    /// Runs until `stop`.
    pub fn spawn(self: Arc<Self>, tasks: &TaskTracker, stop: CancellationToken) {
        tasks.spawn(async move {
            let mut tick = tokio::time::interval(self.config.interval);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    _ = stop.cancelled() => break,
                    _ = tick.tick() => {}
                }
                self.round(&stop).await;
            }
        });
    }

    async fn round(&self, stop: &CancellationToken) {
        let placement = self.cluster.placement();
        let me = self.cluster.me().id.clone();
        let pending: BTreeSet<u32> = placement.pending_for(&me).into_iter().collect();
        let version = placement.target.version();
        let todo: Vec<u32> = {
            let mut state = self.state();
            if state.ring_version != version {
                // Partitions pulled under the previous target stay pulled.
                let kept: BTreeSet<u32> = state.done.intersection(&pending).copied().collect();
                *state = State {
                    ring_version: version,
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
            self.publish_progress();
            let pulled = futures::future::join_all(batch.iter().map(|p| self.pull(*p))).await;
            let mut state = self.state();
            for (p, ok) in batch.iter().zip(pulled) {
                if ok {
                    state.done.insert(*p);
                }
            }
        }
        self.publish_progress();
        match self.cluster.status() {
            NodeStatus::Joining => {
                // Until gossip has shown it a live UP member, a joining node
                // sees only itself and would wrongly find nothing to pull.
                let me = &self.cluster.me().id;
                let knows_cluster = self.cluster.members().iter().any(|m| {
                    m.id != *me && m.status == NodeStatus::Up && self.cluster.is_alive(&m.id)
                });
                let (left, _) = self.status();
                if knows_cluster
                    && left == 0
                    && self.cluster.placement().target.version() == version
                {
                    info!("every pending partition pulled: this node is UP");
                    if let Err(e) = self.cluster.set_status(NodeStatus::Up).await {
                        warn!(error = %e, "cannot become UP");
                    }
                }
            }
            NodeStatus::Draining => self.finish_drain(version).await,
            NodeStatus::Up | NodeStatus::Left => {}
        }
    }

    /// Pulls partition `p` from every live current holder; true when all of
    /// them were read to the end.
    async fn pull(&self, p: u32) -> bool {
        let placement = self.cluster.placement();
        let me = &self.cluster.me().id;
        let holders: Vec<NodeId> = placement
            .replicas(p)
            .current
            .into_iter()
            .filter(|id| id != me && self.cluster.is_alive(id))
            .collect();
        if holders.is_empty() {
            debug!(partition = p, "no live holder to pull from yet");
            return false;
        }
        let (from_hash, to_hash) = placement.target.partition_range(p);
        let pulls = holders
            .iter()
            .map(|holder| self.pull_from(holder, p, from_hash, to_hash));
        futures::future::join_all(pulls)
            .await
            .into_iter()
            .all(|ok| ok)
    }

    /// Pulls one hash range from one holder, page by page.
    async fn pull_from(&self, holder: &NodeId, p: u32, from_hash: u64, to_hash: u64) -> bool {
        let pace = Duration::from_secs(1) / self.config.pages_per_sec.max(1);
        let mut after: Option<Vec<u8>> = None;
        loop {
            let request = PeerRequest::Scan {
                from_hash,
                to_hash,
                after: after.clone(),
                limit: PAGE,
            };
            let (objects, more) = match self
                .peers
                .call(holder, rand::random(), request, self.config.timeout)
                .await
            {
                Ok(Response::Objects { objects, more }) => (objects, more),
                Ok(other) => {
                    warn!(%holder, partition = p, ?other, "unexpected answer to a scan");
                    return false;
                }
                Err(e) => {
                    debug!(%holder, partition = p, error = %e, "pull failed; retrying later");
                    return false;
                }
            };
            after = objects.last().map(|(k, _)| k.clone());
            let count = objects.len() as u64;
            if let Err(e) = self.replica.replicate_page(objects).await {
                warn!(%holder, partition = p, error = %e.message, "storing a pulled page failed; retrying later");
                return false;
            }
            self.objects_received.fetch_add(count, Ordering::Relaxed);
            if !more || after.is_none() {
                break;
            }
            tokio::time::sleep(pace).await;
        }
        true
    }

    /// LEFT once every live node has pulled what it needs and no hint is
    /// held here.
    async fn finish_drain(&self, version: u64) {
        if self.storage.hint_count() > 0 {
            return;
        }
        let view = self.cluster.view();
        let me = &self.cluster.me().id;
        for (id, member) in &view.members {
            if id == me || !member.alive || member.info.status == NodeStatus::Left {
                continue;
            }
            match self
                .peers
                .call(
                    id,
                    rand::random(),
                    PeerRequest::TransferStatus,
                    self.config.timeout,
                )
                .await
            {
                Ok(Response::TransferStatus {
                    pending,
                    ring_version,
                }) if pending == 0 && ring_version == version => {}
                Ok(Response::TransferStatus { pending, .. }) => {
                    debug!(node = %id, pending, "drain waits for a node still pulling");
                    return;
                }
                _ => return,
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
