//! The stateful side of routing: what one coordinator has learned about
//! its peers (latencies per operation, failures, breakers, requests in
//! flight, piggybacked feedback, score history, cool-downs, slow starts,
//! the figures the peers' schemes keep), and the snapshot of it a decision
//! reads ([`Scorer::snapshot`], then [`crate::decide`]).
//!
//! A pure state machine: every method takes `now` (the caller's clock;
//! tests pass a fake one) and nothing reads a clock or does I/O. Periodic
//! upkeep (latency drift toward the cluster mean, the score history behind
//! the declining penalty and the baseline, cool-downs, the snitch's
//! recomputation) runs lazily, once per report period, from
//! [`Scorer::snapshot`].

mod period;
mod snapshot;

pub use snapshot::{Ask, Candidate};

use std::collections::{BTreeMap, VecDeque};
use std::time::{Duration, Instant};

use kv_types::NodeId;
use serde::{Deserialize, Serialize};

use crate::affinity::Affinity;
use crate::breaker::{Breaker, BreakerState};
use crate::ewma::Ewma;
use crate::hedge::{HedgeBudget, LatencyQuantiles};
use crate::window::FailureWindow;
use crate::{Decision, Mode, Result, RouterSettings};

/// The operation a latency belongs to: gets and puts are tracked apart
/// (design note 000 section 2.2: their latencies differ by an order of
/// magnitude).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
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

/// Largest service time [`Scorer::feedback`] folds in, microseconds (one
/// hour); larger ones count as this.
pub const MAX_SERVICE_US: f64 = 3_600_000_000.0;

/// What a replica's answer piggybacks (C3's feedback).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Feedback {
    /// Replica requests it had accepted and not answered.
    pub queue: u32,
    /// Its recent service time, microseconds.
    pub service_us: f64,
}

/// A request in flight to a peer (see [`Scorer::start`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ticket {
    peer: NodeId,
    id: u64,
    /// Which of the peer's in-flight maps holds it ([`op_index`]).
    op: usize,
}

/// Key-hash bits of the affinity table: 4,096 slots, the keys whose
/// recent reads this coordinator remembers.
const AFFINITY_BITS: u32 = 12;

/// How many times an abandoned request's hold doubles for the requests
/// abandoned before it since the peer last answered (see
/// [`Scorer::abandon`]): at most 16 times `abandoned_hold` times its age.
pub const ABANDONED_DOUBLINGS: u32 = 4;

/// Slow requests a peer must have had in a report period to be that
/// period's latency outlier (see
/// [`crate::RouterSettings::outlier_share`]): one or two slow answers are
/// a scheduler's hiccup, not a slow replica.
pub const OUTLIER_MIN_SLOW: u32 = 3;

/// One peer's requests in one report period as outlier judgement counts
/// them: those counted (`seen`), those of them slow (`slow`), and the
/// highest ratio of a slow one's latency to its bar (`peak`, the
/// tie-break between peers slow equally often). An answer is slow when it
/// took longer than its operation's outlier bar
/// ([`crate::RouterSettings::outlier_factor`] times the median of the
/// peers' estimates); a request abandoned without an answer (its caller
/// cancelled) is slow whatever its age, as is one still in flight and older
/// than the bar when the period ends. Requests count only once the peer's
/// estimate for their operation is of `min_latency_samples` answers.
///
/// The share of slow requests, not the latency estimate, decides: the
/// estimate weighs one answer by how few others came near it, so a peer
/// sent few requests (one a client cooled, or in fewer preference lists)
/// was lifted over the bar by a single slow answer a period, and was
/// judged the outlier period after period in a fault-free run while peers
/// with more answers, as slow at that moment, were not (docs/benchmarks.md,
/// "Outlier judgement by the share of slow requests").
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct OutlierTally {
    seen: u32,
    slow: u32,
    peak: f64,
}

