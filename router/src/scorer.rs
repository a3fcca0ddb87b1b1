//! The replica scorer: orders a key's candidate replicas before the
//! coordinator fans out (design.md, "The scoring model"; seeds 000 and
//! 003).
//!
//! A pure state machine: [`Scorer::record`] folds in what the coordinator
//! observed about a peer, [`Scorer::rank`] orders candidates, and time is
//! always an argument. Two stages, as in design.md:
//!
//! 1. **Hard filter** (in this order; the first reason that applies is
//!    reported): the failure detector says dead; the circuit breaker is open
//!    ([`crate::breaker`]); its half-open probe is already in flight; more
//!    than 30% of at least 10 requests failed in the last minute
//!    ([`crate::window`]). Excluded candidates come last, in input order:
//!    they are still the last resort.
//! 2. **Score** in [0, 1], larger is better. For now the latency dimension
//!    only (load, hit and availability, weights and penalties come later and
//!    slot in beside it): the per-peer, per-operation EWMA (alpha 0.2) is
//!    scored by *rank* among the remaining candidates, best 1.0 to worst
//!    0.1, linearly (seed 000 section 3.1: ranks are immune to outliers). A
//!    peer with fewer than 1000 samples is ranked by the cluster mean (the
//!    mean EWMA of the remote peers that do have 1000 samples) instead of its
//!    own; with no such peer, by the mean of the candidates that have a
//!    value; with no value anywhere all candidates score 1.0.
//!
//! **Determinism and hysteresis.** Latencies within 5% of each other share a
//! rank (a peer's rank counts only the candidates more than 5% faster), and
//! the final order keeps the input (preference-list) order among scores
//! within 5% of the best remaining one: at each step the earliest remaining
//! candidate whose score is at least 95% of the best remaining score goes
//! next. Equal inputs always give equal orders; design.md's random choice
//! among near-ties (or softmax with T > 0) can be layered on top with a
//! seeded RNG.
//!
//! **Half-open probes.** A candidate whose breaker is half-open with its
//! probe still free is *not* excluded and is flagged
//! [`Ranked::needs_probe`]: the caller must call
//! [`Scorer::try_acquire_probe`] before sending to it and skip it when that
//! returns false. That call grants exactly one probe per half-open period.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use kv_types::NodeId;

use crate::breaker::{self, Breaker, BreakerState};
use crate::ewma::{self, Ewma};
use crate::window::FailureWindow;
use crate::{Error, Result};

/// The operation a latency belongs to: gets and puts are tracked apart
/// (seed 000 section 2.2: their latencies differ by an order of magnitude).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Op {
    /// A read.
    Get,
    /// A write (and a delete, which is a tombstone write).
    Put,
}

/// What became of one request to a peer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// It answered, after `latency` (send to response).
    Ok {
        /// Round-trip time of the request.
        latency: Duration,
    },
    /// It answered with an error.
    Error,
    /// No answer within the request's deadline.
    Timeout,
}

/// One candidate replica, as the coordinator sees it now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Candidate {
    /// The node.
    pub id: NodeId,
    /// Whether chitchat's phi-accrual failure detector considers it live
    /// (design.md, Membership: liveness comes only from there).
    pub alive: bool,
    /// Whether it is the coordinator itself. No bonus for now: the
    /// coordinator records its local operations like any other, with their
    /// (near zero) in-process latency, and the local node is left out of the
    /// cluster mean so that it does not make unmeasured peers look fast.
    pub is_local: bool,
}

/// Why a candidate did not pass the hard filter.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ExcludeReason {
    /// The failure detector says it is dead.
    Dead,
    /// Its circuit breaker is open until the given instant.
    BreakerOpen {
        /// End of the cool-down.
        until: Instant,
    },
    /// Its breaker is half-open and the one probe is already in flight.
    ProbeInFlight,
    /// Too many of its recent requests failed.
    FailureRate {
        /// Failures / requests over the window.
        rate: f64,
        /// Requests over the window.
        requests: u64,
    },
}

/// The latency numbers behind a candidate's latency score.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LatencyInputs {
    /// The peer's own EWMA for the operation, microseconds.
    pub own_us: Option<f64>,
    /// Samples behind `own_us`.
    pub samples: u64,
    /// The cluster mean used for peers with too few samples, microseconds.
    pub cluster_mean_us: Option<f64>,
    /// The value that was ranked, microseconds (`None`: no value anywhere).
    pub used_us: Option<f64>,
    /// Whether `used_us` is a substitute rather than `own_us`.
    pub substituted: bool,
}

