//! `[router]`: every tunable of the KV-aware router, with the defaults of
//! `kv_router::RouterSettings` (docs/design.md, "The scoring model", gives
//! their sources). Durations are in the unit their key names.

use std::time::Duration;

use kv_router::{Mode, Penalties, RouterSettings, Weights};
use serde::Deserialize;

/// The dimension weights: a preset's name, or the four weights.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(untagged)]
pub enum WeightsConfig {
    /// `mixed` (default), `read-heavy` or `write-heavy`.
    Preset(String),
    /// Explicit weights; they must sum to 1.
    Explicit {
        /// Load.
        load: f64,
        /// Latency.
        latency: f64,
        /// Cache heat.
        hit: f64,
        /// Availability.
        availability: f64,
    },
}

/// The `[router]` section.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct RouterConfig {
    /// `plain`, `snitch`, `hwlb`, `c3`, `p2c` or `scoring` (default).
    pub mode: String,
    /// Dimension weights. Default `mixed` (0.30/0.35/0.20/0.15).
    pub weights: WeightsConfig,
    /// Cluster p99 (ms) above which the latency weight rises. Default 5.
    pub slow_cluster_p99_ms: f64,
    /// Relative band treated as a tie between scores. Default 0.2.
    pub near_tie: f64,
    /// Relative period-to-period fall of a score that counts toward the
    /// declining penalty. Default 0.05.
    pub decline_band: f64,
    /// Relative band of latencies graded alike (1.0) on the latency
    /// dimension, from the fastest peer's. Default 0.5.
    pub latency_tie: f64,
    /// Softmax temperature; 0 picks the best, near-ties at random.
    /// Default 0.
    pub temperature: f64,
    /// Among near-ties, prefer replicas in this node's zone. Default true.
    pub prefer_local_zone: bool,
    /// Score credit of the local replica for the hop it saves. Default
    /// 0.3.
    pub hop_credit: f64,
    /// Requests in flight to one peer that make its load 1.0. Default 64.
    pub in_flight_limit: u32,
    /// The load bound of the per-key tie-break (consistent hashing with
    /// bounded loads' epsilon; 0: off). Default 1.0 (`RouterSettings`'s
    /// documentation has the measurements).
    pub tie_load_bound: f64,
    /// Queue depth above which the queue penalty applies. Default 64.
    pub queue_threshold: u32,
    /// Unflushed writes that make the backlog load 1.0. Default 4096.
    pub max_backlog: u32,
    /// How much lower a replica without affinity to the key starts on the
    /// hit dimension. Default 0.30.
    pub affinity_discount: f64,
    /// Penalty: score declined two periods in a row. Default 0.85.
    pub penalty_declining: f64,
    /// Penalty: error rate above `error_rate`. Default 0.4.
    pub penalty_errors: f64,
    /// The error rate that starts the error penalty and a cool-down.
    /// Default 0.05.
    pub error_rate: f64,
    /// Penalty: queue above its threshold. Default 0.6.
    pub penalty_queue: f64,
    /// Penalty: phi above half the conviction threshold. Default 0.2.
    pub penalty_suspect: f64,
    /// Penalty: hints pending for the replica. Default 0.8.
    pub penalty_hints: f64,
    /// Penalty: a repair pass running on it. Default 0.9.
    pub penalty_repair: f64,
    /// Cool-down weight after an error-rate excursion or as a latency
    /// outlier.
    /// Default 0.2.
    pub cooldown_weight: f64,
    /// How long the cool-down holds, seconds. Default 45.
    pub cooldown_hold_secs: u64,
    /// How long the ramp back takes, seconds. Default 30.
    pub cooldown_ramp_secs: u64,
    /// A request slower than this many times the median of the peers'
    /// latency estimates is slow for outlier judgement. Default 5.
    pub outlier_factor: f64,
    /// Report periods, of the last 8, as an outlier that start a cool-down
    /// (0: off). Default 6.
    pub outlier_periods: u32,
    /// The share of a peer's requests in a period, in (0, 1], that must be
    /// slow (or abandoned unanswered) for it to be that period's latency
    /// outlier. Default 0.1.
    pub outlier_share: f64,
    /// How often nodes report their load, ms. Default 1000.
    pub report_period_ms: u64,
    /// Periods after which a report is unconfirmed. Default 3.
    pub freshness_periods: u32,
    /// Per-period decay of a stale node's baseline. Default 0.9.
    pub baseline_decay: f64,
    /// Stale periods before the baseline decays. Default 10.
    pub baseline_grace_periods: u32,
    /// Slow-start window of a new or rejoined node, seconds. Default 600.
    pub slow_start_secs: u64,
    /// Where the slow-start ramp begins. Default 0.6.
    pub slow_start_from: f64,
    /// Latency EWMA smoothing factor. Default 0.2.
    pub ewma_alpha: f64,
    /// The shortest time a latency EWMA averages over, ms (0: off).
    /// Default 100.
    pub latency_window_ms: u64,
    /// Per-period drift of an unsampled latency toward the cluster mean.
    /// Default 0.1.
    pub latency_drift: f64,
    /// How long a peer left out of every read's first R is kept out
    /// (ranked by its slowest read answer since, too) and how often it is then
    /// probed by a read, ms (0: off). Default 1000.
    pub latency_probe_ms: u64,
    /// Time constant of the decay of a kept-out peer's slowest read
    /// answer since it was kept out, ms. Default 10000.
    pub probe_peak_decay_ms: u64,
    /// Consecutive failures that open a breaker. Default 5.
    pub breaker_threshold: u32,
    /// How long a breaker stays open, ms. Default 5000.
    pub breaker_cooldown_ms: u64,
    /// Failure rate above which a peer is excluded. Default 0.30.
    pub max_failure_rate: f64,
    /// Requests in the one-minute window before it counts. Default 10.
    pub min_failure_requests: u64,
    /// Samples before a peer's own latency is trusted. Default 1000.
    pub min_latency_samples: u64,
    /// Latency score of the slowest candidate. Default 0.1.
    pub worst_rank_score: f64,
    /// Reads hedge after this quantile of recent latency. Default 0.99
    /// (`RouterSettings`'s documentation has the measurements).
    pub hedge_quantile: f64,
    /// Hedges per request at most (a token bucket). Default 0.05.
    pub hedge_budget: f64,
    /// How long a request abandoned unanswered (its caller cancelled; a
    /// hedge's loser runs on to its answer) keeps flooring its peer's
    /// latency, as a multiple of its age when abandoned (0: until its
    /// deadline). Default 5.
    pub abandoned_hold: f64,
    /// Whether a read outrun by its hedge floors its replica at once until
    /// the reads then in flight to it end. Default true.
    pub outrun_floor: bool,
    /// Whether a read hedges to a replica with a read in flight for longer
    /// than the hedged read has waited (false: the slowness is shared, and
    /// the read waits for its failover instead). Default false.
    pub hedge_to_slow_replica: bool,
    /// Quantile of the snitch's and HWLB's speculative retry. Default 0.99.
    pub speculative_quantile: f64,
    /// C3's EWMA factor. Default 0.3.
    pub c3_alpha: f64,
    /// C3's `n`, the number of coordinators; 0: the ring's members.
    /// Default 0.
    pub coordinators: u32,
    /// The dynamic snitch's badness threshold. Default 0.1.
    pub snitch_badness: f64,
    /// P2C's peak-EWMA time constant, ms. Default 10000.
    pub peak_decay_ms: u64,
    /// How long the report-derived part of a score is reused, ms. Default
    /// 50.
    pub score_cache_ms: u64,
    /// Decisions logged per decision made. Default 0.001.
    pub decision_log_rate: f64,
    /// Hot keys a node reports. Default 16.
    pub hot_keys: usize,
}

