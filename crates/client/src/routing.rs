//! Client-side routing: which node to send a request to. A request with a
//! key goes to one of the key's replicas (the node then coordinates
//! locally), in the order the router (`kv-router`, the same pure functions
//! and scorer the nodes use) gives over the client's own observations: its
//! requests in flight to each node, their latencies and failures, and the
//! nodes' load reports from the last `Ring` answer. Nodes the client could
//! not reach are remembered with the time they failed and go last; they are
//! retried by a probe, not by a user's request. A request without a key
//! (the ring refresh, a status) goes to the live members in the router's
//! order over them (`ranked`), then to the configured endpoints; without
//! a ring (yet), to the configured endpoints, from a random one on.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

pub use kv_router::DecisionRecord;
use kv_router::{Ask, Hedge, Mode, Op, Outcome, RouterSettings, Scorer, Ticket, decide};
use kv_types::{NodeId, key_hash};

use crate::known::Known;

/// How long after a failed connection an endpoint counts as dead unless a
/// probe reaches it first; then a request may try it again.
pub(crate) const DEAD_FOR: Duration = Duration::from_secs(60);

/// How often a dead endpoint is probed, at most.
pub(crate) const PROBE_EVERY: Duration = Duration::from_secs(1);

/// How often a long-lived client asks for a fresh ring and reports (the
/// nodes' report period).
pub(crate) const REFRESH_EVERY: Duration = Duration::from_secs(1);
/// Shortest failover delay of a read (see [`Routing::failover_after`]):
/// twice the gossip's report period would be too long for issue 11's
/// bound of 1 s per request once a node is known dead.
pub(crate) const FAILOVER_MIN: Duration = Duration::from_millis(500);
/// Longest failover delay of a read.
pub(crate) const FAILOVER_MAX: Duration = Duration::from_secs(2);

/// The connection race's head start when no handshake has been timed
/// (happy eyeballs: RFC 8305 suggests 150-250 ms).
pub(crate) const DEFAULT_RACE_DELAY: Duration = Duration::from_millis(150);

/// Shortest race delay, whatever the handshakes measured.
const MIN_RACE_DELAY: Duration = Duration::from_millis(20);

/// The id the client's scorer uses for itself (never a candidate).
const CLIENT_ID: &str = "kv-client";

/// One place a request may go.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Hop {
    /// `HOST:PORT`.
    pub name: String,
    /// The node behind it, when the ring says (its certificate must then
    /// name it), else any node of the cluster.
    pub node: Option<NodeId>,
    /// `name` as an address, when it is an IP literal.
    pub addr: Option<SocketAddr>,
}

/// Where one request goes.
#[derive(Clone, Debug)]
pub(crate) struct Plan {
    /// In order; the first ones are the router's choice.
    pub hops: Vec<Hop>,
    /// After how long a read is also sent to the next hop, if it may be.
    pub hedge_after: Option<Duration>,
    /// Whether such a hedge is paid from the hedge budget.
    pub budgeted: bool,
    /// Dead endpoints due a probe.
    pub probes: Vec<Hop>,
    /// A node the router keeps out for reads, due a probe: a read goes to
    /// it too, in the background, if the hedge budget allows
    /// ([`kv_router::Decision::latency_probe`]).
    pub latency_probe: Option<Hop>,
}

/// The client's zone: none (it prefers no zone among near-ties).
static NO_ZONE: std::sync::LazyLock<std::sync::Arc<str>> = std::sync::LazyLock::new(|| "".into());

struct State {
    known: Option<Known>,
    scorer: Scorer,
    /// Endpoint name -> when a connection to it last failed, and when it
    /// was last probed.
    dead: BTreeMap<String, (Instant, Option<Instant>)>,
    /// An answer carried a ring version other than `known`'s.
    outdated: bool,
    /// Requests answered, per answering endpoint name.
    coordinated: BTreeMap<String, u64>,
    /// Handshake times (ms EWMA) of new connections.
    handshake_ms: Option<f64>,
    /// Decisions to log (drained by the owner).
    logged: Vec<DecisionRecord>,
}

/// The client's router.
pub(crate) struct Routing {
    state: Mutex<State>,
    /// The mode the user chose; `None`: the cluster's.
    chosen: Option<Mode>,
    /// Share of decisions logged (0: none).
    log_rate: f64,
}