impl OutlierTally {
    /// Counts an answer that took `latency`, against the bar `bar_us`.
    fn count(&mut self, latency: Duration, bar_us: f64) {
        if latency.as_secs_f64() * 1e6 > bar_us {
            self.count_slow(latency, bar_us);
        } else {
            self.seen = self.seen.saturating_add(1);
        }
    }

    /// Counts a slow request that had waited `age`.
    fn count_slow(&mut self, age: Duration, bar_us: f64) {
        self.seen = self.seen.saturating_add(1);
        self.slow = self.slow.saturating_add(1);
        if bar_us > 0.0 {
            self.peak = self.peak.max(age.as_secs_f64() * 1e6 / bar_us);
        }
    }
}

/// Report periods of score history kept per peer (the baseline is their
/// median).
const HISTORY: usize = 60;

/// What the scorer knows about one peer.
#[derive(Clone, Debug)]
pub(crate) struct Peer {
    /// Latency EWMA per operation: `[get, put]`.
    latency: [Ewma; 2],
    /// Whether a sample arrived since the last period (no sample: drift).
    sampled: [bool; 2],
    breaker: Breaker,
    window: FailureWindow,
    /// Requests in flight from this coordinator, per operation (`[get,
    /// put]`): ticket id -> sent at. Ticket ids grow, so each map's first
    /// entry is its oldest request.
    in_flight: [BTreeMap<u64, Instant>; 2],
    /// The largest age (how long it had waited when it was abandoned) of
    /// the requests abandoned without an answer, and the latest deadline
    /// of those (see [`Scorer::abandon`]); cleared by an answer.
    abandoned: Option<(Duration, Instant)>,
    /// The newest read's ticket id in flight when a read to it was last
    /// outrun ([`Scorer::outrun`]): while a read of that id or older is in
    /// flight, the age of its oldest request floors the latency at once.
    outrun: Option<u64>,
    /// Requests abandoned since its last answer (each doubles the next
    /// one's hold, up to [`ABANDONED_DOUBLINGS`] times).
    unanswered: u32,
    /// Piggybacked queue depth (EWMA) and service time (EWMA), and when
    /// the last answer carried them.
    queue: Option<f64>,
    service_us: Option<f64>,
    feedback_at: Option<Instant>,
    /// Its score in the last decision it took part in (without the
    /// declining penalty), and per period before.
    last_score: Option<f64>,
    history: VecDeque<f64>,
    /// The median of `history`, kept as it changes (once per period)
    /// rather than sorted on every decision.
    baseline: Option<f64>,
    /// Whether `history`'s last three scores fell twice by more than the
    /// near-tie band, kept as it changes (reading the history per
    /// decision was a cache miss).
    declining: bool,
    /// When a cool-down after an error-rate excursion (or as a latency
    /// outlier) began.
    cooldown_since: Option<Instant>,
    /// This report period's requests as outlier judgement counts them
    /// (see [`OutlierTally`]).
    outlier_tally: OutlierTally,
    /// The last [`crate::policy::OUTLIER_PERIODS_KEPT`] periods, one bit
    /// each (the lowest the latest): whether it was the period's outlier.
    outlier_history: u8,
    /// Whether its cool-down was started by outlier detection (not by
    /// errors): one such peer at a time.
    outlier_cooling: bool,
    /// Whether it was up and alive when last seen (`None`: never seen).
    seen_up: Option<bool>,
    /// Whether every sighting since it was last up and alive showed it UP
    /// (not JOINING or DRAINING) with the generation known and unchanged:
    /// then a coming back is a liveness flap of the same process.
    unchanged_since_up: bool,
    /// The largest process generation seen for it (`None`: none known).
    generation: Option<u64>,
    /// Whether every sighting so far showed it UP in the membership but
    /// not alive (`None`: never seen): the scorer's first view, before
    /// its process has heard from it, not a node that went down.
    only_seen_unreached: Option<bool>,
    /// Its host, and whether it was alive, when last seen.
    host: Option<std::sync::Arc<str>>,
    alive: bool,
    /// When it turned up again (slow start).
    up_since: Option<Instant>,
    /// The snitch's latency samples (us) and score.
    snitch_samples: VecDeque<f64>,
    snitch: Option<f64>,
    /// C3's EWMAs: response time, service time, queue.
    c3_response: Option<f64>,
    c3_service: Option<f64>,
    c3_queue: Option<f64>,
    /// P2C's peak EWMA (us) and when it was last updated.
    peak: Option<(f64, Instant)>,
    /// Its slowest read answer (us) while it was kept out (a probe's, or a
    /// hedge's), and when that was folded in: decayed by age, what a
    /// kept-out peer is ranked by (see
    /// [`crate::RouterSettings::latency_probe`]).
    slowest: Option<(f64, Instant)>,
    /// Since when every read decision of this coordinator that had it as
    /// a candidate left it out of the first R (`None`: the last one asked
    /// it, or none was made).
    out_since: Option<Instant>,
    /// When this coordinator last sent it a read (a probe among them).
    get_sent_at: Option<Instant>,
}

