//! What a benchmark run measured, whole and per interval: the figures of
//! gets, puts, and a time series of latency per `--interval` seconds (by
//! the time each request started, or was meant to start in open loop).

use std::time::Duration;

use serde_json::{Value, json};

use super::BenchOp;
use super::stats::OpStats;

/// Longest series kept, in intervals (a day of 1-s intervals).
const MAX_INTERVALS: u64 = 86_400;

/// One request's outcome: `Ok` or the client error's text.
pub type Outcome = Result<(), String>;

/// The figures of a run (or of one worker, merged at the end).
#[derive(Clone, Debug)]
pub struct Recorder {
    /// Gets.
    pub get: OpStats,
    /// Puts.
    pub put: OpStats,
    /// Failures count in the latency percentiles (open loop).
    open_loop: bool,
    /// Interval of the series; `None`: no series.
    interval: Option<Duration>,
    /// Every request (get and put) per interval.
    buckets: Vec<OpStats>,
}

impl Recorder {
    /// An empty recorder; `interval` of zero keeps no series.
    pub fn new(open_loop: bool, interval: Duration) -> Self {
        Recorder {
            get: OpStats::default(),
            put: OpStats::default(),
            open_loop,
            interval: (!interval.is_zero()).then_some(interval),
            buckets: Vec::new(),
        }
    }

    /// Records one request of kind `op` that started `at` after the
    /// measurement began and took `latency`.
    pub fn record(&mut self, op: BenchOp, at: Duration, latency: Duration, outcome: Outcome) {
        let stats = match op {
            BenchOp::Get => &mut self.get,
            BenchOp::Put => &mut self.put,
        };
        Self::apply(stats, self.open_loop, latency, outcome.clone());
        if let Some(interval) = self.interval {
            let index = (at.as_nanos() / interval.as_nanos().max(1)) as u64;
            if index < MAX_INTERVALS {
                let index = index as usize;
                if self.buckets.len() <= index {
                    self.buckets
                        .resize_with(index + 1, || OpStats::with_precision(2));
                }
                // Every interval's percentiles include its failures.
                Self::apply(&mut self.buckets[index], true, latency, outcome);
            }
        }
    }

    fn apply(stats: &mut OpStats, open_loop: bool, latency: Duration, outcome: Outcome) {
        match outcome {
            Ok(()) => stats.ok(latency),
            Err(message) if open_loop => stats.failed_after(latency, message),
            Err(message) => stats.failed(message),
        }
    }

    /// Adds another worker's figures.
    pub fn merge(&mut self, other: &Recorder) {
        self.get.merge(&other.get);
        self.put.merge(&other.put);
        if self.buckets.len() < other.buckets.len() {
            self.buckets
                .resize_with(other.buckets.len(), || OpStats::with_precision(2));
        }
        for (mine, theirs) in self.buckets.iter_mut().zip(&other.buckets) {
            mine.merge(theirs);
        }
    }

    /// Gets and puts together.
    pub fn all(&self) -> OpStats {
        let mut all = self.get.clone();
        all.merge(&self.put);
        all
    }

    /// The series: `[{"t_s", "ops", "errors", "p50_ms", "p99_ms",
    /// "max_ms"}]`, `t_s` the interval's start in seconds from the
    /// measurement's start (empty without `--interval`).
    pub fn series_json(&self) -> Vec<Value> {
        let Some(interval) = self.interval else {
            return Vec::new();
        };
        self.buckets
            .iter()
            .enumerate()
            .map(|(i, b)| {
                json!({
                    "t_s": interval.as_secs_f64() * i as f64,
                    "ops": b.ok_count(),
                    "errors": b.error_count(),
                    "p50_ms": b.quantile_ms(0.50),
                    "p99_ms": b.quantile_ms(0.99),
                    "max_ms": b.max_ms(),
                })
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_series_buckets_by_start_and_open_loop_counts_failures() {
        let mut a = Recorder::new(true, Duration::from_secs(1));
        let ms = Duration::from_millis;
        a.record(BenchOp::Get, ms(100), ms(2), Ok(()));
        a.record(BenchOp::Put, ms(1500), ms(900), Err("timeout: x".into()));
        let mut b = Recorder::new(true, Duration::from_secs(1));
        b.record(BenchOp::Get, ms(2500), ms(4), Ok(()));
        a.merge(&b);
        let series = a.series_json();
        assert_eq!(series.len(), 3);
        assert_eq!(series[1]["errors"], 1);
        assert!((series[1]["max_ms"].as_f64().unwrap_or(0.0) - 900.0).abs() < 10.0);
        assert_eq!(series[2]["t_s"], 2.0);
        // Open loop: the failure is in the percentiles (and max).
        assert!(a.all().max_ms() >= 890.0);
        assert_eq!((a.all().ok_count(), a.all().error_count()), (2, 1));

        // Closed loop: a failure is counted, not timed.
        let mut closed = Recorder::new(false, Duration::ZERO);
        closed.record(BenchOp::Get, ms(0), ms(900), Err("unavailable: x".into()));
        closed.record(BenchOp::Get, ms(0), ms(3), Ok(()));
        assert!(closed.all().max_ms() < 10.0);
        assert!(closed.series_json().is_empty());
    }
}
