//! The simulated world one seed runs in: the cluster (behind an async
//! lock, since faults such as a crash await the node's tasks), the trace,
//! the seeded draws, and the phase the run is in.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};

use kv_replication::Rng;
use kv_replication::testkit::TestCluster;
use kv_types::NodeId;
use tokio::sync::Notify;
use tokio::time::Instant;

use crate::trace::Trace;

/// Where the run is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// Clients run; the nemesis injects faults.
    Faults,
    /// Clients are done: the nemesis heals every fault.
    Healing,
    /// Every fault is healed; convergence is being measured.
    Healed,
}

/// Everything one seed's tasks share.
pub struct World {
    /// The cluster.
    pub cluster: tokio::sync::Mutex<TestCluster>,
    /// What happened, in order.
    pub trace: Trace,
    /// Draws of the clients' side (coordinator choice, request ids).
    pub rng: Rng,
    /// Keys any client request used.
    pub touched: Mutex<BTreeSet<Vec<u8>>>,
    /// The phase.
    phase: Mutex<Phase>,
    /// Woken at every phase change. A `Notify` wakes its waiters in a
    /// fixed order; a `watch` channel would not (it spreads waiters over
    /// shards drawn at random), and a seed must replay exactly.
    phase_changed: Notify,
    /// Nodes whose requests may be coordinated (running, not paused).
    pub reachable: Mutex<Vec<NodeId>>,
    /// When the last fault healed.
    pub healed_at: Mutex<Option<Instant>>,
}

impl World {
    /// A world around `cluster`, seeded with `seed`.
    pub fn new(cluster: TestCluster, seed: u64, trace: Trace) -> Arc<Self> {
        let reachable = cluster.running();
        Arc::new(World {
            cluster: tokio::sync::Mutex::new(cluster),
            trace,
            rng: Rng::seeded(seed ^ 0x00C1_1E47_u64.rotate_left(40)),
            touched: Mutex::new(BTreeSet::new()),
            phase: Mutex::new(Phase::Faults),
            phase_changed: Notify::new(),
            reachable: Mutex::new(reachable),
            healed_at: Mutex::new(None),
        })
    }

    /// A seeded draw from `0..n` (0 when `n` is 0).
    pub fn draw(&self, n: u64) -> u64 {
        if n == 0 { 0 } else { self.rng.next_u64() % n }
    }

    /// The nodes that may coordinate a request now.
    pub fn reachable(&self) -> Vec<NodeId> {
        lock(&self.reachable).clone()
    }

    /// Sets the nodes that may coordinate.
    pub fn set_reachable(&self, nodes: Vec<NodeId>) {
        *lock(&self.reachable) = nodes;
    }

    /// The current phase.
    pub fn phase(&self) -> Phase {
        *lock(&self.phase)
    }

    /// Moves to `phase`, waking every task waiting for a phase.
    pub fn set_phase(&self, phase: Phase) {
        *lock(&self.phase) = phase;
        self.phase_changed.notify_waiters();
    }

    /// Waits until the phase satisfies `done`.
    pub async fn wait_phase(&self, done: impl Fn(Phase) -> bool) {
        loop {
            let changed = self.phase_changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            if done(self.phase()) {
                return;
            }
            changed.await;
        }
    }
}

/// Locks a std mutex, ignoring poisoning (a panic fails the seed anyway).
pub fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}