impl Peer {
    /// How it stood against the outlier bars this period at `now`:
    /// `(share, peak)`, the share of its counted requests that were slow
    /// (0 with fewer than [`OUTLIER_MIN_SLOW`] slow ones) and the highest
    /// ratio of one's latency to its bar. Requests still in flight and
    /// older than their operation's bar count as slow ones (a peer frozen
    /// for the whole period answers nothing), if its estimate for that
    /// operation is of at least `min_samples` answers.
    fn outlier_standing(
        &self,
        bars: [Option<f64>; 2],
        min_samples: u64,
        now: Instant,
    ) -> (f64, f64) {
        let mut t = self.outlier_tally;
        for (op, bar) in bars.iter().enumerate() {
            let Some(bar) = bar.filter(|_| self.latency[op].settled_us(min_samples).is_some())
            else {
                continue;
            };
            for sent in self.in_flight[op].values() {
                let age = now.saturating_duration_since(*sent);
                if age.as_secs_f64() * 1e6 > bar {
                    t.count_slow(age, bar);
                }
            }
        }
        let share = if t.slow >= OUTLIER_MIN_SLOW {
            f64::from(t.slow) / f64::from(t.seen.max(1))
        } else {
            0.0
        };
        (share, t.peak)
    }

    /// Whether a read that was in flight to it when one was outrun is
    /// still in flight (see [`Scorer::outrun`]).
    fn outrun_active(&self) -> bool {
        self.outrun.is_some_and(|upto| {
            self.in_flight[op_index(Op::Get)]
                .first_key_value()
                .is_some_and(|(id, _)| *id <= upto)
        })
    }

    /// Requests in flight to it, every operation.
    fn in_flight_count(&self) -> usize {
        self.in_flight.iter().map(BTreeMap::len).sum()
    }

    /// When each operation's oldest request in flight was sent, `[get, put]`.
    fn oldest_sent(&self) -> [Option<Instant>; 2] {
        [0, 1].map(|i| self.in_flight[i].values().next().copied())
    }

    /// A peer nothing is known of yet.
    fn new(s: &RouterSettings) -> Peer {
        Peer {
            latency: [Ewma::new(); 2],
            sampled: [false; 2],
            breaker: Breaker::new(s.breaker_threshold, s.breaker_cooldown),
            window: FailureWindow::new(s.failure_bucket, s.failure_buckets),
            in_flight: [BTreeMap::new(), BTreeMap::new()],
            abandoned: None,
            outrun: None,
            unanswered: 0,
            queue: None,
            service_us: None,
            feedback_at: None,
            last_score: None,
            history: VecDeque::new(),
            baseline: None,
            declining: false,
            cooldown_since: None,
            outlier_tally: OutlierTally::default(),
            outlier_history: 0,
            outlier_cooling: false,
            seen_up: None,
            unchanged_since_up: true,
            generation: None,
            only_seen_unreached: None,
            host: None,
            alive: true,
            up_since: None,
            snitch_samples: VecDeque::new(),
            snitch: None,
            c3_response: None,
            c3_service: None,
            c3_queue: None,
            peak: None,
            slowest: None,
            out_since: None,
            get_sent_at: None,
        }
    }

