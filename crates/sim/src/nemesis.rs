//! The seeded nemesis: while the clients run, it injects a fault or heals
//! one every 10-160 ms of simulated time (at most [`MAX_ACTIVE`] lasting
//! faults at once), and when the clients are done it heals everything.
//! Liveness comes from a simulated failure detector (`detect`): an
//! observer sees a node dead once it has been unreachable (crashed,
//! paused, or its link to the observer cut) for [`DEAD_AFTER`], alive
//! again after [`ALIVE_AFTER`], as chitchat's phi accrual would (faster
//! than its 5-10 s, so that detection happens within a seed's few
//! simulated seconds).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kv_replication::Rng;
use kv_replication::testkit::{Link, id, zone_of};
use kv_storage::FlushFault;
use kv_types::{NodeId, NodeStatus};
use tokio::time::Instant;

use crate::faults::{FaultKind, Faults};
use crate::world::{Phase, World, lock};

/// Lasting faults (crashes, pauses, link faults) active at once, at most.
pub const MAX_ACTIVE: usize = 2;

/// How long a node must be unreachable before an observer sees it dead.
pub const DEAD_AFTER: Duration = Duration::from_millis(400);

/// How long a node must be reachable again before it looks alive.
pub const ALIVE_AFTER: Duration = Duration::from_millis(200);

/// The most nodes a join may grow the cluster to.
const MAX_NODES: usize = 7;

/// The fewest UP nodes a drain leaves (N = 3, plus one to fail).
const MIN_UP_AFTER_DRAIN: usize = 3;

/// Offsets a clock fault draws from, ms (and their negatives).
const CLOCK_JUMPS_MS: [i64; 6] = [1_000, 10_000, 60_000, 600_000, 3_600_000, 7_200_000];

/// A lasting fault, until healed.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Active {
    /// A crashed node; restarted on an empty disk when `wiped`.
    Crash { node: NodeId, wiped: bool },
    /// A paused node.
    Pause(NodeId),
    /// Link faults (a partition or lossy, slow links): only one at a time,
    /// since healing clears every link.
    Links,
}

/// What the failure detector knows about the faults.
#[derive(Default)]
pub struct Model {
    /// Crashed nodes.
    crashed: BTreeSet<NodeId>,
    /// Paused nodes.
    paused: BTreeSet<NodeId>,
    /// Cut ordered links `(from, to)`.
    cut: BTreeSet<(NodeId, NodeId)>,
}

impl Model {
    /// Whether `observer` hears from `target`.
    fn hears(&self, observer: &NodeId, target: &NodeId) -> bool {
        !self.crashed.contains(target)
            && !self.paused.contains(target)
            && !self.cut.contains(&(target.clone(), observer.clone()))
    }
}

/// The nemesis of one seed.
pub struct Nemesis {
    world: Arc<World>,
    faults: Faults,
    ids: Vec<NodeId>,
    /// The one node whose durable data may be destroyed (wipe, corrupt
    /// record).
    victim: NodeId,
    wiped: bool,
    /// The victim was removed for good.
    removed: bool,
    active: Vec<Active>,
    model: Arc<Mutex<Model>>,
    /// Every node id, shared with the failure detector (joins add some).
    all: Arc<Mutex<Vec<NodeId>>>,
    rng: Rng,
}

impl Nemesis {
    /// A nemesis over `ids`, drawing from `seed`.
    pub fn new(world: Arc<World>, faults: Faults, ids: Vec<NodeId>, seed: u64) -> Self {
        let rng = Rng::seeded(seed ^ 0x7E3E_5150u64.rotate_left(24));
        let victim = ids[(rng.next_u64() % ids.len().max(1) as u64) as usize].clone();
        let all = Arc::new(Mutex::new(ids.clone()));
        Nemesis {
            world,
            faults,
            ids,
            victim,
            wiped: false,
            removed: false,
            active: Vec::new(),
            model: Arc::new(Mutex::new(Model::default())),
            all,
            rng,
        }
    }

    fn draw(&self, n: u64) -> u64 {
        if n == 0 { 0 } else { self.rng.next_u64() % n }
    }