/// One candidate in the order chosen by [`Scorer::rank`], with every number
/// used, so that `kvctl explain` can print the decision.
#[derive(Clone, Debug, PartialEq)]
pub struct Ranked {
    /// The node.
    pub id: NodeId,
    /// Its index in the candidate list given to `rank` (its preference-list
    /// position).
    pub position: usize,
    /// Whether it is the coordinator itself.
    pub is_local: bool,
    /// The final score in [0, 1]; 0.0 when excluded.
    pub score: f64,
    /// Why it failed the hard filter, if it did.
    pub excluded: Option<ExcludeReason>,
    /// Latency dimension in [0.1, 1]; 0.0 when excluded.
    pub latency_score: f64,
    /// The numbers behind `latency_score`.
    pub latency: LatencyInputs,
    /// Failures / requests over the failure window.
    pub failure_rate: f64,
    /// Requests over the failure window.
    pub window_requests: u64,
    /// Its breaker at the time of ranking.
    pub breaker: BreakerState,
    /// The breaker is half-open with its probe free: call
    /// [`Scorer::try_acquire_probe`] before sending, skip it on `false`.
    pub needs_probe: bool,
}

/// Tunables of the scorer; the defaults are design.md, "The scoring model".
#[derive(Clone, Debug, PartialEq)]
pub struct ScorerSettings {
    /// EWMA smoothing factor in (0, 1]. Default 0.2 (design.md, "The scoring model"; seed 000).
    pub ewma_alpha: f64,
    /// Consecutive timeouts/errors that open a breaker. Default 5 (design.md, "The scoring model").
    pub breaker_threshold: u32,
    /// How long a breaker stays open before its half-open probe. Default 5 s.
    pub breaker_cooldown: Duration,
    /// Width of one failure-window bucket. Default 10 s.
    pub failure_bucket: Duration,
    /// Buckets in the failure window. Default 6 (one minute, design.md).
    pub failure_buckets: usize,
    /// Failure rate above which a peer is excluded. Default 0.30 (design.md, "The scoring model").
    pub max_failure_rate: f64,
    /// Requests in the window before the failure rate counts. Default 10.
    pub min_failure_requests: u64,
    /// Samples before a peer's own EWMA is trusted. Default 1000 (design.md, "The scoring model").
    pub min_latency_samples: u64,
    /// Relative band treated as a tie, for latencies and scores. Default
    /// 0.05 (design.md, "The scoring model": "near-ties (within 5%)").
    pub tie_tolerance: f64,
    /// Latency score of the slowest candidate. Default 0.1 (design.md, "The scoring model").
    pub worst_rank_score: f64,
}

impl Default for ScorerSettings {
    fn default() -> Self {
        ScorerSettings {
            ewma_alpha: ewma::DEFAULT_ALPHA,
            breaker_threshold: breaker::DEFAULT_THRESHOLD,
            breaker_cooldown: breaker::DEFAULT_COOLDOWN,
            failure_bucket: Duration::from_secs(10),
            failure_buckets: 6,
            max_failure_rate: 0.30,
            min_failure_requests: 10,
            min_latency_samples: 1000,
            tie_tolerance: 0.05,
            worst_rank_score: 0.1,
        }
    }
}

impl ScorerSettings {
    /// Checks ranges: alpha in (0, 1], rates and tolerances in [0, 1],
    /// threshold and buckets at least 1, bucket width at least 1 ms.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] naming the bad field.
    pub fn validate(&self) -> Result<()> {
        let unit = |x: f64| (0.0..=1.0).contains(&x);
        let bad = |what: &str| Err(Error::InvalidConfig(format!("scorer: {what}")));
        if !(self.ewma_alpha > 0.0 && self.ewma_alpha <= 1.0) {
            return bad("ewma_alpha must be in (0, 1]");
        }
        if self.breaker_threshold == 0 || self.failure_buckets == 0 {
            return bad("breaker_threshold and failure_buckets must be at least 1");
        }
        if self.failure_bucket < Duration::from_millis(1) {
            return bad("failure_bucket must be at least 1 ms");
        }
        if !unit(self.max_failure_rate) || !unit(self.tie_tolerance) {
            return bad("max_failure_rate and tie_tolerance must be in [0, 1]");
        }
        if !unit(self.worst_rank_score) {
            return bad("worst_rank_score must be in [0, 1]");
        }
        Ok(())
    }
}

