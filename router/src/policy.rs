//! Every tunable of the router, with its default and its source
//! (docs/design.md, "The scoring model"; the design notes 000 and 003;
//! Cassandra, ScyllaDB, C3, Finagle). The node fills it from its `[router]`
//! section; a default changes only when a benchmark shows a better one
//! (docs/benchmarks.md).

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::{Error, Mode, Result};

/// The weights of the four dimensions; they sum to 1.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Weights {
    /// Load (CPU, queues, backlog, in-flight).
    pub load: f64,
    /// Latency (rank of the effective latency).
    pub latency: f64,
    /// Cache heat (affinity and hit ratio).
    pub hit: f64,
    /// Availability (recent failure rate).
    pub availability: f64,
}

impl Weights {
    /// The default, for mixed loads: 0.30/0.35/0.20/0.15 (design note 000).
    pub const MIXED: Weights = Weights {
        load: 0.30,
        latency: 0.35,
        hit: 0.20,
        availability: 0.15,
    };
    /// Read-heavy, cache-friendly loads: 0.20/0.30/0.35/0.15.
    pub const READ_HEAVY: Weights = Weights {
        load: 0.20,
        latency: 0.30,
        hit: 0.35,
        availability: 0.15,
    };
    /// Write-heavy, disk-bound loads: 0.40/0.30/0.10/0.20.
    pub const WRITE_HEAVY: Weights = Weights {
        load: 0.40,
        latency: 0.30,
        hit: 0.10,
        availability: 0.20,
    };

    /// A preset by name: `mixed`, `read-heavy` or `write-heavy`.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] for another name.
    pub fn preset(name: &str) -> Result<Weights> {
        match name {
            "mixed" => Ok(Weights::MIXED),
            "read-heavy" => Ok(Weights::READ_HEAVY),
            "write-heavy" => Ok(Weights::WRITE_HEAVY),
            other => Err(Error::InvalidConfig(format!(
                "unknown weights preset {other:?}: use mixed, read-heavy or write-heavy"
            ))),
        }
    }

    /// The weights with the latency weight multiplied by `factor` and all
    /// four scaled back to a sum of 1.
    pub fn with_latency_factor(self, factor: f64) -> Weights {
        let raised = self.latency * factor;
        let sum = self.load + raised + self.hit + self.availability;
        Weights {
            load: self.load / sum,
            latency: raised / sum,
            hit: self.hit / sum,
            availability: self.availability / sum,
        }
    }
}

/// The multiplicative penalties (design notes 000 and 003, and ours).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Penalties {
    /// Report-derived score declined two periods in a row. Default 0.85.
    pub declining: f64,
    /// Recent error rate above `error_rate`. Default 0.4.
    pub errors: f64,
    /// The error rate that starts the error penalty and a cool-down.
    /// Default 0.05.
    pub error_rate: f64,
    /// Request queue above the threshold. Default 0.6.
    pub queue: f64,
    /// Health "suspect" (phi above half the conviction threshold). Default
    /// 0.2.
    pub suspect: f64,
    /// Hints pending for it elsewhere: it is probably behind. Default 0.8.
    pub hints: f64,
    /// An anti-entropy repair pass running on it. Default 0.9.
    pub repair: f64,
}

impl Default for Penalties {
    fn default() -> Self {
        Penalties {
            declining: 0.85,
            errors: 0.4,
            error_rate: 0.05,
            queue: 0.6,
            suspect: 0.2,
            hints: 0.8,
            repair: 0.9,
        }
    }
}