    fn pick(&self, from: &[NodeId]) -> Option<NodeId> {
        from.get(self.draw(from.len() as u64) as usize).cloned()
    }

    /// Runs until the clients are done, then heals everything and marks
    /// the world healed.
    pub async fn run(mut self) {
        tokio::spawn(detect(
            self.world.clone(),
            self.model.clone(),
            self.all.clone(),
        ));
        self.world.trace.note(format!(
            "nemesis: faults {}, victim {}",
            self.faults, self.victim
        ));
        loop {
            let gap = Duration::from_millis(10 + self.draw(150));
            tokio::select! {
                biased;
                _ = self.world.wait_phase(|p| p != Phase::Faults) => break,
                _ = tokio::time::sleep(gap) => {}
            }
            let kinds: Vec<FaultKind> = self.faults.0.iter().copied().collect();
            if kinds.is_empty() {
                continue;
            }
            if self.active.len() < MAX_ACTIVE && self.draw(3) != 0 {
                let kind = kinds[self.draw(kinds.len() as u64) as usize];
                self.inject(kind).await;
            } else if !self.active.is_empty() {
                let i = self.draw(self.active.len() as u64) as usize;
                let fault = self.active.remove(i);
                self.heal(fault).await;
            }
            self.update_reachable();
        }
        while let Some(fault) = self.active.pop() {
            self.heal(fault).await;
        }
        {
            let cluster = self.world.cluster.lock().await;
            cluster.network.heal();
            *lock(&self.model) = Model::default();
            for observer in &self.ids {
                for target in &self.ids {
                    cluster.membership.set_alive(Some(observer), target, true);
                }
            }
            cluster.settle().await;
        }
        self.update_reachable();
        *lock(&self.world.healed_at) = Some(Instant::now());
        self.world.trace.note("nemesis: every fault healed");
        self.world.set_phase(Phase::Healed);
    }

    fn update_reachable(&self) {
        let model = lock(&self.model);
        let reachable = self
            .ids
            .iter()
            .filter(|id| !model.crashed.contains(*id) && !model.paused.contains(*id))
            .cloned()
            .collect();
        self.world.set_reachable(reachable);
    }

    fn up(&self) -> Vec<NodeId> {
        let model = lock(&self.model);
        self.ids
            .iter()
            .filter(|id| !model.crashed.contains(*id) && !model.paused.contains(*id))
            .cloned()
            .collect()
    }

