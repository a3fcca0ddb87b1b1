//! The router's candidates, from the membership view: liveness, status,
//! zone, host, suspicion, and the report-derived inputs (load, hit ratio,
//! hot keys, hints pending for each node), the latter reused for the
//! score-cache interval (50 ms) since reports change once a period.

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
    /// Its phi is above half the conviction threshold.
    suspect: bool,
}

/// Every known node's cached inputs, shared between requests.
#[derive(Debug, Default)]
struct Cache {
    /// Per member of the membership view.
    nodes: BTreeMap<NodeId, Cached>,
    /// Zone and host per member of either ring, as shared text (a
    /// decision clones them per candidate without allocating).
    labels: BTreeMap<NodeId, (Arc<str>, Arc<str>)>,
}

/// [`Cache`] as requests share it.
type Snapshot = Arc<Cache>;

/// The report-derived inputs of every known node, rebuilt at most every
/// `ttl`. Shared (`Arc`), never copied per request: every routed request
/// reads it, so a copy of every node's hot keys per request cost the read
/// path more than the scoring itself.
pub(super) struct ReportCache {
    ttl: Duration,
    inner: Mutex<Option<(Instant, Snapshot)>>,
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

    /// The cached inputs, rebuilt from `cluster`'s view when older than
    /// the ttl.
    fn fresh(&self, cluster: &Cluster) -> Snapshot {
        let now = cluster.clock().now();
        let mut inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((at, cached)) = inner.as_ref()
            && now.saturating_duration_since(*at) < self.ttl
        {
            return Arc::clone(cached);
        }
        let view = cluster.view();
        let mut hints: BTreeMap<NodeId, u64> = BTreeMap::new();
        for peer in view.members.values() {
            for (owner, count) in peer.report.iter().flat_map(|(r, _)| r.hints.iter()) {
                // Counts come from other nodes' reports: saturate.
                let total = hints.entry(owner.clone()).or_default();
                *total = total.saturating_add(*count);
            }
        }
        let cached: BTreeMap<NodeId, Cached> = view
            .members
            .iter()
            .map(|(id, peer)| {
                let (report, hot_keys) = match &peer.report {
                    Some((r, received)) => {
                        let mut hot = r.hot_keys.clone();
                        hot.sort_unstable();
                        hot.dedup();
                        (
                            Some(inputs(r, now.saturating_duration_since(*received))),
                            hot,
                        )
                    }
                    None => (None, Vec::new()),
                };
                let cached = Cached {
                    report,
                    hot_keys,
                    hints_pending: hints.get(id).copied().unwrap_or(0),
                    suspect: peer.suspect,
                };
                (id.clone(), cached)
            })
            .collect();
        let placement = cluster.placement();
        let labels = placement
            .current
            .members()
            .iter()
            .chain(placement.target.members())
            .map(|m| {
                let labels = (Arc::from(m.zone.as_str()), Arc::from(m.host.as_str()));
                (m.id.clone(), labels)
            })
            .collect();
        let cached = Arc::new(Cache {
            nodes: cached,
            labels,
        });
        *inner = Some((now, Arc::clone(&cached)));
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
    ) -> Vec<Candidate> {
        let cached = self.fresh(cluster);
        let placement = cluster.placement();
        // The target ring's entry first, as the ring a node moves to.
        let member_of = |id: &NodeId| {
            placement
                .target
                .members()
                .iter()
                .chain(placement.current.members())
                .find(|m| m.id == *id)
        };
        preference
            .iter()
            .map(|id| {
                let me = id == cluster.id();
                let c = cached.nodes.get(id);
                let member = member_of(id);
                // The target ring's labels first (chained last above, so
                // they won), else the member's own (a node that joined in
                // the last cache interval: allocates).
                let (zone, host) = cached
                    .labels
                    .get(id)
                    .cloned()
                    .or_else(|| {
                        member.map(|m| (Arc::from(m.zone.as_str()), Arc::from(m.host.as_str())))
                    })
                    .unwrap_or_else(|| (Arc::from(""), Arc::from("")));
                let (mut report, hot) = if me {
                    (
                        own.map(|r| inputs(r, Duration::ZERO)),
                        own.is_some_and(|r| r.hot_keys.contains(&key_hash)),
                    )
                } else {
                    (
                        c.and_then(|c| c.report.clone()),
                        c.is_some_and(|c| c.hot_keys.binary_search(&key_hash).is_ok()),
                    )
                };
                if let Some(r) = report.as_mut() {
                    r.hot = hot;
                }
                Candidate {
                    id: id.clone(),
                    alive: cluster.is_alive(id),
                    up: member.is_none_or(|m| m.status == NodeStatus::Up),
                    suspect: c.is_some_and(|c| c.suspect),
                    zone,
                    host,
                    report,
                    hints_pending: c.map_or(0, |c| c.hints_pending),
                }
            })
            .collect()
    }
}