    /// Its slowest read answer while kept out, at `now`, microseconds: the
    /// largest folded in, times `exp(-age / tau)`.
    fn slowest_us(&self, tau: Duration, now: Instant) -> Option<f64> {
        self.slowest.map(|(us, at)| decayed(us, at, tau, now))
    }

    /// Whether it is kept out at `now`: left out of every read decision's
    /// first R for at least `every` (not zero).
    fn kept_out(&self, every: Duration, now: Instant) -> bool {
        !every.is_zero()
            && self
                .out_since
                .is_some_and(|since| now.saturating_duration_since(since) >= every)
    }

    /// Forgets its latency: the estimates and the slowest answers (a
    /// restart; see `Scorer::see`).
    fn forget_latency(&mut self) {
        self.latency = [Ewma::new(); 2];
        self.slowest = None;
    }
}

/// `us` folded in at `at`, decayed to `now` with time constant `tau`.
fn decayed(us: f64, at: Instant, tau: Duration, now: Instant) -> f64 {
    let age = now.saturating_duration_since(at).as_secs_f64();
    us * (-age / tau.as_secs_f64().max(1e-3)).exp()
}

/// Per-peer observations and the snapshots decisions are made from.
#[derive(Clone, Debug)]
pub struct Scorer {
    settings: RouterSettings,
    /// The coordinator's own node.
    local: NodeId,
    /// Every peer recorded so far. BTreeMap: iteration order (and so every
    /// floating-point mean) must not depend on a hasher's seed.
    pub(crate) peers: BTreeMap<NodeId, Peer>,
    /// Recent latencies per operation, across peers (hedge delays, the
    /// cluster p99).
    quantiles: [LatencyQuantiles; 2],
    hedges: HedgeBudget,
    /// Key hash -> the peer that last served it (affinity); O(1) per
    /// request, no allocation (a linear scan of 4,096 keys per candidate
    /// was a tenth of a node's CPU on R=1 reads, an LRU 1.8%).
    affinity: Affinity,
    next_ticket: u64,
    /// When periodic upkeep last ran.
    period_at: Option<Instant>,
    /// When the first decision was made (a peer first seen later than a
    /// report period after it is a newcomer: slow start).
    first_at: Option<Instant>,
    /// When the snitch last recomputed its scores, and last wiped them.
    snitch_at: Option<Instant>,
    snitch_reset_at: Option<Instant>,
    /// Per operation (`[get, put]`), the latency estimate above which a
    /// remote peer is an outlier this period, microseconds: `outlier_factor`
    /// times the median of the remote peers' estimates at the last upkeep
    /// (`None` with fewer than three estimates).
    outlier_bar_us: [Option<f64>; 2],
}

pub(crate) fn op_index(op: Op) -> usize {
    match op {
        Op::Get => 0,
        Op::Put => 1,
    }
}

impl Scorer {
    /// A scorer for the coordinator `local`, knowing nothing yet.
    ///
    /// # Errors
    /// [`crate::Error::InvalidConfig`] if `settings` fails validation.
    pub fn new(settings: RouterSettings, local: NodeId) -> Result<Scorer> {
        settings.validate()?;
        Ok(Scorer {
            hedges: HedgeBudget::new(settings.hedge_budget),
            settings,
            local,
            peers: BTreeMap::new(),
            quantiles: Default::default(),
            affinity: Affinity::new(AFFINITY_BITS),
            next_ticket: 0,
            period_at: None,
            first_at: None,
            snitch_at: None,
            snitch_reset_at: None,
            outlier_bar_us: [None; 2],
        })
    }

    /// The settings in use.
    pub fn settings(&self) -> &RouterSettings {
        &self.settings
    }

    /// The routing mode in use.
    pub fn mode(&self) -> Mode {
        self.settings.mode
    }