/// All the router's tunables (serde, so a logged decision carries the
/// settings it was made with and replays anywhere).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RouterSettings {
    /// The routing mode. Default `scoring`.
    pub mode: Mode,
    /// Dimension weights. Default [`Weights::MIXED`].
    pub weights: Weights,
    /// Above this cluster p99 (ms) the latency weight rises as
    /// `base x min(2, p99 / this)`. Default 5 ms.
    pub slow_cluster_p99_ms: f64,
    /// Relative band treated as a tie between scores: a replica takes a
    /// key's reads from the one the per-key tie-break gives them to only
    /// when it scores more than this fraction better. Default 0.2 (the
    /// design note's 5%, measured against it: under hot keys, 0.05 let
    /// the load and latency wobbles of healthy peers move keys between
    /// replicas, each then cached on all N: scoring's hit ratio was 1.1
    /// to 1.2 points below plain's in four runs, 1.1 in three at 0.1, 0.1
    /// to 0.9 in seven at 0.2; docs/benchmarks.md, "Router benchmark,
    /// fifth quick run"). A band this wide needs the latency dimension
    /// graded by ratio (see `latency_tie`): by rank, a replica 4x faster
    /// than the two others was only 17% ahead, a tie.
    pub near_tie: f64,
    /// Relative fall of a peer's score from one period to the next that
    /// counts toward the "declining" penalty (two in a row). Default 0.05:
    /// smaller falls are noise.
    pub decline_band: f64,
    /// Relative band of latencies graded alike: a candidate within this
    /// fraction of the fastest peer's latency grades 1.0 on the latency
    /// dimension; a slower one `(fastest / ((1 - this) x latency))^2`, at
    /// least `worst_rank_score`. Default 0.5: up to twice as slow grades
    /// 1.0, 3x 0.44, 4x 0.25, 6x and more 0.1. Measured
    /// (docs/benchmarks.md, "Per-key ties"): under hot keys, healthy
    /// peers' windowed latencies differ by 1.4x at the median (2.9x at
    /// p90) as load shifts between them; a CPU-capped or stalled one by
    /// 5x and more.
    pub latency_tie: f64,
    /// Softmax temperature; 0 picks the best (near-ties at random per
    /// key).
    /// Default 0 (the design note suggests about 0.6: measured in
    /// docs/benchmarks.md).
    pub temperature: f64,
    /// Among near-ties, prefer replicas in the coordinator's zone. Default
    /// true (design note 004).
    pub prefer_local_zone: bool,
    /// Score bonus of the local replica for the network round trip it
    /// saves (a fraction). Default 0.3: clear of the near-tie band (an
    /// equal peer then scores 1 / 1.3 = 0.77 of the local replica, below
    /// 1 - near_tie; at 0.25 it sat exactly on the band's edge), so a
    /// peer as good as the local replica does not tie with it, and
    /// another replica takes a read from the local one only when clearly
    /// better.
    /// Measured (docs/benchmarks.md, 2026-12-01): an R=1 read served by a
    /// remote replica costs the cluster about twice the CPU of a local one
    /// (106 vs 55 us); at 0.05 the local replica sat at the edge of the
    /// near-tie band and lost about half the ties.
    pub hop_credit: f64,
    /// Requests in flight from this coordinator to one peer that make its
    /// load 1.0. Default 64.
    pub in_flight_limit: u32,
    /// The load bound of the per-key tie-break (the epsilon of consistent
    /// hashing with bounded loads: Mirrokni, Thorup and Zadimoghaddam,
    /// "Consistent Hashing with Bounded Loads", SODA 2018): among
    /// near-ties, the key's rendezvous favourite is passed over while its
    /// requests in flight from this process, plus the one being placed,
    /// exceed `ceil((1 + this) x the near-ties' mean in flight, the new
    /// request included)`; the next by rendezvous weight that fits takes
    /// it. 0 turns the bound off (pure per-key ties). Default 1.0 (a
    /// favourite is passed over at twice the near-ties' mean; the paper's
    /// and HAProxy's `hash-balance-factor 125` is 0.25). On a slow machine
    /// under slow-node-stall it did not measurably help (p99.9 27.4 / 31.7
    /// / 63.9 ms on against 30.7 / 27.2 / 25.2 off: docs/benchmarks.md,
    /// "Load-bounded ties"), so it was off; on a machine three times as
    /// fast, per-key ties left two of five nodes with a third more reads
    /// than the others, and in interleaved runs the bound (at 0.25)
    /// lowered the p99 in each of three rounds, hot-keys 6.8 ms against
    /// 8.6 (plain 7.5), slow-node-stall 14.1 against 15.5, for 0.4 points
    /// of hit ratio (docs/benchmarks.md, "Outlier judgement on a faster
    /// machine").
    /// At 0.25 a zipfian load's hottest keys left their favourite with
    /// every short burst; at 1.0 they stay unless the favourite really
    /// collects requests: hot-keys hit ratio 0.663 / 0.666 / 0.665
    /// against 0.660 x 3 at 0.25 (p99 median 14.7 against 16.4 ms), and
    /// under slow-node-stall p99.9 23.7 / 25.8 / 27.0 against 37.9 / 49.0
    /// / 27.1 ms, in interleaved rounds (docs/benchmarks.md, "The tie load
    /// bound at 1.0").
    #[serde(default = "unbounded_before_the_field")]
    pub tie_load_bound: f64,
    /// A replica's queue bound (`[limits] max_peer_requests`). Default 2048.
    pub max_queue: u32,
    /// Queue depth above which the queue penalty applies. Default 64.
    pub queue_threshold: u32,
    /// Writes awaiting a flush that make the backlog load 1.0. Default 4096.
    pub max_backlog: u32,
    /// How much lower a candidate without affinity to the key starts on
    /// the hit dimension. Default 0.30 (design note 000).
    pub affinity_discount: f64,
    /// Multiplicative penalties.
    pub penalties: Penalties,
    /// Cool-down weight after an error-rate excursion. Default 0.2.
    pub cooldown_weight: f64,
    /// How long the cool-down holds. Default 45 s.
    pub cooldown_hold: Duration,
    /// How long the ramp back to full weight takes. Default 30 s.
    pub cooldown_ramp: Duration,
    /// A peer is the latency outlier of a report period when at least
    /// [`RouterSettings::outlier_share`] of its requests were slow: took
    /// longer than this many times the median of the remote peers'
    /// latency estimates for their operation (at least three peers with an
    /// estimate), or were abandoned unanswered, and it had the largest
    /// such share of all peers: at most one outlier per
    /// period, and at most one peer in an outlier cool-down at a time (a
    /// noisy host's bursts move from peer to peer; cooling every peer they
    /// touch flattened the ranks and left the paused one first when its
    /// cool-down ended before theirs). Default 5 (the floor's
    /// [`crate::inputs::STUCK_FACTOR`]). Outlier detection after Envoy's
    /// outlier ejection (and its maximum ejection percent), on latency
    /// instead of errors.
    #[serde(default = "default_outlier_factor")]
    pub outlier_factor: f64,
    /// Report periods, of the last eight, in which a peer was a latency
    /// outlier that start its cool-down (as an error-rate excursion does);
    /// 0 turns it off. Default 6. A replica that pauses again and again
    /// (seed 000's GC pauses, slow-node-stall's 200 ms of every second)
    /// keeps a high estimate most of the time, but a few fast answers
    /// between pauses, or the drift toward the cluster mean while it gets
    /// no requests, made it a near-tie again, and each pause's first
    /// requests then waited it out: seen in the load generator's
    /// decisions, 6 of 90 with the paused node first (docs/benchmarks.md,
    /// "Latency outliers cool down"). Such a replica is the outlier in
    /// nearly every period; at 3 of 8 a healthy peer that was a little
    /// slower than the rest, and the worst of a few bursts, was cooled in
    /// fault-free runs (75 s of the cold-restart run, which moved its reads
    /// to two peers and doubled the p50); at 6 of 8 none was, and the
    /// stalling replica still cooled within the first seconds
    /// (docs/benchmarks.md, "Outlier judgement on a faster machine").
    #[serde(default = "default_outlier_periods")]
    pub outlier_periods: u32,
    /// The share of a peer's requests in a report period, in (0, 1], that
    /// must be slow (see [`RouterSettings::outlier_factor`]; and at least
    /// [`crate::OUTLIER_MIN_SLOW`] of them) for it to be that period's
    /// latency outlier. Default 0.1: a replica stopped 200 ms of every
    /// second (seed 000's GC pauses) has a fifth of its requests wait out
    /// a pause, while a healthy one on this 2-core machine had about 1% of
    /// its answers over the bar. Judging the latency estimate instead made
    /// a peer sent few requests the outlier on one slow answer a period
    /// (docs/benchmarks.md, "Outlier judgement by the share of slow
    /// requests").
    #[serde(default = "default_outlier_share")]
    pub outlier_share: f64,
    /// How often nodes report (gossip). Default 1 s.
    pub report_period: Duration,
    /// Periods after which a report is unconfirmed (probed). Default 3.
    pub freshness_periods: u32,
    /// Per-period decay of a stale node's baseline. Default 0.9.
    pub baseline_decay: f64,
    /// Stale periods before the baseline starts to decay. Default 10.
    pub baseline_grace_periods: u32,
    /// Slow-start window of a new or rejoined node. Default 600 s.
    pub slow_start: Duration,
    /// The ramp's start. Default 0.6.
    pub slow_start_from: f64,
    /// EWMA smoothing factor of latencies. Default 0.2 (design note 000).
    pub ewma_alpha: f64,
    /// The shortest time a latency EWMA averages over: a new answer weighs
    /// at most `1 / (n + 1)`, `n` the peer's answers of the last window
    /// (each weighted by `exp(-age / window)`), so dense answers are
    /// averaged over this window, every answer alike, rather than over
    /// five answers (`crate::ewma`). Default 100 ms (the dynamic snitch's
    /// recompute interval); zero turns it off.
    pub latency_window: Duration,
    /// Per-period drift of a latency estimate without samples toward the
    /// cluster mean. Default 0.1.
    pub latency_drift: f64,
    /// How long a remote peer must have been kept out (no decision of this
    /// coordinator put it among the first R) before it is ranked by the
    /// slowest of its read answers since (see
    /// [`crate::CandidateInputs::peak_us`]), and how often such a peer is
    /// re-tested by a probe read (the read goes to it too, paid from the
    /// hedge budget; at most one in flight). Zero turns both off. Default
    /// 1 s (the report period). Design.md's "recover penalized nodes by
    /// probes, not by forgetting" (SPEC, "The scoring model"): before it, a
    /// stalling peer kept out by the latency rank came back when its
    /// estimate, with no answers, drifted below its peers', and the next
    /// reads waited out a pause (the load generator's decision records
    /// under slow-node-stall: docs/benchmarks.md, "The stall's sawtooth").
    #[serde(default = "default_latency_probe")]
    pub latency_probe: Duration,
    /// Time constant of the decay of a kept-out peer's slowest answer, the
    /// latency it is ranked by (see
    /// [`RouterSettings::latency_probe`]): an answer of `l` ms counts as
    /// `l x exp(-age / this)`. Default 10 s (Finagle's peak EWMA, as
    /// [`RouterSettings::peak_decay`]): a peer that paused for 200 ms
    /// stays out for about 40 s after its last slow answer.
    #[serde(default = "default_probe_peak_decay")]
    pub probe_peak_decay: Duration,
    /// Consecutive timeouts or errors that open a breaker. Default 5.
    pub breaker_threshold: u32,
    /// How long a breaker stays open before its half-open probe. Default
    /// 5 s.
    pub breaker_cooldown: Duration,
    /// Width of one failure-window bucket. Default 10 s.
    pub failure_bucket: Duration,
    /// Buckets in the failure window. Default 6 (one minute).
    pub failure_buckets: usize,
    /// Failure rate above which a peer is excluded. Default 0.30.
    pub max_failure_rate: f64,
    /// Requests in the window before the failure rate counts. Default 10.
    pub min_failure_requests: u64,
    /// Samples before a peer's own EWMA is trusted to rank it above the
    /// cluster mean (below it, it counts at once). Default 1000.
    pub min_latency_samples: u64,
    /// Lowest grade of the latency dimension (what the slowest rank was
    /// before it was graded by ratio). Default 0.1.
    pub worst_rank_score: f64,
    /// Reads hedge to the next replica after this quantile of the
    /// operation's latency. Default 0.99 ("The Tail at Scale", Dean and
    /// Barroso 2013, defers hedges to the p95; on 2 cores shared by five
    /// nodes a healthy cluster's slow requests are mostly the machine's,
    /// so hedges at the p95 (3.3% of reads) added load where every replica
    /// was slow: hot-keys p99 14.4 / 18.7 / 12.0 ms at 0.95 against 15.7 /
    /// 11.2 / 10.5 at 0.99 (plain 11.4 / 18.9 / 11.1), and with hedges off
    /// 10.8 / 28.7 / 9.1 against 16.2 / 14.8 / 13.6, while under
    /// slow-node-stall the stalled node's 200-ms reads pass either
    /// quantile: p99.9 16.8 / 20.2 / 18.5 at 0.99 against 15.3 / 20.2 /
    /// 20.4, in interleaved rounds: docs/benchmarks.md, "what hedges cost a
    /// healthy cluster").
    pub hedge_quantile: f64,
    /// Hedges per request at most, process-wide (a token bucket). Default
    /// 0.05.
    pub hedge_budget: f64,
    /// How long a request abandoned without an answer (its caller was
    /// cancelled; a hedge's loser runs on to its answer instead:
    /// docs/design.md, "A hedge's loser runs on") keeps flooring its
    /// peer's latency, as a multiple of the age it had when abandoned
    /// (doubled for each request abandoned since the peer last answered,
    /// at most [`crate::ABANDONED_DOUBLINGS`] times), unless the peer
    /// answers anything first; 0: until the request's deadline.
    /// Default 5 ([`crate::inputs::STUCK_FACTOR`]'s reasoning turned
    /// round: a peer that did not answer for `a` is avoided for `5a`
    /// more). Measured (docs/benchmarks.md, "a lost hedge race held a
    /// client off healthy nodes for seconds"): held to the deadline, a
    /// client, which sends a node nothing while its floor holds and so
    /// gets no answer to clear it, kept healthy nodes floored in episodes of 1.9
    /// to 13.4 s after lost hedge races (each hedge it sent there and lost
    /// renewed the floor), out of the ties of every key: one node for 45%
    /// of a 30-s run, and the coordinators' load 1.9x apart.
    #[serde(default)]
    pub abandoned_hold: f64,
    /// Whether a read outrun by its hedge floors the passed-over peer at
    /// once until the reads then in flight to it have ended
    /// ([`crate::Scorer::outrun`]); false: the peer is floored only as any
    /// peer is, once its oldest request is [`crate::inputs::STUCK_FACTOR`]
    /// times its estimate old. Used where a read hedges (the client's
    /// router, and a node's coordinator for reads the client did not
    /// hedge). Default true (off, the healthy 90/10 zipfian load's p99 was
    /// 12.8 against 11.9 ms, medians of five interleaved rounds:
    /// docs/benchmarks.md, "No hedge into shared slowness").
    #[serde(default = "default_outrun_floor")]
    pub outrun_floor: bool,
    /// Whether a read hedges to a replica that has a read of its own in
    /// flight for longer than the read to be hedged has waited (false: it
    /// does not: that replica is as slow now as the one the hedge would
    /// pass, so the slowness is shared, most likely the machine's, and a
    /// hedge would only add load where everything is slow; the read waits
    /// for its failover delay instead, [`crate::Scorer::hedge_may_help`]).
    /// Default false. Measured in interleaved rounds (docs/benchmarks.md,
    /// "No hedge into shared slowness"): on the healthy 90/10 zipfian load
    /// p99 9.1 against 12.1 ms with the old rule (true), hedges 1.34%
    /// against 1.68%; under a node stalled 200 ms a second p99.99 51.7
    /// against 202.1 ms.
    #[serde(default)]
    pub hedge_to_slow_replica: bool,
    /// Quantile of the speculative retry of `snitch` and `hwlb` (Cassandra's
    /// default `99p`). Default 0.99.
    pub speculative_quantile: f64,
    /// EWMA smoothing factor of C3's figures. Default 0.3 (C3, NSDI 2015).
    pub c3_alpha: f64,
    /// C3's `n`, the number of coordinators; 0: the ring's members.
    /// Default 0.
    pub coordinators: u32,
    /// The dynamic snitch's badness threshold. Default 0.1.
    pub snitch_badness: f64,
    /// Latency samples per replica in the snitch's window. Default 100.
    pub snitch_window: usize,
    /// How often the snitch recomputes its scores. Default 100 ms.
    pub snitch_interval: Duration,
    /// How often the snitch wipes its samples. Default 10 min.
    pub snitch_reset: Duration,
    /// Time constant of P2C's peak EWMA. Default 10 s (Finagle).
    pub peak_decay: Duration,
    /// How long the report-derived part of a score is reused. Default
    /// 50 ms.
    pub score_cache: Duration,
    /// Decisions logged per decision made. Default 0.001.
    pub decision_log_rate: f64,
    /// Hot keys a node reports (the K of its Space-Saving top-K). Default
    /// 16.
    pub hot_keys: usize,
}

