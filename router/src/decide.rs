//! [`decide`]: one routing decision, a pure function of its inputs, the
//! settings and one random draw, so that a logged decision replays
//! exactly. Each mode orders the candidates its own way ([`crate::modes`]);
//! every mode leaves dead candidates out (contacting them only waits for a
//! timeout), and every number that decided a place is kept for `explain`.

use kv_types::NodeId;
use serde::{Deserialize, Serialize};

use crate::inputs::{BreakerInput, CandidateInputs, Inputs};
use crate::{Mode, RouterSettings, modes};

/// The outcome of one decision.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Decision {
    /// The mode that decided.
    pub mode: Mode,
    /// Whom to contact, in order: the candidates that passed the mode's
    /// filter by preference, then the ones it filtered out but that are
    /// alive (a last resort). Never a dead one. It is also the retry and
    /// hedge order.
    pub order: Vec<NodeId>,
    /// Every candidate with the numbers behind its place, in input
    /// (preference-list) order.
    pub scored: Vec<Scored>,
    /// Why the scoring mode fell back to the preference-list order, if it
    /// did (too many candidates without fresh state).
    pub fallback: Option<String>,
    /// Candidates whose reports are unconfirmed: probe them directly.
    pub probes: Vec<NodeId>,
    /// A read candidate this coordinator keeps out, due a probe: send it
    /// this read too, at once and paid from the hedge budget, so that its
    /// answer re-tests it (SPEC, "The scoring model": an estimate without
    /// samples "is re-tested by probes"; see
    /// [`crate::RouterSettings::latency_probe`]). Only the scoring mode
    /// probes; `None` for writes.
    #[serde(default)]
    pub latency_probe: Option<NodeId>,
    /// How this mode hedges reads.
    pub hedge: Hedge,
}

/// How a mode hedges a read whose first replicas are slow.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub enum Hedge {
    /// Never (plain, C3 and P2C as published).
    Never,
    /// To the next replica after this quantile of the operation's latency,
    /// within the process's hedge budget (ours).
    Budgeted {
        /// The latency quantile that sets the delay.
        quantile: f64,
    },
    /// Speculative retry after this quantile, not budgeted (Cassandra's
    /// `99p`, ScyllaDB's likewise).
    Speculative {
        /// The latency quantile that sets the delay.
        quantile: f64,
    },
}

/// One candidate in a [`Decision`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Scored {
    /// The node.
    pub id: NodeId,
    /// Why the mode's filter left it out, if it did.
    pub excluded: Option<Exclusion>,
    /// The scoring mode's dimensions (other modes: none).
    pub dimensions: Option<Dimensions>,
    /// The weights the dimensions were combined with.
    pub weights: Option<crate::Weights>,
    /// The latency that was ranked (its EWMA or the cluster mean, and
    /// never below its oldest outstanding request's age), microseconds.
    pub latency_us: Option<f64>,
    /// The penalties (and bonuses) applied, in order.
    pub penalties: Vec<Applied>,
    /// The final score in the mode's own terms: ours and the snitch's are
    /// larger-is-better scores; C3's is its rank and P2C's its cost
    /// (smaller is better); HWLB's is the read probability.
    pub score: f64,
}

/// Why a candidate was filtered out.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Exclusion {
    /// The failure detector says it is dead.
    Dead,
    /// Its circuit breaker is open for this many more milliseconds.
    BreakerOpen {
        /// Time left, ms.
        remaining_ms: u64,
    },
    /// Its breaker is half-open and the one probe is in flight.
    ProbeInFlight,
    /// Too many of its recent requests failed.
    FailureRate {
        /// Failures over requests in the window.
        rate: f64,
        /// Requests in the window.
        requests: u64,
    },
    /// Two or more nodes of its host are blacklisted.
    HostOut,
}

impl std::fmt::Display for Exclusion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Exclusion::Dead => f.write_str("dead (failure detector)"),
            Exclusion::BreakerOpen { remaining_ms } => {
                write!(f, "circuit breaker open for {remaining_ms} ms more")
            }
            Exclusion::ProbeInFlight => f.write_str("half-open, probe in flight"),
            Exclusion::FailureRate { rate, requests } => {
                write!(
                    f,
                    "{:.0}% of {requests} recent requests failed",
                    rate * 100.0
                )
            }
            Exclusion::HostOut => f.write_str("its host is out (2+ nodes blacklisted)"),
        }
    }
}

