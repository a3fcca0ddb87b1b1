//! What the client knows of the cluster: the ring a node answered
//! ([`RingReport`]), rebuilt into preference lists, and each member's client
//! address, liveness and load report, with when it was learned.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use kv_router::{Candidate, Mode, ReportInputs, Ring};
use kv_types::{NodeId, NodeStatus};
use kv_wire::{MemberLoad, RingReport, RingReportV2};

/// One member as the client knows it.
#[derive(Clone, Debug)]
pub(crate) struct Member {
    /// Its client address, `HOST:PORT` (empty when unknown).
    pub addr: String,
    /// `addr` parsed, when it is an IP literal (names resolve on use).
    pub socket: Option<SocketAddr>,
    /// Its zone and host (shared text: a routing decision clones them).
    pub zone: Arc<str>,
    pub host: Arc<str>,
    pub status: NodeStatus,
    /// Alive for the node that answered.
    pub alive: bool,
    pub suspect: bool,
    pub hints_pending: u64,
    pub report: Option<MemberLoad>,
    /// Its process generation, when the answer carried it (`RingV2`).
    pub generation: Option<u64>,
}

/// The cluster as one `RingV2` (or `Ring`) answer showed it.
#[derive(Clone, Debug)]
pub(crate) struct Known {
    /// The ring's preference lists.
    pub ring: Ring,
    /// The placement version answers carry.
    pub version: u64,
    /// The answering node's routing mode.
    pub mode: Mode,
    pub members: BTreeMap<NodeId, Member>,
    /// When the answer arrived (report ages grow from here).
    pub learned: Instant,
    /// The answer itself (what the cache keeps).
    pub report: RingReport,
}

impl Known {
    /// Reads a node's answer; `age` is how old it already is (zero when it
    /// just arrived, the time since it was saved when read from a cache).
    ///
    /// # Errors
    /// A message when the placement does not decode into a ring or the
    /// mode or a member is unknown.
    pub fn from_report(report: RingReport, age: Duration) -> Result<Known, String> {
        let ring = Ring::from_bytes(&report.placement)
            .map_err(|e| format!("{}'s ring does not decode: {e}", report.node))?;
        let mode: Mode = report
            .mode
            .parse()
            .map_err(|e| format!("{}'s routing mode: {e}", report.node))?;
        let mut members = BTreeMap::new();
        for m in &report.members {
            let id = NodeId::new(m.id.as_str()).map_err(|e| format!("member {:?}: {e}", m.id))?;
            let status: NodeStatus = m
                .status
                .parse()
                .map_err(|e| format!("member {id}'s status: {e}"))?;
            members.insert(
                id,
                Member {
                    socket: m.addr.parse().ok(),
                    addr: m.addr.clone(),
                    zone: m.zone.as_str().into(),
                    host: m.host.as_str().into(),
                    status,
                    alive: m.alive,
                    suspect: m.suspect,
                    hints_pending: m.hints_pending,
                    report: m.report.clone(),
                    generation: None,
                },
            );
        }
        let learned = Instant::now().checked_sub(age).unwrap_or_else(Instant::now);
        Ok(Known {
            ring,
            version: report.ring_version,
            mode,
            members,
            learned,
            report,
        })
    }

    /// Reads a node's `RingV2` answer as [`Known::from_report`] does, with
    /// each member's process generation.
    ///
    /// # Errors
    /// As [`Known::from_report`].
    pub fn from_report_v2(report: RingReportV2, age: Duration) -> Result<Known, String> {
        let generations: BTreeMap<String, u64> = report
            .ring
            .members
            .iter()
            .zip(&report.generations)
            .filter_map(|(m, g)| Some((m.id.clone(), (*g)?)))
            .collect();
        let mut known = Known::from_report(report.ring, age)?;
        for (id, member) in known.members.iter_mut() {
            member.generation = generations.get(id.as_str()).copied();
        }
        Ok(known)
    }

    /// The router's candidates for the replicas `preference` of a key of
    /// hash `key_hash`, at `now`; `dead` says which the client itself
    /// failed to reach lately.
    pub fn candidates(
        &self,
        preference: &[NodeId],
        key_hash: u64,
        now: Instant,
        dead: impl Fn(&str) -> bool,
    ) -> Vec<Candidate> {
        let since = now.saturating_duration_since(self.learned);
        preference
            .iter()
            .map(|id| {
                let m = self.members.get(id);
                let report = m.and_then(|m| m.report.as_ref()).map(|r| ReportInputs {
                    age_ms: r
                        .age_ms
                        .saturating_add(u64::try_from(since.as_millis()).unwrap_or(u64::MAX)),
                    cpu: r.cpu,
                    queue: r.queue,
                    backlog: r.backlog,
                    hit_ratio: r.hit_ratio,
                    hot: r.hot_keys.contains(&key_hash),
                    repair: r.repair,
                });
                // Marked dead by this client itself (a failed connection):
                // the process may have restarted since the ring answer
                // named its generation, so none is claimed.
                let marked = m.is_some_and(|m| m.alive && !m.addr.is_empty() && dead(&m.addr));
                Candidate {
                    id: id.clone(),
                    alive: m.is_some_and(|m| m.alive && !m.addr.is_empty()) && !marked,
                    up: m.is_none_or(|m| m.status == NodeStatus::Up),
                    suspect: m.is_some_and(|m| m.suspect),
                    zone: m.map_or_else(|| Arc::from(""), |m| Arc::clone(&m.zone)),
                    host: m.map_or_else(|| Arc::from(""), |m| Arc::clone(&m.host)),
                    report,
                    hints_pending: m.map_or(0, |m| m.hints_pending),
                    generation: m.filter(|_| !marked).and_then(|m| m.generation),
                }
            })
            .collect()
    }
}