impl Routing {
    /// A router in `chosen` mode (or the cluster's), logging `log_rate`
    /// of its decisions, with the router's default tunables.
    #[cfg(test)]
    pub fn new(chosen: Option<Mode>, log_rate: f64) -> Routing {
        match Routing::with_settings(chosen, log_rate, RouterSettings::default()) {
            Ok(routing) => routing,
            // The defaults validate and the id is well formed (unit tests).
            Err(e) => unreachable!("the client's default router settings are invalid: {e}"),
        }
    }

    /// As [`Routing::new`] with `base` as the tunables; its mode and
    /// `coordinators` are replaced (the mode by `chosen` or the
    /// cluster's; every node is a coordinator candidate).
    ///
    /// # Errors
    /// The message of [`RouterSettings::validate`] when `base` is invalid.
    pub fn with_settings(
        chosen: Option<Mode>,
        log_rate: f64,
        base: RouterSettings,
    ) -> Result<Routing, String> {
        let settings = RouterSettings {
            mode: chosen.unwrap_or_default(),
            // Every node is a coordinator candidate; C3's `n` counts the
            // ring's members.
            coordinators: 0,
            ..base
        };
        let scorer = NodeId::new(CLIENT_ID)
            .map_err(|e| e.to_string())
            .and_then(|id| Scorer::new(settings, id).map_err(|e| e.to_string()))?;
        Ok(Routing {
            state: Mutex::new(State {
                known: None,
                scorer,
                dead: BTreeMap::new(),
                outdated: false,
                coordinated: BTreeMap::new(),
                handshake_ms: None,
                logged: Vec::new(),
            }),
            chosen,
            log_rate: log_rate.clamp(0.0, 1.0),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Takes in a ring answer: the client routes with it from now on (in
    /// the cluster's mode unless one was chosen).
    pub fn learn(&self, known: Known) {
        let mut s = self.lock();
        let mode = self.chosen.unwrap_or(known.mode);
        if s.scorer.mode() != mode {
            s.scorer.set_mode(mode);
        }
        s.outdated = false;
        s.known = Some(known);
    }

    /// The ring answer the client routes with, if any.
    pub fn known_report(&self) -> Option<(kv_wire::RingReport, Duration)> {
        self.lock()
            .known
            .as_ref()
            .map(|k| (k.report.clone(), k.learned.elapsed()))
    }

    /// Notes the ring version an answer carried.
    pub fn saw_version(&self, version: u64) {
        let mut s = self.lock();
        if s.known.as_ref().is_some_and(|k| k.version != version) {
            s.outdated = true;
        }
    }

    /// Whether a fresh ring should be fetched: none yet, an answer carried
    /// another version, or (for a long-lived client) the reports are older
    /// than a report period.
    pub fn wants_refresh(&self) -> bool {
        let s = self.lock();
        match &s.known {
            None => true,
            Some(k) => s.outdated || k.learned.elapsed() >= REFRESH_EVERY,
        }
    }

    /// The routing mode in use.
    pub fn mode(&self) -> Mode {
        self.lock().scorer.mode()
    }

    /// Where a request goes: for `key`, its replicas in the router's
    /// order, then the other live members; without a key, the live
    /// members in the router's order (`ranked`).
    /// `configured` are the endpoints the client was given; they come last
    /// (or alone, when no ring is known).
    pub fn plan(&self, key: Option<&[u8]>, op: Op, configured: &[Hop]) -> Plan {
        let now = Instant::now();
        let mut s = self.lock();
        let dead = |s: &State, name: &str| {
            s.dead
                .get(name)
                .is_some_and(|(at, _)| now.saturating_duration_since(*at) < DEAD_FOR)
        };
        let mut hops: Vec<Hop> = Vec::new();
        let mut hedge_after = None;
        let mut budgeted = false;
        let mut latency_probe = None;
        if let (Some(key), Some(known)) = (key, s.known.as_ref()) {
            let preference = known.ring.key_preference_list(key).to_vec();
            let hash = key_hash(key);
            let candidates = known.candidates(&preference, hash, now, |name| dead(&s, name));
            let members = u32::try_from(known.members.len()).unwrap_or(u32::MAX);
            let ask = Ask {
                op,
                key_hash: hash,
                r: 1,
                zone: &NO_ZONE,
                members,
            };
            let inputs = s.scorer.snapshot(&candidates, ask, now);
            let settings = s.scorer.settings().clone();
            let draw = rand::random::<u64>();
            let decision = decide(&settings, &inputs, draw);
            s.scorer.observe(&inputs, &decision, now);
            let known = s.known.as_ref();
            latency_probe = decision.latency_probe.as_ref().and_then(|id| {
                let m = known.and_then(|k| k.members.get(id))?;
                Some(Hop {
                    name: m.addr.clone(),
                    node: Some(id.clone()),
                    addr: m.socket,
                })
            });
            for id in &decision.order {
                if let Some(m) = known.and_then(|k| k.members.get(id)) {
                    hops.push(Hop {
                        name: m.addr.clone(),
                        node: Some(id.clone()),
                        addr: m.socket,
                    });
                }
            }
            (hedge_after, budgeted) = match decision.hedge {
                Hedge::Never => (None, false),
                Hedge::Budgeted { quantile } => {
                    (s.scorer.latency_quantile(op, quantile, now), true)
                }
                Hedge::Speculative { quantile } => {
                    (s.scorer.latency_quantile(op, quantile, now), false)
                }
            };
            if self.log_rate > 0.0 && rand::random::<f64>() < self.log_rate {
                let record = DecisionRecord {
                    at_ms: wall_ms(),
                    node: match NodeId::new(CLIENT_ID) {
                        Ok(id) => id,
                        Err(_) => return self.fallback_plan(&mut s, configured, now),
                    },
                    key: key.to_vec(),
                    settings,
                    inputs,
                    draw,
                    decision,
                };
                s.logged.push(record);
            }
        }
        // Then every other live member, from a random one on (any node
        // coordinates any key), then the configured endpoints. A request
        // about no key (the ring refresh, a status) takes them in the
        // router's order over that random one: it must not wait on a
        // node the router avoids (`ranked`).
        if let Some(known) = s.known.as_ref() {
            let others: Vec<Hop> = known
                .members
                .iter()
                .filter(|(id, m)| {
                    m.alive
                        && !m.addr.is_empty()
                        && !hops.iter().any(|h| h.node.as_ref() == Some(id))
                })
                .map(|(id, m)| Hop {
                    name: m.addr.clone(),
                    node: Some(id.clone()),
                    addr: m.socket,
                })
                .collect();
            let others = rotate(others);
            let others = if key.is_none() {
                ranked(&mut s, others, op, now)
            } else {
                others
            };
            hops.extend(others);
        }
        for hop in rotate(configured.to_vec()) {
            if !hops.iter().any(|h| h.name == hop.name) {
                hops.push(hop);
            }
        }
        // Endpoints that failed lately go last, in the same order.
        let (live, gone): (Vec<Hop>, Vec<Hop>) = hops.into_iter().partition(|h| !dead(&s, &h.name));
        let probes = self.due_probes(&mut s, &gone, now);
        let mut hops = live;
        hops.extend(gone);
        Plan {
            hops,
            hedge_after,
            budgeted,
            probes,
            latency_probe,
        }
    }

    fn fallback_plan(&self, s: &mut State, configured: &[Hop], now: Instant) -> Plan {
        let hops = rotate(configured.to_vec());
        let probes = self.due_probes(s, &hops, now);
        Plan {
            hops,
            hedge_after: None,
            budgeted: false,
            probes,
            latency_probe: None,
        }
    }

    /// The dead endpoints among `gone` whose last probe is older than
    /// [`PROBE_EVERY`]; marks them probed.
    fn due_probes(&self, s: &mut State, gone: &[Hop], now: Instant) -> Vec<Hop> {
        let mut due = Vec::new();
        for hop in gone {
            if let Some((_, probed)) = s.dead.get_mut(&hop.name)
                && probed.is_none_or(|p| now.saturating_duration_since(p) >= PROBE_EVERY)
            {
                *probed = Some(now);
                due.push(hop.clone());
            }
        }
        due
    }

    /// Whether endpoint `name` failed lately.
    #[cfg(test)]
    pub fn is_dead(&self, name: &str) -> bool {
        let s = self.lock();
        s.dead
            .get(name)
            .is_some_and(|(at, _)| at.elapsed() < DEAD_FOR)
    }

    /// Endpoint `name` could not be connected to (at `at`).
    pub fn mark_dead(&self, name: &str, at: Instant) {
        let mut s = self.lock();
        let probed = s.dead.get(name).and_then(|(_, p)| *p);
        s.dead.insert(name.to_string(), (at, probed));
    }

    /// Endpoint `name` answered or accepted a connection.
    pub fn mark_alive(&self, name: &str) {
        self.lock().dead.remove(name);
    }

    /// The dead endpoints with when they failed (for the cache).
    pub fn dead(&self) -> Vec<(String, Instant)> {
        self.lock()
            .dead
            .iter()
            .filter(|(_, (at, _))| at.elapsed() < DEAD_FOR)
            .map(|(name, (at, _))| (name.clone(), *at))
            .collect()
    }

    /// A request (`op`) to `node` leaves now.
    pub fn begin(&self, node: &NodeId, op: Op) -> Ticket {
        self.lock().scorer.start(node, op, Instant::now())
    }

    /// The request of `ticket` to `node`, sent at `sent`, ended with
    /// `outcome` (answered by endpoint `name` when it succeeded).
    pub fn end(&self, ticket: &Ticket, node: &NodeId, op: Op, outcome: Outcome) {
        let mut s = self.lock();
        s.scorer.finish(ticket);
        s.scorer.record(node, op, outcome, Instant::now());
    }

    /// The request of `ticket`, sent at `sent`, was abandoned unanswered
    /// before its deadline `until` (its call task was dropped, as when the
    /// runtime shuts down; a hedge's loser is not abandoned, its call runs
    /// on to its answer).
    pub fn abandon(&self, ticket: &Ticket, sent: Instant, until: Instant) {
        self.lock()
            .scorer
            .abandon(ticket, sent, until, Instant::now());
    }

    /// A read to `node` was outrun: the hedge sent past it (or the read
    /// failed over) was answered first, and its call runs on. The age of
    /// the oldest request in flight to `node` floors its latency at once
    /// until the reads now in flight to it have ended
    /// ([`kv_router::Scorer::outrun`]).
    pub fn outrun(&self, node: &NodeId) {
        self.lock().scorer.outrun(node);
    }

    /// How long a read waits for its first hop before asking the next one
    /// too, whatever the hedge budget: four times the observed p99 of
    /// `op`, within [`FAILOVER_MIN`]..=[`FAILOVER_MAX`], and at most half
    /// the request's `timeout`.
    pub fn failover_after(&self, op: Op, timeout: Duration) -> Duration {
        let p99 = self
            .lock()
            .scorer
            .latency_quantile(op, 0.99, Instant::now())
            .unwrap_or(Duration::ZERO);
        (p99 * 4).clamp(FAILOVER_MIN, FAILOVER_MAX).min(timeout / 2)
    }

    /// Whether a read that has waited `waited` may hedge to `target`
    /// ([`kv_router::Scorer::hedge_may_help`]); true for a hop the ring
    /// does not name.
    pub fn hedge_may_help(&self, target: Option<&NodeId>, waited: Duration) -> bool {
        target.is_none_or(|node| {
            self.lock()
                .scorer
                .hedge_may_help(node, waited, Instant::now())
        })
    }

    /// One client request was made: it earns the hedge budget its share.
    pub fn on_request(&self) {
        self.lock().scorer.on_request();
    }

    /// Asks to hedge once; true when the budget allows.
    pub fn try_hedge(&self) -> bool {
        self.lock().scorer.try_hedge()
    }

    /// `(sent, denied)` hedges so far.
    pub fn hedges(&self) -> (u64, u64) {
        self.lock().scorer.hedges()
    }

    /// The preference list of `key` by the ring last learned.
    pub fn preference_list(&self, key: &[u8]) -> Option<Vec<NodeId>> {
        let s = self.lock();
        let known = s.known.as_ref()?;
        Some(known.ring.key_preference_list(key).to_vec())
    }

    /// `name` answered a request.
    pub fn answered(&self, name: &str, key: Option<&[u8]>, node: Option<&NodeId>) {
        let mut s = self.lock();
        *s.coordinated.entry(name.to_string()).or_default() += 1;
        if let (Some(key), Some(node)) = (key, node) {
            s.scorer.served(key_hash(key), node);
        }
    }

    /// Requests answered per endpoint, with the node behind it when known.
    pub fn coordinated(&self) -> BTreeMap<String, u64> {
        let s = self.lock();
        let name_of = |addr: &str| {
            s.known
                .as_ref()
                .and_then(|k| k.members.iter().find(|(_, m)| m.addr == addr))
                .map_or_else(|| addr.to_string(), |(id, _)| id.to_string())
        };
        let mut out = BTreeMap::new();
        for (addr, n) in &s.coordinated {
            *out.entry(name_of(addr)).or_default() += n;
        }
        out
    }

    /// Notes how long a new connection's handshake took.
    pub fn handshake(&self, took: Duration) {
        let ms = took.as_secs_f64() * 1e3;
        let mut s = self.lock();
        s.handshake_ms = Some(match s.handshake_ms {
            Some(old) => old * 0.8 + ms * 0.2,
            None => ms,
        });
    }

    /// The measured handshake time, ms (for the cache).
    pub fn handshake_ms(&self) -> Option<f64> {
        self.lock().handshake_ms
    }

    /// Seeds the handshake estimate (from the cache).
    pub fn set_handshake_ms(&self, ms: f64) {
        if ms.is_finite() && ms > 0.0 {
            self.lock().handshake_ms = Some(ms);
        }
    }

    /// How long a connection attempt runs alone before the next candidate
    /// races it: three handshakes as measured, within 20..=150 ms (150 ms
    /// before any was measured).
    pub fn race_delay(&self) -> Duration {
        match self.lock().handshake_ms {
            Some(ms) => {
                Duration::from_secs_f64(ms * 3.0 / 1e3).clamp(MIN_RACE_DELAY, DEFAULT_RACE_DELAY)
            }
            None => DEFAULT_RACE_DELAY,
        }
    }

    /// The decisions logged since the last call.
    pub fn take_logged(&self) -> Vec<DecisionRecord> {
        std::mem::take(&mut self.lock().logged)
    }
}

/// `hops` (members, in a random rotation) in the order the router gives
/// for a request about no key: each of them a candidate, the rotation as
/// the preference order (so plain keeps it), a random key hash (so
/// scoring's near-ties spread). Without it a ring refresh that went to a
/// starved node waited out the read failover (0.5-2 s) while every report
/// the client held went stale, and scoring fell back to the preference
/// order, which sent a burst of requests to that node
/// (docs/benchmarks.md, "... a ring refresh on the slow node"). The decision
/// is neither observed nor logged (it is not a key's), though taking the
/// snapshot does the scorer's periodic upkeep as a key's would.
fn ranked(s: &mut State, hops: Vec<Hop>, op: Op, now: Instant) -> Vec<Hop> {
    let Some(known) = s.known.as_ref() else {
        return hops;
    };
    let ids: Vec<NodeId> = hops.iter().filter_map(|h| h.node.clone()).collect();
    if ids.len() < 2 || ids.len() != hops.len() {
        return hops;
    }
    let key_hash = rand::random::<u64>();
    let candidates = known.candidates(&ids, key_hash, now, |name| {
        s.dead
            .get(name)
            .is_some_and(|(at, _)| now.saturating_duration_since(*at) < DEAD_FOR)
    });
    let members = u32::try_from(known.members.len()).unwrap_or(u32::MAX);
    let ask = Ask {
        op,
        key_hash,
        r: 1,
        zone: &NO_ZONE,
        members,
    };
    let inputs = s.scorer.snapshot(&candidates, ask, now);
    let decision = decide(s.scorer.settings(), &inputs, rand::random::<u64>());
    let mut rest = hops;
    let mut out = Vec::with_capacity(rest.len());
    for id in &decision.order {
        if let Some(i) = rest.iter().position(|h| h.node.as_ref() == Some(id)) {
            out.push(rest.remove(i));
        }
    }
    out.extend(rest);
    out
}

/// `hops` from a random one on, wrapping around.
fn rotate(mut hops: Vec<Hop>) -> Vec<Hop> {
    if hops.len() > 1 {
        let start = rand::random_range(0..hops.len());
        hops.rotate_left(start);
    }
    hops
}

/// Now, ms since the Unix epoch.
pub(crate) fn wall_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;
    use kv_types::{Member, NodeStatus};
    use kv_wire::{RingMember, RingReport};

    fn report(alive: &[bool]) -> RingReport {
        let members: Vec<Member> = (1..=alive.len())
            .map(|i| Member {
                id: NodeId::new(format!("node{i}")).unwrap(),
                zone: format!("zone-{}", i % 2),
                host: format!("host-{i}"),
                weight: 1,
                status: NodeStatus::Up,
            })
            .collect();
        let ring = kv_router::Ring::build(
            kv_router::RingSettings {
                partitions: 16,
                replicas: 3,
                zone_redundancy: 1,
            },
            &members,
        )
        .unwrap();
        RingReport {
            node: "node1".into(),
            ring_version: ring.version(),
            placement: ring.to_bytes(),
            members: members
                .iter()
                .zip(alive)
                .enumerate()
                .map(|(i, (m, alive))| RingMember {
                    id: m.id.to_string(),
                    addr: format!("127.0.0.1:{}", 7101 + i),
                    zone: m.zone.clone(),
                    host: m.host.clone(),
                    status: "UP".into(),
                    alive: *alive,
                    suspect: false,
                    hints_pending: 0,
                    report: None,
                })
                .collect(),
            mode: "scoring".into(),
        }
    }

    #[test]
    fn a_ring_v2_answer_gives_each_candidate_its_process_generation() {
        let ring = report(&[true, true, true]);
        let ids: Vec<NodeId> = ring
            .members
            .iter()
            .map(|m| NodeId::new(m.id.as_str()).unwrap())
            .collect();
        let v2 = kv_wire::RingReportV2 {
            ring: ring.clone(),
            generations: vec![Some(11), None, Some(13)],
        };
        let now = std::time::Instant::now();
        let known = Known::from_report_v2(v2, Duration::ZERO).unwrap();
        let generations: Vec<Option<u64>> = known
            .candidates(&ids, 1, now, |_| false)
            .iter()
            .map(|c| c.generation)
            .collect();
        assert_eq!(generations, [Some(11), None, Some(13)]);
        // A `Ring` answer (an older node, or the cache) says nothing of them.
        let known = Known::from_report(ring, Duration::ZERO).unwrap();
        let candidates = known.candidates(&ids, 1, now, |_| false);
        assert!(candidates.iter().all(|c| c.generation.is_none()));
    }

    fn configured() -> Vec<Hop> {
        vec![Hop {
            name: "seed:7000".into(),
            node: None,
            addr: None,
        }]
    }

    #[test]
    fn failover_waits_half_a_second_at_least_and_half_the_timeout_at_most() {
        let routing = Routing::new(None, 0.0);
        // No latency seen yet: the floor.
        assert_eq!(
            routing.failover_after(Op::Get, Duration::from_secs(10)),
            FAILOVER_MIN
        );
        // A short request timeout caps it.
        assert_eq!(
            routing.failover_after(Op::Get, Duration::from_millis(600)),
            Duration::from_millis(300)
        );
    }

    #[test]
    fn a_key_goes_to_its_replicas_first_and_the_dead_go_last() {
        let routing = Routing::new(None, 0.0);
        let report = report(&[true, true, true, true, false]);
        let known = Known::from_report(report, Duration::ZERO).unwrap();
        let ring = known.ring.clone();
        routing.learn(known);
        for i in 0..50 {
            let key = format!("key-{i}");
            let replicas = ring.key_preference_list(key.as_bytes()).to_vec();
            let plan = routing.plan(Some(key.as_bytes()), Op::Get, &configured());
            let alive_replicas: Vec<&NodeId> = replicas
                .iter()
                .filter(|id| id.as_str() != "node5")
                .collect();
            let first: Vec<&NodeId> = plan
                .hops
                .iter()
                .take(alive_replicas.len())
                .filter_map(|h| h.node.as_ref())
                .collect();
            let mut sorted_first = first.clone();
            sorted_first.sort();
            let mut sorted_alive = alive_replicas.clone();
            sorted_alive.sort();
            assert_eq!(sorted_first, sorted_alive, "{key}");
            // node5 is dead for the cluster: never a hop; the configured
            // endpoint is the last resort.
            assert!(
                plan.hops
                    .iter()
                    .all(|h| h.node.as_ref().is_none_or(|n| n.as_str() != "node5"))
            );
            assert_eq!(plan.hops.last().unwrap().name, "seed:7000");
        }
        // An endpoint the client failed to reach goes last, and is probed
        // once per PROBE_EVERY.
        let at = Instant::now();
        routing.mark_dead("127.0.0.1:7101", at);
        let plan = routing.plan(Some(b"k"), Op::Get, &configured());
        assert_eq!(plan.hops.last().unwrap().name, "127.0.0.1:7101");
        assert_eq!(plan.probes.len(), 1);
        let plan = routing.plan(Some(b"k"), Op::Get, &configured());
        assert!(plan.probes.is_empty());
        routing.mark_alive("127.0.0.1:7101");
        assert!(!routing.is_dead("127.0.0.1:7101"));
    }

    #[test]
    fn a_request_about_no_key_goes_where_the_router_would_send_it() {
        // node3 reports its CPU nearly full, the others idle.
        let mut rep = report(&[true; 5]);
        for m in &mut rep.members {
            m.report = Some(kv_wire::MemberLoad {
                age_ms: 0,
                cpu: if m.id == "node3" { 0.95 } else { 0.05 },
                queue: 0,
                backlog: 0,
                hit_ratio: 0.5,
                repair: false,
                hot_keys: Vec::new(),
            });
        }
        let first = |mode: Mode| {
            let routing = Routing::new(Some(mode), 0.0);
            routing.learn(Known::from_report(rep.clone(), Duration::ZERO).unwrap());
            let mut firsts = std::collections::BTreeMap::<String, u32>::new();
            for _ in 0..200 {
                let plan = routing.plan(None, Op::Get, &configured());
                assert_eq!(plan.hops.len(), 6, "every member, then the seed");
                assert_eq!(plan.hops.last().unwrap().name, "seed:7000");
                let node = plan.hops[0].node.as_ref().unwrap().to_string();
                *firsts.entry(node).or_default() += 1;
            }
            firsts
        };
        // Scoring never asks the busy node first, and spreads over the rest.
        let scoring = first(Mode::Scoring);
        assert!(!scoring.contains_key("node3"), "{scoring:?}");
        assert!(scoring.len() >= 3, "{scoring:?}");
        // Plain keeps the random rotation: the busy node among the firsts.
        let plain = first(Mode::Plain);
        assert!(plain.contains_key("node3"), "{plain:?}");
        assert_eq!(plain.len(), 5, "{plain:?}");
    }

    #[test]
    fn without_a_ring_the_configured_endpoints_are_used() {
        let routing = Routing::new(Some(Mode::Plain), 0.0);
        let plan = routing.plan(Some(b"k"), Op::Put, &configured());
        assert_eq!(plan.hops, configured());
        assert!(routing.wants_refresh());
    }

    #[test]
    fn a_chosen_mode_wins_over_the_clusters_and_decisions_are_logged() {
        let routing = Routing::new(Some(Mode::P2c), 1.0);
        routing.learn(Known::from_report(report(&[true; 5]), Duration::ZERO).unwrap());
        assert_eq!(routing.mode(), Mode::P2c);
        routing.plan(Some(b"k"), Op::Get, &configured());
        let logged = routing.take_logged();
        assert_eq!(logged.len(), 1);
        let r = &logged[0];
        assert_eq!(decide(&r.settings, &r.inputs, r.draw), r.decision);
        let routing = Routing::new(None, 0.0);
        let mut rep = report(&[true; 5]);
        rep.mode = "c3".into();
        routing.learn(Known::from_report(rep, Duration::ZERO).unwrap());
        assert_eq!(routing.mode(), Mode::C3);
    }

    #[test]
    fn an_answer_from_another_ring_asks_for_a_refresh() {
        let routing = Routing::new(None, 0.0);
        let known = Known::from_report(report(&[true; 5]), Duration::ZERO).unwrap();
        let version = known.version;
        routing.learn(known);
        assert!(!routing.wants_refresh());
        routing.saw_version(version);
        assert!(!routing.wants_refresh());
        routing.saw_version(version ^ 1);
        assert!(routing.wants_refresh());
    }

    #[test]
    fn the_race_delay_follows_measured_handshakes() {
        let routing = Routing::new(None, 0.0);
        assert_eq!(routing.race_delay(), DEFAULT_RACE_DELAY);
        routing.handshake(Duration::from_millis(2));
        assert_eq!(routing.race_delay(), MIN_RACE_DELAY);
        routing.set_handshake_ms(30.0);
        assert_eq!(routing.race_delay(), Duration::from_millis(90));
    }
}