    async fn inject(&mut self, kind: FaultKind) {
        let links_active = self.active.contains(&Active::Links);
        match kind {
            FaultKind::Crash => {
                let Some(node) = self.pick(&self.up()) else {
                    return;
                };
                let lossy = self.draw(2) == 0;
                let draw = self.rng.next_u64();
                lock(&self.model).crashed.insert(node.clone());
                let mut cluster = self.world.cluster.lock().await;
                if lossy {
                    let loss = cluster.crash_losing(&node, draw).await;
                    self.world.trace.note(format!(
                        "fault: crash {node}, losing {} of its {} unflushed writes",
                        loss.lost, loss.unflushed
                    ));
                } else {
                    cluster.crash(&node).await;
                    self.world
                        .trace
                        .note(format!("fault: crash {node} (its page cache survives)"));
                }
                self.active.push(Active::Crash { node, wiped: false });
            }
            FaultKind::Wipe => {
                let node = self.victim.clone();
                if self.wiped || self.removed || !self.up().contains(&node) {
                    return;
                }
                self.wiped = true;
                lock(&self.model).crashed.insert(node.clone());
                self.world.cluster.lock().await.crash(&node).await;
                self.world.trace.note(format!(
                    "fault: crash {node}; its disk is replaced (empty at restart)"
                ));
                self.active.push(Active::Crash { node, wiped: true });
            }
            FaultKind::Pause => {
                let Some(node) = self.pick(&self.up()) else {
                    return;
                };
                lock(&self.model).paused.insert(node.clone());
                self.world.cluster.lock().await.network.pause(&node);
                self.world.trace.note(format!("fault: pause {node}"));
                self.active.push(Active::Pause(node));
            }
            FaultKind::Partition if !links_active => {
                let cuts = self.partition();
                let cluster = self.world.cluster.lock().await;
                for (from, to) in &cuts {
                    let link = Link {
                        cut: true,
                        ..Link::default()
                    };
                    cluster.network.set_link(from, to, link);
                }
                lock(&self.model).cut.extend(cuts);
                self.active.push(Active::Links);
            }
            FaultKind::Link if !links_active => {
                let cluster = self.world.cluster.lock().await;
                let mut shown = Vec::new();
                for from in &self.ids {
                    for to in self.ids.iter().filter(|to| *to != from) {
                        if self.draw(2) == 0 {
                            continue;
                        }
                        let link = Link {
                            cut: false,
                            delay: Duration::from_millis(1 + self.draw(20)),
                            jitter: Duration::from_millis(self.draw(31)),
                            loss: self.draw(31) as f64 / 100.0,
                        };
                        cluster.network.set_link(from, to, link);
                        shown.push(format!(
                            "{from}->{to} {}ms+{}ms {:.0}%",
                            link.delay.as_millis(),
                            link.jitter.as_millis(),
                            link.loss * 100.0
                        ));
                    }
                }
                self.world.trace.note(format!(
                    "fault: slow, reordering, lossy links {}",
                    shown.join(", ")
                ));
                self.active.push(Active::Links);
            }
            FaultKind::Partition | FaultKind::Link => {}
            FaultKind::Clock => {
                let Some(node) = self.pick(&self.ids) else {
                    return;
                };
                let jump = CLOCK_JUMPS_MS[self.draw(CLOCK_JUMPS_MS.len() as u64) as usize];
                let offset = if self.draw(2) == 0 { jump } else { -jump };
                let cluster = self.world.cluster.lock().await;
                let clock = &cluster.node(&node).clock;
                // A clock that jumps forward by the hints' lifetime or more
                // ages every hint the node holds past it, and the node
                // drops them all at its next pass, as designed (hints
                // expire by wall-clock age): that destroys durable copies,
                // which only the victim may lose (seed 7306: node1's clock
                // jumped 2 h forward and dropped the hint that was the
                // second copy of acknowledged writes whose first copy was
                // on the wiped victim).
                if node != self.victim && offset - clock.offset_ms() >= hint_lifetime_ms() {
                    self.world.trace.note(format!(
                        "fault: {node}'s wall clock stays (a jump of {} ms forward would expire its hints)",
                        offset - clock.offset_ms()
                    ));
                    return;
                }
                clock.set_offset_ms(offset);
                drop(cluster);
                self.world.trace.note(format!(
                    "fault: {node}'s wall clock offset is now {offset} ms"
                ));
            }
            FaultKind::Membership => self.membership().await,
            FaultKind::Storage => {
                let cluster = self.world.cluster.lock().await;
                if self.draw(3) == 0 {
                    let node = self.victim.clone();
                    if cluster.is_crashed(&node) {
                        return;
                    }
                    let keys: Vec<Vec<u8>> = lock(&self.world.touched).iter().cloned().collect();
                    let Some(key) = keys.get(self.draw(keys.len() as u64) as usize) else {
                        return;
                    };
                    if cluster.node(&node).storage.corrupt_for_test(key) {
                        self.world.trace.note(format!(
                            "fault: {node}'s record of {} is damaged",
                            String::from_utf8_lossy(key)
                        ));
                    }
                } else {
                    let Some(node) = self.pick(&self.up()) else {
                        return;
                    };
                    let n = 1 + self.draw(3) as usize;
                    let faults: Vec<FlushFault> = (0..n)
                        .map(|_| {
                            if self.draw(2) == 0 {
                                FlushFault::Eio
                            } else {
                                FlushFault::NoSpace
                            }
                        })
                        .collect();
                    cluster.node(&node).storage.fail_flushes(&faults);
                    self.world
                        .trace
                        .note(format!("fault: {node}'s next flushes fail: {faults:?}"));
                }
            }
        }
    }

