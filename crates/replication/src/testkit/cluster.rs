//! [`TestCluster`]: several cores in one process, on memory engines, the
//! in-memory network and the in-memory membership. Background services
//! start only when a test asks ([`TestCluster::start_background`]), so a
//! test can drive handoff, transfer and anti-entropy one step at a time.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use kv_router::{RingSettings, RouterSettings};
use kv_storage::{CrashLoss, MemoryEngine, ReadCache, Storage};
use kv_types::{Member, NodeId, NodeStatus};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::{MemoryMembership, MemoryNetwork, run_storage_inline};
use crate::{
    AntiEntropySettings, Clock, Core, CoreParts, HandoffSettings, Quorums, Rng, ScrubSettings,
    Settings, TransferSettings,
};

/// Settings with short periods and deadlines and a small ring (64
/// partitions), for tests.
pub fn test_settings() -> Settings {
    Settings {
        ring: RingSettings {
            partitions: 64,
            replicas: 3,
            zone_redundancy: 2,
        },
        quorums: Quorums {
            r: 2,
            w: 2,
            request_timeout: Duration::from_secs(2),
            replica_timeout: Duration::from_millis(500),
        },
        max_siblings: kv_types::limits::DEFAULT_MAX_SIBLINGS,
        max_peer_requests: 256,
        handoff: HandoffSettings {
            interval: Duration::from_millis(100),
            rate_per_sec: 10_000,
            max_hints: 10_000,
            max_age: Duration::from_secs(3600),
            timeout: Duration::from_millis(500),
            stray_grace: Duration::from_secs(5),
        },
        anti_entropy: AntiEntropySettings {
            interval: Duration::from_millis(50),
            keys_per_sec: 10_000,
            timeout: Duration::from_millis(500),
            tombstone_grace: Duration::from_secs(3600),
            compaction_age: Duration::from_secs(3600),
        },
        transfer: TransferSettings {
            interval: Duration::from_millis(100),
            pages_per_sec: 10_000,
            objects_per_sec: 1_000_000,
            // The product's default: the simulation then checks that the
            // pulls alone bring every key (back-fills are an accelerator).
            back_fills_per_sec: TransferSettings::default().back_fills_per_sec,
            timeout: Duration::from_millis(500),
        },
        // Off: a test that wants it turns it on.
        scrub: ScrubSettings {
            interval: Duration::ZERO,
            timeout: Duration::from_millis(500),
        },
    }
}

/// One node of a [`TestCluster`].
pub struct TestNode {
    /// Its core.
    pub core: Arc<Core>,
    /// Its storage (survives a crash, as a disk would).
    pub storage: Arc<MemoryEngine>,
    /// Its clock (set an offset to skew it).
    pub clock: Arc<Clock>,
    member: Member,
    tasks: TaskTracker,
    stop: CancellationToken,
}

/// Several cores in one process.
pub struct TestCluster {
    /// The network between them.
    pub network: MemoryNetwork,
    /// Their membership.
    pub membership: MemoryMembership,
    settings: Settings,
    router: RouterSettings,
    nodes: BTreeMap<NodeId, TestNode>,
    seed: u64,
    /// Whether nodes get journaled memory engines (simulated durability,
    /// flushed by a per-node flusher after a seeded delay).
    journaled: bool,
}

/// How to build a [`TestCluster`] for the simulation: one seed for every
/// draw, and engines that lose unflushed writes on a crash.
#[derive(Clone)]
pub struct ClusterSpec {
    /// Nodes `node1..=nodes`, all UP.
    pub nodes: usize,
    /// Zones, assigned round robin.
    pub zones: usize,
    /// The core's settings.
    pub settings: Settings,
    /// The router's settings.
    pub router: RouterSettings,
    /// Seeds the network's draws and every node's [`Rng`].
    pub seed: u64,
    /// Journaled memory engines ([`MemoryEngine::journaled`]).
    pub journaled: bool,
}

/// Longest wait of a journaled engine's flusher between two flushes, ms
/// (each wait is a seeded draw from 1 to this).
const FLUSH_EVERY_MS: u64 = 4;

/// The zone of the `i`-th node (1-based) over `zones` zones: `zone-a`,
/// `zone-b`, ... round robin.
pub fn zone_of(i: usize, zones: usize) -> String {
    let z = (i.max(1) - 1) % zones.max(1);
    format!("zone-{}", char::from(b'a' + (z % 26) as u8))
}

/// A journaled engine's flusher: flushes after a seeded delay of 1 to
/// [`FLUSH_EVERY_MS`] ms, until `stop` (a flush that fails is retried at
/// the next round, as the group commit does).
fn spawn_flusher(
    tasks: &TaskTracker,
    stop: CancellationToken,
    storage: Arc<MemoryEngine>,
    seed: u64,
) {
    let rng = Rng::seeded(seed ^ 0xF1u64.rotate_left(56));
    tasks.spawn(async move {
        loop {
            let wait = Duration::from_millis(1 + rng.next_u64() % FLUSH_EVERY_MS);
            tokio::select! {
                biased;
                _ = stop.cancelled() => break,
                _ = tokio::time::sleep(wait) => {}
            }
            if storage.unflushed() > 0 {
                let _ = storage.flush();
            }
        }
    });
}

