//! The router in the coordinator: the scorer behind a lock, fed with what
//! this node observes (every call's outcome, its requests in flight, what
//! answers piggyback) and what the membership reports, and the decisions
//! it makes: the order in which a request contacts a key's replicas, when
//! to hedge, which replica coordinates a write. A sample of the decisions
//! is logged with their inputs and random draw, so each replays exactly
//! (`kvctl decisions`).

mod candidates;
mod log;

pub use log::{DecisionLog, DecisionRecord};

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kv_router::{
    Ask, BreakerInput, Decision, Feedback, Hedge, Mode, Op, Outcome, RouterSettings, Scorer,
    Ticket, decide,
};
use kv_types::{NodeId, key_hash};

use crate::membership::LoadReport;
use crate::{Clock, Cluster, Error, Result, Rng};

/// How one request contacts a key's replicas.
#[derive(Clone, Debug)]
pub struct Route {
    /// Whom to contact, in order (also the retry and hedge order).
    pub order: Vec<NodeId>,
    /// After how long a read hedges to the next replica, if it may.
    pub hedge_after: Option<Duration>,
    /// Whether hedges are paid from the hedge budget (ours) or not (the
    /// speculative retries of the snitch and HWLB).
    pub budgeted: bool,
    /// Whether this node scored within the near-tie band of the best (it
    /// then coordinates a write it holds a replica of).
    pub local_near_best: bool,
    /// A replica this node keeps out, due a probe: a read asks it too, if
    /// the hedge budget allows ([`kv_router::Decision::latency_probe`]).
    pub latency_probe: Option<NodeId>,
}

/// One decision with the settings, inputs and draw it was made from (a
/// [`DecisionRecord`] without the key and the time, which only a logged
/// or explained decision needs).
struct Made {
    settings: RouterSettings,
    inputs: kv_router::Inputs,
    draw: u64,
    decision: Decision,
}

/// Shared router state of this node.
pub struct Scoring {
    scorer: Mutex<Scorer>,
    local: NodeId,
    /// This node's zone (near-ties prefer it).
    zone: Arc<str>,
    clock: Arc<Clock>,
    rng: Arc<Rng>,
    log: Mutex<DecisionLog>,
    /// This node's own latest load figures (the local candidate's report).
    own: Mutex<Option<LoadReport>>,
    /// The report-derived part of the candidates, reused for
    /// `score_cache` (50 ms).
    reports: candidates::ReportCache,
    /// Hedges whose answer came first.
    hedges_won: AtomicU64,
}

