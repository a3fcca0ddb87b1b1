//! The router's candidates, from the membership view and the rings:
//! liveness, status, zone, host, suspicion, and the report-derived inputs
//! (load, hit ratio, hot keys, hints pending for each node). All of it is
//! kept per node in one shared snapshot, rebuilt when the view or the
//! ring changes and at least every score-cache interval (50 ms: reports
//! change once a period, but their age grows), so that a request reads
//! one map entry per candidate instead of the view, the placement and
//! both rings' member lists (that was a sixth of the router's share of a
//! read, docs/benchmarks.md, set 7).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kv_router::{Candidate, ReportInputs};
use kv_types::{NodeId, NodeStatus};
use tokio::time::Instant;

use crate::Cluster;
use crate::membership::LoadReport;

/// What the cache keeps per node.
#[derive(Clone, Debug)]
struct Cached {
    /// Its report (with `hot` unset: that depends on the key).
    report: Option<ReportInputs>,
    /// Its hot key hashes, sorted (binary search per request).
    hot_keys: Vec<u64>,
    /// Hints the other nodes hold for it.
    hints_pending: u64,
    /// Its process generation, if the view knows it.
    generation: Option<u64>,
    /// Its phi is above half the conviction threshold.
    suspect: bool,
    /// The failure detector believes it alive.
    alive: bool,
    /// UP in the target ring (or in neither ring): not JOINING or
    /// DRAINING.
    up: bool,
    /// Its zone and host as shared text (a decision clones them per
    /// candidate without allocating).
    zone: Arc<str>,
    host: Arc<str>,
}

impl Cached {
    /// A node as a ring shows it, before the view says more: no report,
    /// not alive until the failure detector says so.
    fn new(up: bool, zone: &str, host: &str) -> Cached {
        Cached {
            report: None,
            hot_keys: Vec::new(),
            hints_pending: 0,
            generation: None,
            suspect: false,
            alive: false,
            up,
            zone: Arc::from(zone),
            host: Arc::from(host),
        }
    }
}

/// Every known node's cached inputs, shared between requests.
#[derive(Debug)]
struct Cache {
    /// When it was built, and from which view and ring.
    at: Instant,
    view_epoch: u64,
    ring_version: u64,
    /// Members of the ring (C3's `n`).
    members: usize,
    /// Per node of the view or of either ring.
    nodes: BTreeMap<NodeId, Cached>,
}

/// The report-derived inputs of every known node, rebuilt at most every
/// `ttl`. Shared (`Arc`), never copied per request: every routed request
/// reads it, so a copy of every node's hot keys per request cost the read
/// path more than the scoring itself.
pub(super) struct ReportCache {
    ttl: Duration,
    inner: Mutex<Option<Arc<Cache>>>,
}

/// One request's candidates, and the ring's size.
pub(super) struct Candidates {
    /// In preference-list order.
    pub(super) list: Vec<Candidate>,
    /// Members of the ring the snapshot was built from.
    pub(super) members: usize,
}

/// A report as the router reads it.
fn inputs(report: &LoadReport, age: Duration) -> ReportInputs {
    ReportInputs {
        age_ms: u64::try_from(age.as_millis()).unwrap_or(u64::MAX),
        cpu: report.cpu,
        queue: report.queue,
        backlog: report.backlog,
        hit_ratio: report.hit_ratio,
        hot: false,
        repair: report.repair,
    }
}

impl ReportCache {
    pub(super) fn new(ttl: Duration) -> Self {
        ReportCache {
            ttl,
            inner: Mutex::new(None),
        }
    }

    pub(super) fn clear(&self) {
        *self.inner.lock().unwrap_or_else(|p| p.into_inner()) = None;
    }