/// `node{i}`.
pub fn id(i: usize) -> NodeId {
    match NodeId::new(format!("node{i}")) {
        Ok(id) => id,
        Err(e) => panic!("node{i} is not a node id: {e}"),
    }
}

impl TestCluster {
    /// `n` UP nodes `node1..=n` over `zones` zones (`zone-a`, `zone-b`,
    /// ...) round robin, with [`test_settings`].
    pub async fn start(n: usize, zones: usize) -> Self {
        Self::with_settings(n, zones, test_settings()).await
    }

    /// As [`TestCluster::start`], with `settings`.
    pub async fn with_settings(n: usize, zones: usize, settings: Settings) -> Self {
        Self::with_router(n, zones, settings, RouterSettings::default()).await
    }

    /// As [`TestCluster::start`], with `settings` and the router's.
    pub async fn with_router(
        n: usize,
        zones: usize,
        settings: Settings,
        router: RouterSettings,
    ) -> Self {
        Self::build(ClusterSpec {
            nodes: n,
            zones,
            settings,
            router,
            seed: 7,
            journaled: false,
        })
        .await
    }

    /// The cluster `spec` describes, settled.
    pub async fn build(spec: ClusterSpec) -> Self {
        run_storage_inline();
        let mut cluster = TestCluster {
            network: MemoryNetwork::new(spec.seed),
            membership: MemoryMembership::new(),
            settings: spec.settings,
            router: spec.router,
            nodes: BTreeMap::new(),
            seed: spec.seed,
            journaled: spec.journaled,
        };
        for i in 1..=spec.nodes {
            let zone = zone_of(i, spec.zones);
            cluster.add(id(i), &zone, false).await;
        }
        cluster.settle().await;
        cluster
    }

    fn engine(&self) -> Arc<MemoryEngine> {
        Arc::new(if self.journaled {
            MemoryEngine::journaled()
        } else {
            MemoryEngine::new()
        })
    }

    /// Adds a node (JOINING with `join`, else UP) with a fresh memory
    /// engine, and starts its membership follower.
    pub async fn add(&mut self, id: NodeId, zone: &str, join: bool) -> Arc<Core> {
        let member = Member {
            id: id.clone(),
            zone: zone.to_string(),
            host: id.to_string(),
            weight: 1,
            status: if join {
                NodeStatus::Joining
            } else {
                NodeStatus::Up
            },
        };
        let storage = self.engine();
        let clock = Arc::new(Clock::following_tokio(1_700_000_000_000));
        self.open(member, storage, clock, join).await
    }

    async fn open(
        &mut self,
        member: Member,
        storage: Arc<MemoryEngine>,
        clock: Arc<Clock>,
        join: bool,
    ) -> Arc<Core> {
        self.seed = self.seed.wrapping_add(1);
        let id = member.id.clone();
        let parts = CoreParts {
            me: member.clone(),
            join,
            storage: storage.clone(),
            cache: Arc::new(ReadCache::new(1 << 20)),
            network: self.network.endpoint(&id),
            membership: self.membership.join(&member),
            clock: clock.clone(),
            rng: Arc::new(Rng::seeded(self.seed)),
            settings: self.settings.clone(),
            router: self.router.clone(),
            cluster_id: "test".into(),
            rebuild: false,
        };
        let core = match Core::open(parts).await {
            Ok(core) => Arc::new(core),
            Err(e) => panic!("cannot open {id}: {e}"),
        };
        // A restarted node publishes the status it resumed from its disk
        // (a change whose flush was reported failed may have reached it).
        let status = core.cluster().status();
        if status != member.status {
            core.cluster()
                .announce(crate::Announcement::Status(status))
                .await;
        }
        self.network.register(&id, core.service());
        let (tasks, stop) = (TaskTracker::new(), CancellationToken::new());
        core.cluster().spawn_follower(&tasks, stop.clone());
        if storage.is_journaled() {
            spawn_flusher(&tasks, stop.clone(), storage.clone(), self.seed);
        }
        self.nodes.insert(
            id,
            TestNode {
                core: core.clone(),
                storage,
                clock,
                member,
                tasks,
                stop,
            },
        );
        core
    }

    /// Starts `id`'s hinted handoff, anti-entropy and transfer loops.
    pub fn start_background(&self, id: &NodeId) {
        let node = self.node(id);
        let core = &node.core;
        core.handoff().clone().spawn(&node.tasks, node.stop.clone());
        core.anti_entropy()
            .clone()
            .spawn(&node.tasks, node.stop.clone());
        core.transfer()
            .clone()
            .spawn(&node.tasks, node.stop.clone());
    }