    /// Switches the routing mode and forgets everything learned (so that
    /// a benchmark can interleave modes without restarts).
    pub fn set_mode(&mut self, mode: Mode) {
        let mut settings = self.settings.clone();
        settings.mode = mode;
        *self = Scorer {
            hedges: HedgeBudget::new(settings.hedge_budget),
            settings,
            local: self.local.clone(),
            peers: BTreeMap::new(),
            quantiles: Default::default(),
            affinity: Affinity::new(AFFINITY_BITS),
            // Ticket ids keep growing: a request sent before the switch
            // that ends after it must not end a new request of the same id.
            next_ticket: self.next_ticket,
            period_at: None,
            first_at: None,
            snitch_at: None,
            snitch_reset_at: None,
            outlier_bar_us: [None; 2],
        };
    }

    fn peer_mut(&mut self, id: &NodeId) -> &mut Peer {
        let s = &self.settings;
        self.peers.entry(id.clone()).or_insert_with(|| Peer::new(s))
    }

    /// A request (`op`) to `peer` leaves now: it counts as in flight (and
    /// its age as the peer's latency floor) until [`Scorer::finish`].
    pub fn start(&mut self, peer: &NodeId, op: Op, now: Instant) -> Ticket {
        self.next_ticket += 1;
        let id = self.next_ticket;
        let op = op_index(op);
        let p = self.peer_mut(peer);
        p.in_flight[op].insert(id, now);
        if op == op_index(Op::Get) {
            p.get_sent_at = Some(now);
        }
        Ticket {
            peer: peer.clone(),
            id,
            op,
        }
    }

    /// The request of `ticket` ended (with [`Scorer::record`] telling how).
    pub fn finish(&mut self, ticket: &Ticket) {
        if let Some(p) = self.peers.get_mut(&ticket.peer) {
            p.in_flight[ticket.op].remove(&ticket.id);
            if !p.outrun_active() {
                p.outrun = None;
            }
        }
    }

    /// A read to `peer` was outrun: a hedge was sent past it, and the
    /// read it served had its answers from other replicas first, while it
    /// runs on to its answer. Until every read in flight to `peer` now
    /// has ended (the outrun one among them; a read sent later does not
    /// extend it), the age of its oldest request floors the peer's
    /// latency at once (rule 1d), rather than only after
    /// [`crate::inputs::STUCK_FACTOR`] times its estimate: a read a hedge
    /// was sent past was already older than the hedge delay (the p95 of
    /// recent reads), and a frozen peer kept drawing reads for five of
    /// its estimates after each hedge won over it (up to three per
    /// coordinator per 200-ms freeze in the simulated test; docs/design.md,
    /// "A loser is outrun"). A healthy peer that merely lost one race is
    /// floored for about the one latency it takes to answer, at the age of
    /// its oldest request (a write's, if one older than the read is in
    /// flight). A hedge that lost is not outrun: it was sent a moment
    /// ago, and its age says nothing. Nothing when no read is in flight to
    /// `peer` (the loser already ended).
    /// Nothing either when [`RouterSettings::outrun_floor`] is off.
    pub fn outrun(&mut self, peer: &NodeId) {
        if !self.settings.outrun_floor {
            return;
        }
        let Some(p) = self.peers.get_mut(peer) else {
            return;
        };
        let newest = p.in_flight[op_index(Op::Get)]
            .last_key_value()
            .map(|(id, _)| *id);
        if let Some(newest) = newest {
            p.outrun = Some(p.outrun.map_or(newest, |was| was.max(newest)));
        }
    }