    /// A join, a drain or the removal of the crashed victim.
    async fn membership(&mut self) {
        match self.draw(3) {
            0 if self.ids.len() < MAX_NODES => {
                let i = self.ids.len() + 1;
                let (node, zone) = (id(i), zone_of(i, 3));
                let mut cluster = self.world.cluster.lock().await;
                cluster.add(node.clone(), &zone, true).await;
                cluster.settle().await;
                cluster.start_background(&node);
                self.ids.push(node.clone());
                lock(&self.all).push(node.clone());
                self.world
                    .trace
                    .note(format!("change: {node} joins in {zone}"));
            }
            1 => {
                let cluster = self.world.cluster.lock().await;
                let up: Vec<NodeId> = self
                    .up()
                    .into_iter()
                    .filter(|n| cluster.core(n).cluster().status() == NodeStatus::Up)
                    .collect();
                if ring_up(&cluster) <= MIN_UP_AFTER_DRAIN {
                    return;
                }
                let Some(node) = self.pick(&up) else { return };
                let outcome = cluster.core(&node).drain(false).await;
                self.world.trace.note(match outcome {
                    Ok(plan) => format!(
                        "change: {node} drains ({} partitions move)",
                        plan.partitions
                    ),
                    Err(e) => format!("change: drain {node} refused: {e}"),
                });
            }
            _ => {
                let victim = self.victim.clone();
                let crashed = Active::Crash {
                    node: victim.clone(),
                    wiped: false,
                };
                if self.wiped || self.removed || !self.active.contains(&crashed) {
                    return;
                }
                let cluster = self.world.cluster.lock().await;
                // As for a drain: removing the (UP, crashed) victim must
                // leave enough UP members for N replicas (seed 8340: a
                // removal after three drains left 2, so R=3 reads were
                // impossible and keys went unchecked).
                if ring_up(&cluster) <= MIN_UP_AFTER_DRAIN {
                    return;
                }
                let Some(admin) = cluster
                    .running()
                    .into_iter()
                    .find(|n| !cluster.core(n).cluster().is_alive(&victim))
                else {
                    return;
                };
                match cluster.core(&admin).cluster().remove(&victim).await {
                    Ok(()) => {
                        self.removed = true;
                        self.active.retain(|a| *a != crashed);
                        self.world
                            .trace
                            .note(format!("change: {admin} removes {victim} for good"));
                    }
                    Err(e) => {
                        self.world
                            .trace
                            .note(format!("change: removing {victim} refused: {e}"));
                    }
                }
            }
        }
    }

    /// The ordered links a partition cuts, traced.
    fn partition(&self) -> BTreeSet<(NodeId, NodeId)> {
        let mut ids = self.ids.clone();
        // A seeded shuffle (Fisher-Yates).
        for i in (1..ids.len()).rev() {
            let j = self.draw(i as u64 + 1) as usize;
            ids.swap(i, j);
        }
        let both = |a: &[NodeId], b: &[NodeId]| {
            let mut cuts = BTreeSet::new();
            for x in a {
                for y in b {
                    cuts.insert((x.clone(), y.clone()));
                    cuts.insert((y.clone(), x.clone()));
                }
            }
            cuts
        };
        let names = |xs: &[NodeId]| {
            xs.iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(",")
        };
        let (cuts, what) = match self.draw(4) {
            0 => {
                let (a, b) = ids.split_at(ids.len() / 2);
                (
                    both(a, b),
                    format!("halves [{}] | [{}]", names(a), names(b)),
                )
            }
            1 if ids.len() >= 3 => {
                let (bridge, rest) = ids.split_at(1);
                let (a, b) = rest.split_at(rest.len() / 2);
                (
                    both(a, b),
                    format!("[{}] | [{}] bridged by {}", names(a), names(b), bridge[0]),
                )
            }
            2 => {
                let (one, rest) = ids.split_at(1);
                (both(one, rest), format!("{} isolated", one[0]))
            }
            _ => {
                let (a, b) = (ids[0].clone(), ids[ids.len() - 1].clone());
                let mut cuts = BTreeSet::new();
                cuts.insert((a.clone(), b.clone()));
                (cuts, format!("one-way {a} -> {b} cut"))
            }
        };
        self.world.trace.note(format!("fault: partition {what}"));
        cuts
    }