/// Report periods of outlier history a peer's record keeps
/// ([`RouterSettings::outlier_periods`] is at most this).
pub const OUTLIER_PERIODS_KEPT: u32 = 8;

/// [`RouterSettings::tie_load_bound`]'s default.
fn default_tie_load_bound() -> f64 {
    1.0
}

/// [`RouterSettings::tie_load_bound`] of settings serialized before it
/// existed (decision logs): their decisions were made with no bound, so a
/// replay reads 0, not today's default.
fn unbounded_before_the_field() -> f64 {
    0.0
}

/// [`RouterSettings::outlier_factor`]'s default.
fn default_outlier_factor() -> f64 {
    5.0
}

/// [`RouterSettings::outlier_periods`]'s default.
fn default_outlier_periods() -> u32 {
    6
}

/// [`RouterSettings::outlier_share`]'s default.
fn default_outlier_share() -> f64 {
    0.1
}

/// [`RouterSettings::latency_probe`]'s default.
fn default_latency_probe() -> Duration {
    Duration::from_secs(1)
}

/// [`RouterSettings::probe_peak_decay`]'s default.
fn default_probe_peak_decay() -> Duration {
    Duration::from_secs(10)
}

fn default_outrun_floor() -> bool {
    true
}

impl Default for RouterSettings {
    fn default() -> Self {
        RouterSettings {
            mode: Mode::Scoring,
            weights: Weights::MIXED,
            slow_cluster_p99_ms: 5.0,
            near_tie: 0.2,
            decline_band: 0.05,
            latency_tie: 0.5,
            temperature: 0.0,
            prefer_local_zone: true,
            hop_credit: 0.3,
            in_flight_limit: 64,
            tie_load_bound: default_tie_load_bound(),
            max_queue: 2048,
            queue_threshold: 64,
            max_backlog: 4096,
            affinity_discount: 0.30,
            penalties: Penalties::default(),
            cooldown_weight: 0.2,
            cooldown_hold: Duration::from_secs(45),
            cooldown_ramp: Duration::from_secs(30),
            outlier_factor: default_outlier_factor(),
            outlier_periods: default_outlier_periods(),
            outlier_share: default_outlier_share(),
            report_period: Duration::from_secs(1),
            freshness_periods: 3,
            baseline_decay: 0.9,
            baseline_grace_periods: 10,
            slow_start: Duration::from_secs(600),
            slow_start_from: 0.6,
            ewma_alpha: crate::ewma::DEFAULT_ALPHA,
            latency_window: Duration::from_millis(100),
            latency_drift: 0.1,
            latency_probe: default_latency_probe(),
            probe_peak_decay: default_probe_peak_decay(),
            breaker_threshold: crate::breaker::DEFAULT_THRESHOLD,
            breaker_cooldown: crate::breaker::DEFAULT_COOLDOWN,
            failure_bucket: Duration::from_secs(10),
            failure_buckets: 6,
            max_failure_rate: 0.30,
            min_failure_requests: 10,
            min_latency_samples: 1000,
            worst_rank_score: 0.1,
            hedge_quantile: 0.99,
            hedge_budget: 0.05,
            abandoned_hold: 5.0,
            outrun_floor: default_outrun_floor(),
            hedge_to_slow_replica: false,
            speculative_quantile: 0.99,
            c3_alpha: 0.3,
            coordinators: 0,
            snitch_badness: 0.1,
            snitch_window: 100,
            snitch_interval: Duration::from_millis(100),
            snitch_reset: Duration::from_secs(600),
            peak_decay: Duration::from_secs(10),
            score_cache: Duration::from_millis(50),
            decision_log_rate: 0.001,
            hot_keys: 16,
        }
    }
}