    /// Folds in the outcome of one request to `peer` that finished at `now`.
    /// Only successes feed the latency EWMA (a timeout's latency is the
    /// deadline, not the peer's); every outcome feeds the failure window and
    /// the breaker.
    pub fn record(&mut self, peer: &NodeId, op: Op, outcome: Outcome, now: Instant) {
        let (alpha, latency_window, c3_alpha, decay, slowest_decay, probe_every) = (
            self.settings.ewma_alpha,
            self.settings.latency_window,
            self.settings.c3_alpha,
            self.settings.peak_decay,
            self.settings.probe_peak_decay,
            self.settings.latency_probe,
        );
        let window = self.settings.snitch_window;
        let remote = *peer != self.local;
        let bar = self.outlier_bar_us[op_index(op)].filter(|_| remote);
        let min_samples = self.settings.min_latency_samples;
        let p = self.peer_mut(peer);
        match outcome {
            Outcome::Ok { latency } => {
                let us = latency.as_secs_f64() * 1e6;
                p.abandoned = None;
                p.unanswered = 0;
                p.latency[op_index(op)].record(latency, alpha, latency_window, now);
                // Counted only once its estimate is one the scoring itself
                // uses: one of fewer than `min_latency_samples` answers stands in
                // for the cluster mean there (a peer whose first dozen
                // answers were slow, its connection new, was cooled for
                // 75 s of a fault-free run: docs/benchmarks.md, "Outlier
                // judgement on a faster machine").
                if let Some(bar) =
                    bar.filter(|_| p.latency[op_index(op)].settled_us(min_samples).is_some())
                {
                    p.outlier_tally.count(latency, bar);
                }
                p.sampled[op_index(op)] = true;
                p.window.record(false, now);
                p.breaker.on_success(now);
                p.c3_response = Some(ewma(p.c3_response, us, c3_alpha));
                if p.snitch_samples.len() == window {
                    p.snitch_samples.pop_front();
                }
                p.snitch_samples.push_back(us);
                p.peak = Some(peak_ewma(p.peak, us, now, decay));
                // Only what it answers while kept out (probes, hedges): a
                // hiccup of a healthy peer in its regular traffic must not
                // hold it out once it is left out for a while.
                if op == Op::Get && remote && p.kept_out(probe_every, now) {
                    let was = p.slowest_us(slowest_decay, now);
                    if was.is_none_or(|was| us >= was) {
                        p.slowest = Some((us, now));
                    }
                }
                if remote {
                    self.quantiles[op_index(op)].record(us);
                }
            }
            Outcome::Error | Outcome::Timeout => {
                p.window.record(true, now);
                p.breaker.on_failure(now);
            }
        }
    }

    /// The request of `ticket`, sent at `sent`, was abandoned at `now`
    /// without an answer: its caller was cancelled (a coordinator's read
    /// dropped, a client's write given up). A hedge's loser used to be
    /// abandoned too; since docs/design.md's "A hedge's loser runs on" it
    /// runs on to its answer and ends as any request. It leaves the
    /// in-flight count, but until the peer answers anything, the
    /// request's deadline `until` passes, or its hold has passed since
    /// ([`RouterSettings::abandoned_hold`] times its age, doubled for each
    /// request abandoned since the peer last answered, at most
    /// [`ABANDONED_DOUBLINGS`] times: a frozen peer is tried again after
    /// 5, 10, 20, 40 ... times the age, a few times per 200-ms pause,
    /// while a healthy one whose request was dropped after a few
    /// milliseconds is back within a few more), the age it had when
    /// abandoned (`now - sent`, fixed, not growing) keeps flooring the
    /// peer's effective latency (rule 1d): a replica that stalls is not
    /// picked again at once just because its stuck request was dropped,
    /// and a healthy replica is not ranked last until the deadline (a
    /// floor that grew with time did that: `oldest 1358 ms` on an idle
    /// peer, seen in `kvctl explain` after a lost hedge was dropped).
    /// Nothing is folded into the EWMA or the failure window.
    pub fn abandon(&mut self, ticket: &Ticket, sent: Instant, until: Instant, now: Instant) {
        self.finish(ticket);
        let age = now.saturating_duration_since(sent);
        let hold = self.settings.abandoned_hold;
        let min_samples = self.settings.min_latency_samples;
        let bar = self.outlier_bar_us[ticket.op].filter(|_| ticket.peer != self.local);
        let p = self.peer_mut(&ticket.peer);
        // An abandoned request counts as a slow one for outlier
        // judgement, however long it had waited (see [`OutlierTally`]).
        if let Some(bar) = bar.filter(|_| p.latency[ticket.op].settled_us(min_samples).is_some()) {
            p.outlier_tally.count_slow(age, bar);
        }
        let doublings = p.unanswered.min(ABANDONED_DOUBLINGS);
        p.unanswered = p.unanswered.saturating_add(1);
        let until = if hold > 0.0 {
            until.min(now + age.mul_f64(hold * f64::from(1u32 << doublings)))
        } else {
            until
        };
        p.abandoned = Some(match p.abandoned {
            Some((was_age, was_until)) => (was_age.max(age), was_until.max(until)),
            None => (age, until),
        });
    }