    /// Starts every running node's load reporter: each announces its load
    /// report every `[router] report_period`, as a node's does through
    /// gossip (the scoring router needs fresh reports).
    pub fn start_reporters(&self) {
        for node in self.nodes.values().filter(|n| !n.stop.is_cancelled()) {
            node.core
                .reporter()
                .clone()
                .spawn(&node.tasks, node.stop.clone());
        }
    }

    /// The node `id`.
    pub fn node(&self, id: &NodeId) -> &TestNode {
        match self.nodes.get(id) {
            Some(node) => node,
            None => panic!("{id} is not in the test cluster"),
        }
    }

    /// The core of `id`.
    pub fn core(&self, id: &NodeId) -> &Arc<Core> {
        &self.node(id).core
    }

    /// Every node id.
    pub fn ids(&self) -> Vec<NodeId> {
        self.nodes.keys().cloned().collect()
    }

    /// The ids of the nodes that run (not crashed).
    pub fn running(&self) -> Vec<NodeId> {
        self.nodes
            .iter()
            .filter(|(_, n)| !n.stop.is_cancelled())
            .map(|(id, _)| id.clone())
            .collect()
    }

    /// Crashes `id`: its tasks stop, the network refuses it, and every
    /// other node sees it dead. Its storage survives (a journaled engine
    /// with every write it applied).
    pub async fn crash(&mut self, id: &NodeId) {
        self.crash_with(id, 0).await;
    }

    /// Crashes `id`. A journaled engine dies with the process at once (so
    /// no task of the dead core waits for a flush that will never come):
    /// the restarted node opens every flushed write and of the unflushed
    /// ones all but a suffix whose length is drawn from `draw` (0: none
    /// lost, the page cache reached the disk).
    async fn crash_with(&mut self, id: &NodeId, draw: u64) -> CrashLoss {
        self.network.crash(id);
        self.membership.set_alive(None, id, false);
        let Some(node) = self.nodes.get_mut(id) else {
            panic!("{id} is not in the test cluster");
        };
        node.stop.cancel();
        let mut loss = CrashLoss::default();
        if node.storage.is_journaled() {
            let (reopened, lost) = node.storage.crash(draw);
            node.storage = Arc::new(reopened);
            loss = lost;
        }
        node.tasks.close();
        node.tasks.wait().await;
        self.settle().await;
        loss
    }

    /// Restarts a crashed `id` on its storage; every node sees it alive.
    pub async fn restart(&mut self, id: &NodeId) -> Arc<Core> {
        let Some(node) = self.nodes.remove(id) else {
            panic!("{id} is not in the test cluster");
        };
        // It rejoins the membership with the status it had (a joined node
        // is UP now, not JOINING as when it was added), as a restarted node
        // publishes its persisted status; an empty disk starts UP.
        let mut member = node.member;
        member.status = if node.storage.is_empty() {
            NodeStatus::Up
        } else {
            node.core.cluster().status()
        };
        let core = self.open(member, node.storage, node.clock, false).await;
        self.membership.set_alive(None, id, true);
        self.settle().await;
        core
    }

    /// Crashes `id` as [`TestCluster::crash`] does, and loses a suffix of
    /// the writes its journaled engine had not flushed (its length drawn
    /// from `draw`); a restart opens what remains.
    pub async fn crash_losing(&mut self, id: &NodeId, draw: u64) -> CrashLoss {
        self.crash_with(id, draw).await
    }

    /// Restarts a crashed `id` on a new, empty engine (its disk was
    /// replaced): a new incarnation, UP, with the same id, zone and clock.
    pub async fn restart_wiped(&mut self, id: &NodeId) -> Arc<Core> {
        let storage = self.engine();
        let Some(node) = self.nodes.get_mut(id) else {
            panic!("{id} is not in the test cluster");
        };
        node.storage = storage;
        self.restart(id).await
    }

    /// Whether `id` is crashed (not running).
    pub fn is_crashed(&self, id: &NodeId) -> bool {
        self.node(id).stop.is_cancelled()
    }

    /// Waits until every running node has taken in its current view from
    /// the membership, and its placement every node's current status (the
    /// followers are asynchronous).
    pub async fn settle(&self) {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        loop {
            let statuses: BTreeMap<NodeId, NodeStatus> = self
                .nodes
                .values()
                .map(|n| (n.member.id.clone(), n.core.cluster().status()))
                .collect();
            let running = |n: &&TestNode| !n.stop.is_cancelled();
            let settled = self.nodes.values().filter(running).all(|n| {
                let id = &n.member.id;
                if *n.core.cluster().view() != self.membership.view_of(id) {
                    return false;
                }
                let members = n.core.cluster().members();
                let removed = n.core.cluster().removed();
                statuses.iter().all(|(id, status)| {
                    *status == NodeStatus::Left
                        || removed.contains(id)
                        || members.iter().any(|m| m.id == *id && m.status == *status)
                })
            });
            if settled {
                return;
            }
            if tokio::time::Instant::now() > deadline {
                panic!("the test cluster did not settle: {statuses:?}");
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
}