/// The four dimensions of the scoring mode, each in [0, 1], larger is
/// better.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Dimensions {
    /// 1 - max(cpu, queue/max, backlog/max, in-flight/limit).
    pub load: f64,
    /// By rank among the candidates: best 1.0 ... worst 0.1.
    pub latency: f64,
    /// Cache heat: hit ratio, lower without affinity to the key.
    pub hit: f64,
    /// 1 - 2 x recent failure rate, clamped.
    pub availability: f64,
}

/// A multiplicative factor applied to a score.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Applied {
    /// Which rule.
    pub rule: Penalty,
    /// The factor (below 1: a penalty; above: the local replica's credit).
    pub factor: f64,
}

/// The rules that multiply a score.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Penalty {
    /// Its score declined two report periods in a row.
    Declining,
    /// Its recent error rate is above the threshold.
    Errors,
    /// It is cooling down after an error-rate excursion.
    Cooldown,
    /// Its request queue is above the threshold.
    Queue,
    /// Its phi is above half the conviction threshold.
    Suspect,
    /// Hints are pending for it elsewhere.
    Hints,
    /// It runs a repair pass.
    Repair,
    /// Its report is stale: the score is its decaying baseline.
    Stale,
    /// The local replica's credit for the round trip it saves.
    HopCredit,
}

/// Orders `inputs.candidates` by `inputs.mode`, drawing any randomness
/// from `draw`. The same inputs, settings and draw give the same decision.
pub fn decide(settings: &RouterSettings, inputs: &Inputs, draw: u64) -> Decision {
    match inputs.mode {
        Mode::Plain => modes::plain::decide(inputs),
        Mode::Snitch => modes::snitch::decide(settings, inputs),
        Mode::Hwlb => modes::hwlb::decide(settings, inputs, draw),
        Mode::C3 => modes::c3::decide(settings, inputs),
        Mode::P2c => modes::p2c::decide(inputs, draw),
        Mode::Scoring => modes::scoring::decide(settings, inputs, draw),
    }
}

/// The scoring mode's hard filter: dead, breaker open or probing, failure
/// rate, host out (in this order; the first that applies is reported).
pub(crate) fn hard_filter(settings: &RouterSettings, c: &CandidateInputs) -> Option<Exclusion> {
    if !c.alive {
        return Some(Exclusion::Dead);
    }
    match c.breaker {
        BreakerInput::Open { remaining_ms } => {
            return Some(Exclusion::BreakerOpen { remaining_ms });
        }
        BreakerInput::Probing => return Some(Exclusion::ProbeInFlight),
        BreakerInput::Closed | BreakerInput::HalfOpen => {}
    }
    let rate = c.failure_rate();
    if c.window_requests >= settings.min_failure_requests && rate > settings.max_failure_rate {
        return Some(Exclusion::FailureRate {
            rate,
            requests: c.window_requests,
        });
    }
    c.host_out.then_some(Exclusion::HostOut)
}

/// A [`Scored`] with only an exclusion and a score.
pub(crate) fn plain_scored(c: &CandidateInputs, excluded: Option<Exclusion>, score: f64) -> Scored {
    Scored {
        id: c.id.clone(),
        excluded,
        dimensions: None,
        weights: None,
        latency_us: c.effective_latency_us(),
        penalties: Vec::new(),
        score,
    }
}

/// The contact order: `first` (already ordered), then every other
/// candidate that is not dead, in preference order.
pub(crate) fn assemble(inputs: &Inputs, first: Vec<NodeId>, scored: &[Scored]) -> Vec<NodeId> {
    let mut order = first;
    for s in scored {
        if s.excluded != Some(Exclusion::Dead) && !order.contains(&s.id) {
            order.push(s.id.clone());
        }
    }
    debug_assert!(order.len() <= inputs.candidates.len());
    order
}
