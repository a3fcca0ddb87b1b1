//! What a routing decision reads: one snapshot of every candidate replica,
//! taken by the stateful [`crate::Scorer`] at decision time. Plain data
//! (serde), so that a decision can be logged with its inputs and replayed
//! through [`crate::decide`] exactly.
//!
//! Freshest first (docs/design.md, "The scoring model"): what this
//! coordinator sees itself (requests in flight, the age of the oldest, its
//! latency samples, answers and failures), what each replica answer
//! piggybacks (queue depth, service time, as C3), then the gossip report
//! (load, hit ratio, hot keys, hints pending, repair running).

use std::sync::Arc;

use kv_types::NodeId;
use serde::{Deserialize, Serialize};

use crate::Mode;
use crate::scorer::Op;

/// How many times its latency estimate a peer's oldest outstanding request
/// must have waited before its age is the peer's latency. Below it the
/// age is the tail every busy peer has in flight: measured at a client
/// under hot keys (docs/benchmarks.md, "Per-key ties"), the oldest age
/// over the EWMA was 1.0 at the median, 3.2 at p90, 4.6 at p95 and 10.8
/// at p99, and ranking by it moved keys between coordinators for
/// nothing. A peer frozen for 200 ms crosses it within a few
/// milliseconds.
pub const STUCK_FACTOR: f64 = 5.0;

/// One decision's inputs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Inputs {
    /// The routing mode.
    pub mode: Mode,
    /// The operation (reads and writes keep separate latencies).
    pub op: Op,
    /// xxh3 of the key.
    pub key_hash: u64,
    /// The coordinator's zone (near-ties prefer it).
    pub local_zone: Arc<str>,
    /// Replicas a read asks (R); HWLB caps a replica's share at 1/R.
    pub r: usize,
    /// The coordinator's recent p99 latency of this operation across peers,
    /// microseconds (the latency weight rises when it is high).
    pub cluster_p99_us: Option<f64>,
    /// C3's `n`: the number of coordinators sending to the replicas.
    pub coordinators: u32,
    /// The candidates, in preference-list order.
    pub candidates: Vec<CandidateInputs>,
}

/// One candidate replica at decision time.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CandidateInputs {
    /// The node.
    pub id: NodeId,
    /// Whether it is the coordinator itself.
    pub local: bool,
    /// Its zone (shared text: cloned per decision without allocating).
    pub zone: Arc<str>,
    /// Its host (physical machine).
    pub host: Arc<str>,
    /// Whether the phi-accrual failure detector believes it alive.
    pub alive: bool,
    /// Whether its phi is above half the conviction threshold (seed 003's
    /// "suspect" health).
    pub suspect: bool,
    /// Its circuit breaker.
    pub breaker: BreakerInput,
    /// Requests to it in the failure window.
    pub window_requests: u64,
    /// Of which failed.
    pub window_failures: u64,
    /// Two or more nodes of its host are blacklisted: the host is out.
    pub host_out: bool,
    /// Its latency EWMA for the operation, microseconds (with no new
    /// samples it drifts toward the cluster mean).
    pub latency_us: Option<f64>,
    /// Samples behind `latency_us`.
    pub latency_samples: u64,
    /// The age of its oldest request this coordinator has in flight, us.
    pub oldest_us: Option<f64>,
    /// Whether `oldest_us` comes from a request abandoned without an
    /// answer (its caller was cancelled, as a hedge's loser was before
    /// losers ran on to their answers: docs/design.md, "A hedge's loser
    /// runs on"): nothing will end it but its hold, so it floors the
    /// latency whatever [`STUCK_FACTOR`] says.
    #[serde(default)]
    pub abandoned: bool,
    /// Whether a request in flight to it has waited more than
    /// [`STUCK_FACTOR`] times its estimate for that request's own
    /// operation (a read stuck on a frozen peer floors it for writes too,
    /// without waiting five write-times). Floors the latency like
    /// `abandoned`.
    #[serde(default)]
    pub overdue: bool,
    /// Whether a read in flight to it was outrun (a hedge was sent past
    /// it and the read it served had its answers without it), and a read
    /// that was in flight to it then is still in flight
    /// ([`crate::Scorer::outrun`]). Floors the latency like `abandoned`,
    /// at once rather than after [`STUCK_FACTOR`] times the estimate.
    #[serde(default)]
    pub outrun: bool,
    /// Whether this coordinator keeps it out: it is remote, past its slow
    /// start, and no decision put it among the first R for at least
    /// [`crate::RouterSettings::latency_probe`]. Then `peak_us` counts.
    #[serde(default)]
    pub kept_out: bool,
    /// While it is kept out, its slowest read answer since it was kept
    /// out (a probe's or a hedge's), decayed by age (`l x exp(-age /
    /// probe_peak_decay)`), microseconds; for writes too. It is ranked by
    /// the larger of this and `latency_us`, so a peer whose probes meet
    /// pauses stays out until the decay says otherwise, rather than coming
    /// back when its estimate drifts below its peers'. Answers from before
    /// it was kept out do not count: a healthy peer's hiccup in its
    /// regular traffic does not hold it out.
    #[serde(default)]
    pub peak_us: Option<f64>,
    /// Whether a probe read is due to it: it is kept out, no read to it is
    /// in flight, and none was sent for at least
    /// [`crate::RouterSettings::latency_probe`] (see
    /// [`crate::Decision::latency_probe`]).
    #[serde(default)]
    pub probe_due: bool,
    /// Requests this coordinator has in flight to it.
    pub in_flight: u32,
    /// Its recent service time (piggybacked by its answers, or measured
    /// in-process for the local replica), microseconds.
    pub service_us: Option<f64>,
    /// Its request-queue depth (piggybacked by its answers).
    pub queue: Option<f64>,
    /// Its last gossip report, if any.
    pub report: Option<ReportInputs>,
    /// Hints other nodes hold for it (it is probably behind).
    pub hints_pending: u64,
    /// Whether this coordinator served this key on it recently.
    pub affinity: bool,
    /// Whether its report-derived score declined two periods in a row.
    pub declining: bool,
    /// Cool-down weight after an error-rate excursion or as a latency
    /// outlier (1.0: none).
    pub cooldown: f64,
    /// Slow-start ramp since it turned UP (0.6 ..= 1.0; 1.0: done).
    pub ramp: f64,
    /// Its historical median score (the baseline while its report is
    /// stale).
    pub baseline: Option<f64>,
    /// Report periods its report has been stale.
    pub stale_periods: u32,
    /// The figures the peers' schemes keep (see [`ModeInputs`]).
    pub modes: ModeInputs,
}