impl RouterSettings {
    /// Checks ranges: fractions in [0, 1], factors in (0, 1], counts and
    /// periods at least 1, weights summing to 1.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] naming the bad setting.
    pub fn validate(&self) -> Result<()> {
        let unit = |x: f64| (0.0..=1.0).contains(&x);
        let factor = |x: f64| x > 0.0 && x <= 1.0;
        let bad = |what: &str| Err(Error::InvalidConfig(format!("router: {what}")));
        let w = &self.weights;
        if ![w.load, w.latency, w.hit, w.availability]
            .into_iter()
            .all(unit)
            || ((w.load + w.latency + w.hit + w.availability) - 1.0).abs() > 1e-6
        {
            return bad("weights must be in [0, 1] and sum to 1");
        }
        let p = &self.penalties;
        if ![
            p.declining,
            p.errors,
            p.queue,
            p.suspect,
            p.hints,
            p.repair,
            self.cooldown_weight,
            self.baseline_decay,
            self.slow_start_from,
            self.ewma_alpha,
            self.c3_alpha,
        ]
        .into_iter()
        .all(factor)
        {
            return bad(
                "penalties, weights of cool-down and slow start, decays and alphas must be in (0, 1]",
            );
        }
        if ![
            self.near_tie,
            self.decline_band,
            self.latency_tie,
            self.hop_credit,
            self.affinity_discount,
            p.error_rate,
            self.latency_drift,
            self.max_failure_rate,
            self.worst_rank_score,
            self.hedge_budget,
            self.snitch_badness,
            self.decision_log_rate,
        ]
        .into_iter()
        .all(unit)
        {
            return bad("tolerances, rates, budgets and credits must be in [0, 1]");
        }
        let open_unit = |x: f64| x > 0.0 && x < 1.0;
        if !open_unit(self.hedge_quantile) || !open_unit(self.speculative_quantile) {
            return bad("quantiles must be in (0, 1)");
        }
        if !(1.0..=1000.0).contains(&self.outlier_factor)
            || self.outlier_periods > OUTLIER_PERIODS_KEPT
        {
            return bad("outlier_factor must be in [1, 1000] and outlier_periods at most 8");
        }
        if !(self.outlier_share > 0.0 && self.outlier_share <= 1.0) {
            return bad("outlier_share must be in (0, 1]");
        }
        if !(0.0..=1000.0).contains(&self.abandoned_hold) {
            return bad("abandoned_hold must be in [0, 1000]");
        }
        if !(0.0..=10.0).contains(&self.tie_load_bound) {
            return bad("tie_load_bound must be in [0, 10]");
        }
        if !(0.0..=10.0).contains(&self.temperature) || self.slow_cluster_p99_ms <= 0.0 {
            return bad("temperature must be in [0, 10] and slow_cluster_p99_ms above 0");
        }
        if self.breaker_threshold == 0
            || self.failure_buckets == 0
            || self.freshness_periods == 0
            || self.in_flight_limit == 0
            || self.max_queue == 0
            || self.max_backlog == 0
            || self.snitch_window == 0
        {
            return bad("thresholds, limits, windows and periods must be at least 1");
        }
        let ms = Duration::from_millis(1);
        if [
            self.failure_bucket,
            self.report_period,
            self.snitch_interval,
            self.peak_decay,
            self.probe_peak_decay,
        ]
        .into_iter()
        .any(|d| d < ms)
        {
            return bad("periods must be at least 1 ms");
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid_and_presets_sum_to_one() {
        RouterSettings::default().validate().unwrap();
        for name in ["mixed", "read-heavy", "write-heavy"] {
            let w = Weights::preset(name).unwrap();
            assert!((w.load + w.latency + w.hit + w.availability - 1.0).abs() < 1e-9);
        }
        assert!(Weights::preset("fast").is_err());
        let raised = Weights::MIXED.with_latency_factor(2.0);
        assert!(raised.latency > Weights::MIXED.latency);
        assert!(
            (raised.load + raised.latency + raised.hit + raised.availability - 1.0).abs() < 1e-9
        );
    }

    #[test]
    fn bad_values_are_refused() {
        let mut s = RouterSettings::default();
        s.weights.load = 0.5;
        assert!(s.validate().is_err());
        let mut s = RouterSettings::default();
        s.penalties.suspect = 0.0;
        assert!(s.validate().is_err());
        let s = RouterSettings {
            hedge_quantile: 1.0,
            ..RouterSettings::default()
        };
        assert!(s.validate().is_err());
        for abandoned_hold in [-1.0, 1001.0, f64::NAN] {
            let s = RouterSettings {
                abandoned_hold,
                ..RouterSettings::default()
            };
            assert!(s.validate().is_err(), "{abandoned_hold}");
        }
        for (outlier_factor, outlier_periods) in [(0.5, 3), (f64::NAN, 3), (5.0, 9)] {
            let s = RouterSettings {
                outlier_factor,
                outlier_periods,
                ..RouterSettings::default()
            };
            assert!(s.validate().is_err(), "{outlier_factor} {outlier_periods}");
        }
        for outlier_share in [0.0, -0.1, 1.5, f64::NAN] {
            let s = RouterSettings {
                outlier_share,
                ..RouterSettings::default()
            };
            assert!(s.validate().is_err(), "{outlier_share}");
        }
    }

    #[test]
    fn settings_saved_before_outlier_detection_existed_load_with_its_defaults() {
        let mut json = serde_json::to_value(RouterSettings::default()).unwrap();
        let map = json.as_object_mut().unwrap();
        map.remove("outlier_factor");
        map.remove("outlier_periods");
        let s: RouterSettings = serde_json::from_value(json).unwrap();
        assert_eq!((s.outlier_factor, s.outlier_periods), (5.0, 6));
    }

    #[test]
    fn settings_saved_before_the_tie_load_bound_existed_replay_without_one() {
        // `decide` reads the bound directly: a decision logged before it
        // existed was made with none, so its replay must not take today's.
        let mut json = serde_json::to_value(RouterSettings::default()).unwrap();
        json.as_object_mut().unwrap().remove("tie_load_bound");
        let s: RouterSettings = serde_json::from_value(json).unwrap();
        assert_eq!(s.tie_load_bound, 0.0);
        assert_eq!(RouterSettings::default().tie_load_bound, 1.0);
    }
}