/// What the scorer knows about one peer.
#[derive(Clone, Debug)]
struct Peer {
    /// Latency EWMA per operation: `[get, put]`.
    latency: [Ewma; 2],
    /// Consecutive-failure breaker.
    breaker: Breaker,
    /// Recent requests and failures.
    window: FailureWindow,
}

fn op_index(op: Op) -> usize {
    match op {
        Op::Get => 0,
        Op::Put => 1,
    }
}

/// Per-peer observations and the ranking built on them.
#[derive(Clone, Debug)]
pub struct Scorer {
    config: ScorerSettings,
    /// The coordinator's own node, left out of the cluster mean.
    local: NodeId,
    /// Every peer recorded so far (see [`Scorer::forget`]).
    /// BTreeMap: iteration order (and so the floating-point cluster mean)
    /// must not depend on a hasher's random seed.
    peers: BTreeMap<NodeId, Peer>,
}

impl Scorer {
    /// A scorer for the coordinator `local`, knowing nothing yet.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] if `config` fails validation.
    pub fn new(config: ScorerSettings, local: NodeId) -> Result<Scorer> {
        config.validate()?;
        Ok(Scorer {
            config,
            local,
            peers: BTreeMap::new(),
        })
    }

    /// The configuration in use.
    pub fn config(&self) -> &ScorerSettings {
        &self.config
    }

    fn peer_mut(&mut self, id: &NodeId) -> &mut Peer {
        let c = &self.config;
        self.peers.entry(id.clone()).or_insert_with(|| Peer {
            latency: [Ewma::new(); 2],
            breaker: Breaker::new(c.breaker_threshold, c.breaker_cooldown),
            window: FailureWindow::new(c.failure_bucket, c.failure_buckets),
        })
    }

    /// Folds in the outcome of one request to `peer` that finished at `now`.
    /// Only successes feed the latency EWMA (a timeout's latency is the
    /// deadline, not the peer's); every outcome feeds the failure window and
    /// the breaker.
    pub fn record(&mut self, peer: &NodeId, op: Op, outcome: Outcome, now: Instant) {
        let alpha = self.config.ewma_alpha;
        let p = self.peer_mut(peer);
        match outcome {
            Outcome::Ok { latency } => {
                p.latency[op_index(op)].record(latency, alpha);
                p.window.record(false, now);
                p.breaker.on_success(now);
            }
            Outcome::Error | Outcome::Timeout => {
                p.window.record(true, now);
                p.breaker.on_failure(now);
            }
        }
    }

    /// Asks to send one request to `peer` at `now`: true when its breaker is
    /// closed, false when open, and true exactly once per half-open period
    /// (the probe). Unknown peers are closed.
    pub fn try_acquire_probe(&mut self, peer: &NodeId, now: Instant) -> bool {
        match self.peers.get_mut(peer) {
            Some(p) => p.breaker.try_acquire(now),
            None => true,
        }
    }

    /// The breaker state of `peer` at `now` (closed for unknown peers).
    pub fn breaker_state(&self, peer: &NodeId, now: Instant) -> BreakerState {
        self.peers
            .get(peer)
            .map_or(BreakerState::Closed, |p| p.breaker.state(now))
    }

    /// The latency EWMA of `peer` for `op` (`None` for a peer never
    /// recorded; [`Ewma::samples`] tells how much it is worth).
    pub fn latency(&self, peer: &NodeId, op: Op) -> Option<Ewma> {
        self.peers.get(peer).map(|p| p.latency[op_index(op)])
    }

    /// Drops everything known about `peer` (it left the cluster).
    pub fn forget(&mut self, peer: &NodeId) {
        self.peers.remove(peer);
    }

    /// The cluster mean for `op`: the mean EWMA of the remote peers with
    /// enough samples, in microseconds.
    pub fn cluster_mean_us(&self, op: Op) -> Option<f64> {
        self.mean_excluding(op, &[])
    }

    fn mean_excluding(&self, op: Op, local: &[&NodeId]) -> Option<f64> {
        let min = self.config.min_latency_samples;
        let (sum, count) = self
            .peers
            .iter()
            .filter(|(id, _)| **id != self.local && !local.contains(id))
            .filter_map(|(_, p)| {
                let e = p.latency[op_index(op)];
                (e.samples() >= min).then(|| e.value_us()).flatten()
            })
            .fold((0.0, 0u32), |(s, c), v| (s + v, c + 1));
        (count > 0).then(|| sum / f64::from(count))
    }
}

mod rank;