impl Default for RouterConfig {
    fn default() -> Self {
        let d = RouterSettings::default();
        let p = d.penalties;
        RouterConfig {
            mode: d.mode.as_str().to_string(),
            weights: WeightsConfig::Preset("mixed".into()),
            slow_cluster_p99_ms: d.slow_cluster_p99_ms,
            near_tie: d.near_tie,
            decline_band: d.decline_band,
            latency_tie: d.latency_tie,
            temperature: d.temperature,
            prefer_local_zone: d.prefer_local_zone,
            hop_credit: d.hop_credit,
            in_flight_limit: d.in_flight_limit,
            tie_load_bound: d.tie_load_bound,
            queue_threshold: d.queue_threshold,
            max_backlog: d.max_backlog,
            affinity_discount: d.affinity_discount,
            penalty_declining: p.declining,
            penalty_errors: p.errors,
            error_rate: p.error_rate,
            penalty_queue: p.queue,
            penalty_suspect: p.suspect,
            penalty_hints: p.hints,
            penalty_repair: p.repair,
            cooldown_weight: d.cooldown_weight,
            cooldown_hold_secs: d.cooldown_hold.as_secs(),
            cooldown_ramp_secs: d.cooldown_ramp.as_secs(),
            outlier_factor: d.outlier_factor,
            outlier_periods: d.outlier_periods,
            outlier_share: d.outlier_share,
            report_period_ms: millis(d.report_period),
            freshness_periods: d.freshness_periods,
            baseline_decay: d.baseline_decay,
            baseline_grace_periods: d.baseline_grace_periods,
            slow_start_secs: d.slow_start.as_secs(),
            slow_start_from: d.slow_start_from,
            ewma_alpha: d.ewma_alpha,
            latency_window_ms: u64::try_from(d.latency_window.as_millis()).unwrap_or(u64::MAX),
            latency_drift: d.latency_drift,
            latency_probe_ms: millis(d.latency_probe),
            probe_peak_decay_ms: millis(d.probe_peak_decay),
            breaker_threshold: d.breaker_threshold,
            breaker_cooldown_ms: millis(d.breaker_cooldown),
            max_failure_rate: d.max_failure_rate,
            min_failure_requests: d.min_failure_requests,
            min_latency_samples: d.min_latency_samples,
            worst_rank_score: d.worst_rank_score,
            hedge_quantile: d.hedge_quantile,
            hedge_budget: d.hedge_budget,
            abandoned_hold: d.abandoned_hold,
            outrun_floor: d.outrun_floor,
            hedge_to_slow_replica: d.hedge_to_slow_replica,
            speculative_quantile: d.speculative_quantile,
            c3_alpha: d.c3_alpha,
            coordinators: d.coordinators,
            snitch_badness: d.snitch_badness,
            peak_decay_ms: millis(d.peak_decay),
            score_cache_ms: millis(d.score_cache),
            decision_log_rate: d.decision_log_rate,
            hot_keys: d.hot_keys,
        }
    }
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

impl RouterConfig {
    /// The router's settings; `max_queue` is the node's replica-request
    /// bound (`[limits] max_peer_requests`).
    ///
    /// # Errors
    /// An unknown mode or weights preset, or a value out of range (the
    /// message names it).
    pub fn settings(&self, max_queue: usize) -> anyhow::Result<RouterSettings> {
        let mode: Mode = self
            .mode
            .parse()
            .map_err(|e| anyhow::anyhow!("router.mode: {e}"))?;
        let weights = match &self.weights {
            WeightsConfig::Preset(name) => {
                Weights::preset(name).map_err(|e| anyhow::anyhow!("router.weights: {e}"))?
            }
            WeightsConfig::Explicit {
                load,
                latency,
                hit,
                availability,
            } => Weights {
                load: *load,
                latency: *latency,
                hit: *hit,
                availability: *availability,
            },
        };
        let d = RouterSettings::default();
        let settings = RouterSettings {
            mode,
            weights,
            slow_cluster_p99_ms: self.slow_cluster_p99_ms,
            near_tie: self.near_tie,
            decline_band: self.decline_band,
            latency_tie: self.latency_tie,
            temperature: self.temperature,
            prefer_local_zone: self.prefer_local_zone,
            hop_credit: self.hop_credit,
            in_flight_limit: self.in_flight_limit,
            tie_load_bound: self.tie_load_bound,
            max_queue: u32::try_from(max_queue).unwrap_or(u32::MAX),
            queue_threshold: self.queue_threshold,
            max_backlog: self.max_backlog,
            affinity_discount: self.affinity_discount,
            penalties: Penalties {
                declining: self.penalty_declining,
                errors: self.penalty_errors,
                error_rate: self.error_rate,
                queue: self.penalty_queue,
                suspect: self.penalty_suspect,
                hints: self.penalty_hints,
                repair: self.penalty_repair,
            },
            cooldown_weight: self.cooldown_weight,
            cooldown_hold: Duration::from_secs(self.cooldown_hold_secs),
            cooldown_ramp: Duration::from_secs(self.cooldown_ramp_secs),
            outlier_factor: self.outlier_factor,
            outlier_periods: self.outlier_periods,
            outlier_share: self.outlier_share,
            report_period: Duration::from_millis(self.report_period_ms),
            freshness_periods: self.freshness_periods,
            baseline_decay: self.baseline_decay,
            baseline_grace_periods: self.baseline_grace_periods,
            slow_start: Duration::from_secs(self.slow_start_secs),
            slow_start_from: self.slow_start_from,
            ewma_alpha: self.ewma_alpha,
            latency_window: Duration::from_millis(self.latency_window_ms),
            latency_drift: self.latency_drift,
            latency_probe: Duration::from_millis(self.latency_probe_ms),
            probe_peak_decay: Duration::from_millis(self.probe_peak_decay_ms),
            breaker_threshold: self.breaker_threshold,
            breaker_cooldown: Duration::from_millis(self.breaker_cooldown_ms),
            failure_bucket: d.failure_bucket,
            failure_buckets: d.failure_buckets,
            max_failure_rate: self.max_failure_rate,
            min_failure_requests: self.min_failure_requests,
            min_latency_samples: self.min_latency_samples,
            worst_rank_score: self.worst_rank_score,
            hedge_quantile: self.hedge_quantile,
            hedge_budget: self.hedge_budget,
            abandoned_hold: self.abandoned_hold,
            outrun_floor: self.outrun_floor,
            hedge_to_slow_replica: self.hedge_to_slow_replica,
            speculative_quantile: self.speculative_quantile,
            c3_alpha: self.c3_alpha,
            coordinators: self.coordinators,
            snitch_badness: self.snitch_badness,
            snitch_window: d.snitch_window,
            snitch_interval: d.snitch_interval,
            snitch_reset: d.snitch_reset,
            peak_decay: Duration::from_millis(self.peak_decay_ms),
            score_cache: Duration::from_millis(self.score_cache_ms),
            decision_log_rate: self.decision_log_rate,
            hot_keys: self.hot_keys,
        };
        anyhow::ensure!(
            (1..=1024).contains(&self.hot_keys),
            "router.hot_keys must be in 1..=1024"
        );
        settings.validate().map_err(|e| anyhow::anyhow!("{e}"))?;
        Ok(settings)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_defaults_are_the_routers_and_bad_values_are_refused() {
        let s = RouterConfig::default().settings(2048).unwrap();
        assert_eq!(s, RouterSettings::default());
        let c: RouterConfig = toml::from_str(
            "mode = \"p2c\"\nweights = { load = 0.25, latency = 0.25, hit = 0.25, availability = 0.25 }\n",
        )
        .unwrap();
        let s = c.settings(100).unwrap();
        assert_eq!(s.mode, Mode::P2c);
        assert_eq!(s.weights.hit, 0.25);
        assert_eq!(s.max_queue, 100);
        let c: RouterConfig = toml::from_str("weights = \"read-heavy\"\n").unwrap();
        assert_eq!(c.settings(1).unwrap().weights, Weights::READ_HEAVY);
        for bad in [
            "mode = \"fast\"",
            "weights = \"heavy\"",
            "near_tie = 2.0",
            "latency_tie = -0.1",
            "hot_keys = 0",
        ] {
            let c: RouterConfig = toml::from_str(bad).unwrap();
            assert!(c.settings(1).is_err(), "{bad}");
        }
        assert!(toml::from_str::<RouterConfig>("nope = 1").is_err());
    }
}