impl Scoring {
    /// A router for coordinator `local` in `zone`.
    ///
    /// # Errors
    /// A refusal naming the bad setting when `settings` is invalid.
    pub fn new(
        settings: RouterSettings,
        local: NodeId,
        zone: String,
        clock: Arc<Clock>,
        rng: Arc<Rng>,
    ) -> Result<Self> {
        let cache = settings.score_cache;
        let scorer = Scorer::new(settings, local.clone())
            .map_err(|e| Error::invalid(format!("router settings: {e}")))?;
        Ok(Scoring {
            scorer: Mutex::new(scorer),
            local,
            zone: zone.into(),
            clock,
            rng,
            log: Mutex::new(DecisionLog::default()),
            own: Mutex::new(None),
            reports: candidates::ReportCache::new(cache),
            hedges_won: AtomicU64::new(0),
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Scorer> {
        self.scorer.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The routing mode in use.
    pub fn mode(&self) -> Mode {
        self.lock().mode()
    }

    /// Switches the routing mode and forgets everything learned.
    pub fn set_mode(&self, mode: Mode) {
        self.lock().set_mode(mode);
        self.reports.clear();
    }

    /// The settings in use.
    pub fn settings(&self) -> RouterSettings {
        self.lock().settings().clone()
    }

    /// Notes this node's own load figures (the local candidate's report).
    pub fn set_own_report(&self, report: LoadReport) {
        *self.own.lock().unwrap_or_else(|p| p.into_inner()) = Some(report);
    }

    /// A request (`op`) to `peer` leaves now.
    pub fn begin(&self, peer: &NodeId, op: Op) -> Ticket {
        self.lock().start(peer, op, self.clock.now().into_std())
    }

    /// A read to `peer` was outrun: a hedge was sent past it, and the
    /// read had its answers from other replicas first, while it runs on.
    /// The age of the oldest request in flight to `peer` floors its
    /// latency at once until the reads now in flight to it have ended
    /// ([`Scorer::outrun`]).
    pub fn outrun(&self, peer: &NodeId) {
        self.lock().outrun(peer);
    }

    /// The request of `ticket`, started at `started` with deadline
    /// `until`, was abandoned before it ended (its caller was cancelled): it
    /// leaves the in-flight count, and the age it had now floors the
    /// peer's latency until it answers anything or `until` passes
    /// ([`Scorer::abandon`]).
    pub fn abandon(
        &self,
        ticket: &Ticket,
        started: tokio::time::Instant,
        until: tokio::time::Instant,
    ) {
        let now = self.clock.now().into_std();
        self.lock()
            .abandon(ticket, started.into_std(), until.into_std(), now);
    }

    /// The request of `ticket` ended: folds in its outcome and what its
    /// answer piggybacked.
    pub fn end(
        &self,
        ticket: &Ticket,
        peer: &NodeId,
        op: Op,
        outcome: Outcome,
        feedback: Option<Feedback>,
    ) {
        let now = self.clock.now().into_std();
        let mut scorer = self.lock();
        scorer.finish(ticket);
        scorer.record(peer, op, outcome, now);
        if let Some(feedback) = feedback {
            scorer.feedback(peer, feedback, now);
        }
    }

    /// Notes that `peer` answered a read of `key` (cache affinity).
    pub fn served(&self, key: &[u8], peer: &NodeId) {
        self.lock().served(key_hash(key), peer);
    }

    /// How to contact `preference` (in ring order) for `op` on `key`,
    /// asking `r` of them: a decision, sampled into the log.
    pub fn route(
        &self,
        cluster: &Cluster,
        preference: &[NodeId],
        op: Op,
        key: &[u8],
        r: usize,
    ) -> Route {
        let made = self.make(cluster, preference, op, key_hash(key), r);
        let now = self.clock.now().into_std();
        let mut scorer = self.lock();
        scorer.observe(&made.inputs, &made.decision, now);
        let mut order = Vec::with_capacity(made.decision.order.len());
        let mut last = Vec::new();
        for id in &made.decision.order {
            let half_open = made
                .inputs
                .candidates
                .iter()
                .any(|c| c.id == *id && c.breaker == BreakerInput::HalfOpen);
            // A half-open breaker lets one probe through: whoever gets it.
            if half_open && !scorer.try_acquire_probe(id, now) {
                last.push(id.clone());
            } else {
                order.push(id.clone());
            }
        }
        order.extend(last);
        let (hedge_after, budgeted) = match made.decision.hedge {
            Hedge::Never => (None, false),
            Hedge::Budgeted { quantile } => (scorer.latency_quantile(op, quantile, now), true),
            Hedge::Speculative { quantile } => (scorer.latency_quantile(op, quantile, now), false),
        };
        drop(scorer);
        let latency_probe = made.decision.latency_probe.clone();
        let local_near_best = local_near_best(&made.decision, &self.local, made.settings.near_tie);
        // Only a sampled decision becomes a record (the key copied, the
        // wall clock read): most requests skip that work.
        if self.rng.next_u64() as f64 / u64::MAX as f64 <= made.settings.decision_log_rate {
            let record = self.record(key, made);
            self.log
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(record);
        }
        Route {
            order,
            hedge_after,
            budgeted,
            local_near_best,
            latency_probe,
        }
    }

    /// The decision for `preference`, with everything it was made from,
    /// logged or not (explain).
    pub fn decide(
        &self,
        cluster: &Cluster,
        preference: &[NodeId],
        op: Op,
        key: &[u8],
        r: usize,
    ) -> DecisionRecord {
        let made = self.make(cluster, preference, op, key_hash(key), r);
        self.record(key, made)
    }

    /// One decision and what it was made from.
    fn make(
        &self,
        cluster: &Cluster,
        preference: &[NodeId],
        op: Op,
        key_hash: u64,
        r: usize,
    ) -> Made {
        let candidates = {
            let own = self.own.lock().unwrap_or_else(|p| p.into_inner());
            self.reports
                .candidates(cluster, preference, key_hash, own.as_ref())
        };
        let ask = Ask {
            op,
            key_hash,
            r,
            zone: &self.zone,
            members: u32::try_from(candidates.members).unwrap_or(u32::MAX),
        };
        let now = self.clock.now().into_std();
        let draw = self.rng.next_u64();
        let mut scorer = self.lock();
        let inputs = scorer.snapshot(&candidates.list, ask, now);
        let settings = scorer.settings().clone();
        drop(scorer);
        let decision = decide(&settings, &inputs, draw);
        Made {
            settings,
            inputs,
            draw,
            decision,
        }
    }

    /// `made` as a record of a decision about `key`, made now.
    fn record(&self, key: &[u8], made: Made) -> DecisionRecord {
        DecisionRecord {
            at_ms: self.clock.wall_ms(),
            node: self.local.clone(),
            key: key.to_vec(),
            settings: made.settings,
            inputs: made.inputs,
            draw: made.draw,
            decision: made.decision,
        }
    }

    /// The logged decisions, newest last: those of `key` (any key when
    /// `None`), at most `last`.
    pub fn decisions(&self, key: Option<&[u8]>, last: usize) -> Vec<DecisionRecord> {
        self.log
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .matching(key, last)
    }

    /// One client request was coordinated: it earns the hedge budget its
    /// share.
    pub fn on_request(&self) {
        self.lock().on_request();
    }

    /// Asks to hedge once: true when the hedge budget allows.
    pub fn try_hedge(&self) -> bool {
        self.lock().try_hedge()
    }

    /// Whether a read that has waited since `started` may hedge to
    /// `target` now ([`Scorer::hedge_may_help`]: not when a read in flight
    /// to `target` is older than that wait).
    pub fn hedge_may_help(&self, target: &NodeId, started: tokio::time::Instant) -> bool {
        let now = self.clock.now();
        let waited = now.saturating_duration_since(started);
        self.lock().hedge_may_help(target, waited, now.into_std())
    }

    /// A hedge's answer came first.
    pub fn hedge_won(&self) {
        self.hedges_won.fetch_add(1, Ordering::Relaxed);
    }

    /// `(sent, won, denied)` hedges so far.
    pub fn hedges(&self) -> (u64, u64, u64) {
        let (sent, denied) = self.lock().hedges();
        (sent, self.hedges_won.load(Ordering::Relaxed), denied)
    }

    /// Requests this node has in flight to `peer`.
    pub fn in_flight(&self, peer: &NodeId) -> usize {
        self.lock().in_flight(peer)
    }
}

/// Whether `local` scored within the near-tie band of the best passing
/// candidate (scoring mode), or, in the other modes, is simply among the
/// candidates contacted (as plain Dynamo coordinates on itself).
fn local_near_best(decision: &Decision, local: &NodeId, near_tie: f64) -> bool {
    let Some(me) = decision.scored.iter().find(|s| s.id == *local) else {
        return false;
    };
    if me.excluded.is_some() {
        return false;
    }
    if decision.mode != Mode::Scoring || decision.fallback.is_some() {
        return true;
    }
    let best = decision
        .scored
        .iter()
        .filter(|s| s.excluded.is_none())
        .map(|s| s.score)
        .fold(f64::MIN, f64::max);
    me.score >= best * (1.0 - near_tie)
}