    async fn heal(&mut self, fault: Active) {
        match fault {
            Active::Crash { node, wiped } => {
                let mut cluster = self.world.cluster.lock().await;
                if wiped {
                    cluster.restart_wiped(&node).await;
                } else {
                    // Flush faults were meant for the crashed process; the
                    // restarted one meets a recovered disk (else it could
                    // not even record its incarnation and would not start).
                    cluster.node(&node).storage.clear_flush_faults();
                    cluster.restart(&node).await;
                }
                cluster.start_background(&node);
                lock(&self.model).crashed.remove(&node);
                self.world.trace.note(format!(
                    "heal: restart {node}{}",
                    if wiped {
                        " on an empty disk (new incarnation)"
                    } else {
                        ""
                    }
                ));
            }
            Active::Pause(node) => {
                self.world.cluster.lock().await.network.resume(&node);
                lock(&self.model).paused.remove(&node);
                self.world.trace.note(format!("heal: resume {node}"));
            }
            Active::Links => {
                self.world.cluster.lock().await.network.heal();
                lock(&self.model).cut.clear();
                self.world.trace.note("heal: every link");
            }
        }
    }
}

/// The simulated failure detector: every 100 ms, each observer's view of
/// each node follows reachability once it has held for [`DEAD_AFTER`]
/// (unreachable) or [`ALIVE_AFTER`] (reachable again). Stops when the
/// world is healed (the nemesis then sets everyone alive).
async fn detect(world: Arc<World>, model: Arc<Mutex<Model>>, all: Arc<Mutex<Vec<NodeId>>>) {
    let mut seen: BTreeMap<(NodeId, NodeId), bool> = BTreeMap::new();
    let mut since: BTreeMap<(NodeId, NodeId), Instant> = BTreeMap::new();
    while world.phase() == Phase::Faults {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let now = Instant::now();
        let ids = lock(&all).clone();
        let mut changes = Vec::new();
        {
            let model = lock(&model);
            for observer in &ids {
                for target in ids.iter().filter(|t| *t != observer) {
                    let pair = (observer.clone(), target.clone());
                    let hears = model.hears(observer, target);
                    let shown = seen.get(&pair).copied().unwrap_or(true);
                    if hears == shown {
                        since.remove(&pair);
                        continue;
                    }
                    let t0 = *since.entry(pair.clone()).or_insert(now);
                    let hold = if hears { ALIVE_AFTER } else { DEAD_AFTER };
                    if now.duration_since(t0) >= hold {
                        since.remove(&pair);
                        seen.insert(pair.clone(), hears);
                        changes.push((pair, hears));
                    }
                }
            }
        }
        if changes.is_empty() || world.phase() != Phase::Faults {
            continue;
        }
        let cluster = world.cluster.lock().await;
        for ((observer, target), alive) in changes {
            cluster
                .membership
                .set_alive(Some(&observer), &target, alive);
            world.trace.note(format!(
                "detector: {observer} sees {target} {}",
                if alive { "alive" } else { "dead" }
            ));
        }
    }
}

/// How long the simulated nodes keep a hint, ms (`[handoff] max_age` of
/// the test settings the simulation runs with).
fn hint_lifetime_ms() -> i64 {
    i64::try_from(
        kv_replication::testkit::test_settings()
            .handoff
            .max_age
            .as_millis(),
    )
    .unwrap_or(i64::MAX)
}

/// Members the ring (as any running node sees it) holds as UP, crashed
/// ones included: what is left to hold N replicas after a drain or a
/// removal takes one away.
fn ring_up(cluster: &kv_replication::testkit::TestCluster) -> usize {
    cluster.running().first().map_or(0, |any| {
        cluster
            .core(any)
            .cluster()
            .members()
            .iter()
            .filter(|m| m.status == NodeStatus::Up)
            .count()
    })
}