/// A candidate's circuit breaker at decision time.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum BreakerInput {
    /// Requests flow.
    Closed,
    /// Open for this many more milliseconds.
    Open {
        /// Time left of the cool-down, ms.
        remaining_ms: u64,
    },
    /// Half-open: one probe may go (it goes to the probe's caller).
    HalfOpen,
    /// Half-open with its probe in flight.
    Probing,
}

/// What a candidate last reported in gossip.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ReportInputs {
    /// Age of the report, ms.
    pub age_ms: u64,
    /// CPU use over the last seconds, 0.0 ..= 1.0.
    pub cpu: f64,
    /// Replica requests accepted and not answered.
    pub queue: u32,
    /// Writes applied and not yet flushed.
    pub backlog: u32,
    /// Read-cache hit ratio, 0.0 ..= 1.0.
    pub hit_ratio: f64,
    /// Whether the key is among its reported hot keys.
    pub hot: bool,
    /// Whether it runs an anti-entropy repair pass.
    pub repair: bool,
}

/// The figures the peers' schemes keep per replica (each mode reads its
/// own; they are updated for every mode so a switch starts warm).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ModeInputs {
    /// Cassandra's dynamic snitch: median latency over its window relative
    /// to the worst replica's (0.0 ..= 1.0, lower is better).
    pub snitch: Option<f64>,
    /// C3's response-time EWMA (alpha 0.3), microseconds.
    pub c3_response_us: Option<f64>,
    /// C3's service-time EWMA (alpha 0.3), microseconds (1/mu).
    pub c3_service_us: Option<f64>,
    /// C3's queue-size EWMA (alpha 0.3) of the piggybacked queue.
    pub c3_queue: Option<f64>,
    /// P2C's peak-EWMA latency, microseconds.
    pub peak_us: Option<f64>,
}

impl CandidateInputs {
    /// A healthy candidate with nothing known yet (tests, and the start of
    /// a snapshot).
    pub fn new(id: NodeId) -> Self {
        CandidateInputs {
            id,
            local: false,
            zone: Arc::from(""),
            host: Arc::from(""),
            alive: true,
            suspect: false,
            breaker: BreakerInput::Closed,
            window_requests: 0,
            window_failures: 0,
            host_out: false,
            latency_us: None,
            latency_samples: 0,
            oldest_us: None,
            abandoned: false,
            overdue: false,
            outrun: false,
            kept_out: false,
            peak_us: None,
            probe_due: false,
            in_flight: 0,
            service_us: None,
            queue: None,
            report: None,
            hints_pending: 0,
            affinity: false,
            declining: false,
            cooldown: 1.0,
            ramp: 1.0,
            baseline: None,
            stale_periods: 0,
            modes: ModeInputs::default(),
        }
    }

    /// Failures over requests in the failure window (0 without requests).
    pub fn failure_rate(&self) -> f64 {
        if self.window_requests == 0 {
            0.0
        } else {
            self.window_failures as f64 / self.window_requests as f64
        }
    }

    /// The latency that counts now: its EWMA (or, while it is kept out,
    /// its decayed slowest answer since it was kept out, when larger: `peak_us`),
    /// but never less than the age of its oldest outstanding request once
    /// that age is over [`STUCK_FACTOR`] times the EWMA (a peer frozen for
    /// 150 ms looks 150 ms slow at once).
    pub fn effective_latency_us(&self) -> Option<f64> {
        let latency = match (self.latency_us, self.peak_us) {
            (Some(l), Some(p)) => Some(l.max(p)),
            (l, p) => l.or(p),
        };
        match (latency, self.oldest_us) {
            (Some(l), Some(o)) if self.floored() => Some(l.max(o)),
            (Some(l), _) => Some(l),
            (None, o) => o,
        }
    }

    /// Whether the age of its oldest (or abandoned) request floors its
    /// latency now: a request abandoned without an answer, one in flight
    /// for more than [`STUCK_FACTOR`] times the estimate of the operation
    /// being routed, or one in flight for more than that times the
    /// estimate of its own operation (`overdue`), or one outrun by another
    /// replica's answer (`outrun`). A floored latency ranks below every
    /// faster candidate, without the latency tie band: the peer is not
    /// answering, which no noise explains.
    pub fn floored(&self) -> bool {
        match (self.latency_us, self.oldest_us) {
            (Some(l), Some(o)) => {
                self.abandoned || self.overdue || self.outrun || o > STUCK_FACTOR * l
            }
            (None, o) => o.is_some(),
            (Some(_), None) => false,
        }
    }
}