    /// Folds in what an answer of `peer` piggybacked. A service time that
    /// is not a finite, non-negative number is left out (the queue still
    /// counts): one NaN would poison the EWMA for good, and C3 would rank
    /// a negative service time first. One above [`MAX_SERVICE_US`] counts
    /// as that bound.
    pub fn feedback(&mut self, peer: &NodeId, feedback: Feedback, now: Instant) {
        let alpha = self.settings.c3_alpha;
        let p = self.peer_mut(peer);
        let queue = f64::from(feedback.queue);
        p.queue = Some(ewma(p.queue, queue, alpha));
        p.c3_queue = Some(ewma(p.c3_queue, queue, alpha));
        let service = feedback.service_us;
        if service.is_finite() && service >= 0.0 {
            let service = service.min(MAX_SERVICE_US);
            p.service_us = Some(ewma(p.service_us, service, alpha));
            p.c3_service = Some(ewma(p.c3_service, service, alpha));
        }
        p.feedback_at = Some(now);
    }

    /// Notes that `peer` served the key `key_hash` (affinity: its cache
    /// likely holds it).
    pub fn served(&mut self, key_hash: u64, peer: &NodeId) {
        self.affinity.note(key_hash, peer);
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

    /// Requests in flight to `peer` from this coordinator.
    pub fn in_flight(&self, peer: &NodeId) -> usize {
        self.peers.get(peer).map_or(0, Peer::in_flight_count)
    }

    /// Drops everything known about `peer` (it left the cluster).
    pub fn forget(&mut self, peer: &NodeId) {
        self.peers.remove(peer);
    }

    /// The cluster mean for `op`: the mean EWMA of the remote peers with
    /// enough samples, in microseconds.
    pub fn cluster_mean_us(&self, op: Op) -> Option<f64> {
        let min = self.settings.min_latency_samples;
        let (sum, count) = self
            .peers
            .iter()
            .filter(|(id, _)| **id != self.local)
            .filter_map(|(_, p)| {
                let e = p.latency[op_index(op)];
                (e.samples() >= min).then(|| e.value_us()).flatten()
            })
            .fold((0.0, 0u32), |(s, c), v| (s + v, c + 1));
        (count > 0).then(|| sum / f64::from(count))
    }

    /// The `q` quantile of recent latencies of `op` across remote peers
    /// (`None` before enough samples).
    pub fn latency_quantile(&mut self, op: Op, q: f64, now: Instant) -> Option<Duration> {
        self.quantiles[op_index(op)]
            .quantile(q, now)
            .map(|us| Duration::from_secs_f64(us / 1e6))
    }

    /// One request was coordinated: it earns the hedge budget its share.
    pub fn on_request(&mut self) {
        self.hedges.on_request();
    }

    /// Asks to hedge once; true when the budget allows.
    pub fn try_hedge(&mut self) -> bool {
        self.hedges.try_hedge()
    }

    /// Whether a read that has waited `waited` for its first replica may
    /// hedge to `target` now: false when a read in flight to `target` is
    /// older than that (unless [`RouterSettings::hedge_to_slow_replica`]):
    /// `target` is as slow as the replica the hedge would pass, and when
    /// every replica is slow at once (2 cores shared by every process of
    /// a test cluster, a host's hiccup) a burst of hedges only adds load.
    /// A replica stopped alone (a GC pause) leaves the others' reads young,
    /// and the read hedges.
    pub fn hedge_may_help(&self, target: &NodeId, waited: Duration, now: Instant) -> bool {
        if self.settings.hedge_to_slow_replica {
            return true;
        }
        self.peers
            .get(target)
            .and_then(|p| p.in_flight[op_index(Op::Get)].values().next())
            .is_none_or(|sent| now.saturating_duration_since(*sent) < waited)
    }

    /// `(sent, denied)` hedges so far.
    pub fn hedges(&self) -> (u64, u64) {
        (self.hedges.sent(), self.hedges.denied())
    }

    /// Takes in what a decision made at `now` from `inputs` did: the
    /// scores (for the declining penalty and the baseline); for a read's,
    /// which candidates it left out of the first R (`inputs.r`; kept out
    /// once that lasts [`RouterSettings::latency_probe`]); and, for C3,
    /// relaxes the unselected replicas' figures toward the chosen one's so
    /// that none starves.
    pub fn observe(&mut self, inputs: &crate::Inputs, decision: &Decision, now: Instant) {
        if inputs.op == Op::Get {
            for (i, id) in decision.order.iter().enumerate() {
                if let Some(p) = self.peers.get_mut(id) {
                    if i < inputs.r {
                        p.out_since = None;
                    } else if p.out_since.is_none() {
                        p.out_since = Some(now);
                    }
                }
            }
        }
        for s in &decision.scored {
            if s.excluded.is_some() || decision.mode != Mode::Scoring {
                continue;
            }
            let declined = s
                .penalties
                .iter()
                .find(|a| a.rule == crate::Penalty::Declining)
                .map_or(1.0, |a| a.factor);
            if let Some(p) = self.peers.get_mut(&s.id) {
                p.last_score = Some(s.score / declined);
            }
        }
        if decision.mode == Mode::C3 {
            self.relax_c3(decision);
        }
    }

    /// C3: the replicas not chosen move a step toward the chosen one's
    /// figures (Elasticsearch's adjustment for unselected nodes).
    fn relax_c3(&mut self, decision: &Decision) {
        let Some(chosen) = decision.order.first() else {
            return;
        };
        let Some(best) = self.peers.get(chosen) else {
            return;
        };
        let (r, s, q) = (best.c3_response, best.c3_service, best.c3_queue);
        let alpha = self.settings.c3_alpha;
        for id in decision.order.iter().skip(1) {
            if let Some(p) = self.peers.get_mut(id) {
                if let (Some(mine), Some(target)) = (p.c3_response, r) {
                    p.c3_response = Some(ewma(Some(mine), target, alpha));
                }
                if let (Some(mine), Some(target)) = (p.c3_service, s) {
                    p.c3_service = Some(ewma(Some(mine), target, alpha));
                }
                if let (Some(mine), Some(target)) = (p.c3_queue, q) {
                    p.c3_queue = Some(ewma(Some(mine), target, alpha));
                }
            }
        }
    }
}

/// One EWMA step (the first sample is taken as is).
fn ewma(old: Option<f64>, sample: f64, alpha: f64) -> f64 {
    old.map_or(sample, |o| alpha * sample + (1.0 - alpha) * o)
}

/// Finagle's peak EWMA: a sample above the estimate replaces it at once;
/// otherwise the estimate decays toward the sample with time constant
/// `tau`.
fn peak_ewma(old: Option<(f64, Instant)>, us: f64, now: Instant, tau: Duration) -> (f64, Instant) {
    match old {
        Some((value, at)) if us <= value => {
            let dt = now.saturating_duration_since(at).as_secs_f64();
            let w = (-dt / tau.as_secs_f64()).exp();
            (value * w + us * (1.0 - w), now)
        }
        _ => (us, now),
    }
}

#[cfg(test)]
mod tests;