    /// The cached inputs, rebuilt from `cluster`'s view and rings when
    /// either changed or the snapshot is older than the ttl.
    fn fresh(&self, cluster: &Cluster) -> Arc<Cache> {
        let now = cluster.clock().now();
        let (epoch, version) = (cluster.view_epoch(), cluster.ring_version());
        let mut inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(cached) = inner.as_ref()
            && cached.view_epoch == epoch
            && cached.ring_version == version
            && now.saturating_duration_since(cached.at) < self.ttl
        {
            return Arc::clone(cached);
        }
        let cached = Arc::new(build(cluster, now, epoch, version));
        *inner = Some(Arc::clone(&cached));
        cached
    }

    /// The candidates of `preference` for a key of hash `key_hash`; this
    /// node's own report is `own` (fresh).
    pub(super) fn candidates(
        &self,
        cluster: &Cluster,
        preference: &[NodeId],
        key_hash: u64,
        own: Option<&LoadReport>,
    ) -> Candidates {
        let cached = self.fresh(cluster);
        let list = preference
            .iter()
            .map(|id| {
                let me = id == cluster.id();
                let Some(c) = cached.nodes.get(id) else {
                    // Not in the snapshot (a ring newer than the one it
                    // was built from): what the cluster says now.
                    return Candidate {
                        id: id.clone(),
                        alive: cluster.is_alive(id),
                        up: true,
                        suspect: false,
                        zone: Arc::from(""),
                        host: Arc::from(""),
                        report: own.filter(|_| me).map(|r| inputs(r, Duration::ZERO)),
                        hints_pending: 0,
                        generation: None,
                    };
                };
                let (mut report, hot) = if me {
                    (
                        own.map(|r| inputs(r, Duration::ZERO)),
                        own.is_some_and(|r| r.hot_keys.contains(&key_hash)),
                    )
                } else {
                    (
                        c.report.clone(),
                        c.hot_keys.binary_search(&key_hash).is_ok(),
                    )
                };
                if let Some(r) = report.as_mut() {
                    r.hot = hot;
                }
                Candidate {
                    id: id.clone(),
                    alive: me || c.alive,
                    up: c.up,
                    suspect: c.suspect,
                    zone: Arc::clone(&c.zone),
                    host: Arc::clone(&c.host),
                    report,
                    hints_pending: c.hints_pending,
                    generation: c.generation,
                }
            })
            .collect();
        Candidates {
            list,
            members: cached.members,
        }
    }
}

/// The snapshot of `cluster`'s view and rings at `now`.
fn build(cluster: &Cluster, now: Instant, view_epoch: u64, ring_version: u64) -> Cache {
    let view = cluster.view();
    let placement = cluster.placement();
    let mut hints: BTreeMap<NodeId, u64> = BTreeMap::new();
    for peer in view.members.values() {
        for (owner, count) in peer.report.iter().flat_map(|(r, _)| r.hints.iter()) {
            // Counts come from other nodes' reports: saturate.
            let total = hints.entry(owner.clone()).or_default();
            *total = total.saturating_add(*count);
        }
    }
    let mut nodes: BTreeMap<NodeId, Cached> = BTreeMap::new();
    // The current ring's entries, then the target ring's over them: the
    // ring a node moves to decides its labels and status.
    for m in placement
        .current
        .members()
        .iter()
        .chain(placement.target.members())
    {
        let cached = Cached::new(m.status == NodeStatus::Up, &m.zone, &m.host);
        nodes.insert(m.id.clone(), cached);
    }
    for (id, peer) in &view.members {
        // In neither ring: no labels, and nothing to ramp.
        let entry = nodes
            .entry(id.clone())
            .or_insert_with(|| Cached::new(true, "", ""));
        if let Some((r, received)) = &peer.report {
            let mut hot = r.hot_keys.clone();
            hot.sort_unstable();
            hot.dedup();
            entry.report = Some(inputs(r, now.saturating_duration_since(*received)));
            entry.hot_keys = hot;
        }
        entry.suspect = peer.suspect;
        entry.alive = peer.alive;
        entry.generation = peer.generation;
    }
    for (id, count) in hints {
        if let Some(entry) = nodes.get_mut(&id) {
            entry.hints_pending = count;
        }
    }
    Cache {
        at: now,
        view_epoch,
        ring_version,
        members: cluster.member_count(),
        nodes,
    }
}
