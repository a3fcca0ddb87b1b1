//! What `kvctl bench` measured: per-operation latency histograms (HDR,
//! microseconds, 3 significant digits) and error counts, and how they are
//! printed.

use std::collections::BTreeMap;
use std::time::Duration;

use hdrhistogram::Histogram;
use serde_json::{Value, json};

/// Longest latency recorded exactly, in microseconds (a minute); slower
/// operations count as this.
const MAX_US: u64 = 60_000_000;

/// The figures of one operation kind (or of all together).
///
/// Closed loop, the latency histogram holds successes only; open loop
/// ([`OpStats::failed_after`]), failures too, at the time they took (a
/// timed-out request at its deadline), so that no request is left out of
/// the percentiles.
#[derive(Clone, Debug)]
pub struct OpStats {
    /// Latencies, microseconds.
    latency: Histogram<u64>,
    /// Successful operations.
    ok: u64,
    /// Failed operations by error category (`unavailable`, ...), with one
    /// message as an example.
    errors: BTreeMap<String, (u64, String)>,
}

impl Default for OpStats {
    fn default() -> Self {
        OpStats::with_precision(3)
    }
}

impl OpStats {
    /// Empty figures whose histogram keeps `digits` significant digits
    /// (3: a fixed ~200 KiB; 2: ~25 KiB, for time series).
    pub fn with_precision(digits: u8) -> Self {
        OpStats {
            // 1 us .. 60 s.
            latency: Histogram::new_with_bounds(1, MAX_US, digits).expect("constant, valid bounds"),
            ok: 0,
            errors: BTreeMap::new(),
        }
    }

    /// Records a success that took `elapsed`.
    pub fn ok(&mut self, elapsed: Duration) {
        self.record(elapsed);
        self.ok += 1;
    }

    /// Records a failure that took `elapsed` in the latency histogram as
    /// well as by category (open loop).
    pub fn failed_after(&mut self, elapsed: Duration, message: String) {
        self.record(elapsed);
        self.failed(message);
    }

    fn record(&mut self, elapsed: Duration) {
        let us = u64::try_from(elapsed.as_micros()).unwrap_or(MAX_US);
        self.latency.saturating_record(us.clamp(1, MAX_US));
    }

    /// Records a failure; `message` is the client error's text, whose first
    /// word (before `:`) is its category.
    pub fn failed(&mut self, message: String) {
        let category = message
            .split(':')
            .next()
            .unwrap_or("error")
            .trim()
            .to_string();
        let entry = self.errors.entry(category).or_insert((0, message));
        entry.0 += 1;
    }

    /// Adds `other`'s samples and errors.
    pub fn merge(&mut self, other: &OpStats) {
        let _ = self.latency.add(&other.latency);
        self.ok += other.ok;
        for (category, (n, example)) in &other.errors {
            let entry = self
                .errors
                .entry(category.clone())
                .or_insert((0, example.clone()));
            entry.0 += n;
        }
    }

    /// Successful operations.
    pub fn ok_count(&self) -> u64 {
        self.ok
    }

    /// Failed operations.
    pub fn error_count(&self) -> u64 {
        self.errors.values().map(|(n, _)| n).sum()
    }

    /// The latency at quantile `q` (0..=1), milliseconds.
    pub fn quantile_ms(&self, q: f64) -> f64 {
        if self.latency.is_empty() {
            return 0.0;
        }
        self.latency.value_at_quantile(q) as f64 / 1000.0
    }

    /// The longest latency recorded, milliseconds (0 when none).
    pub fn max_ms(&self) -> f64 {
        if self.latency.is_empty() {
            return 0.0;
        }
        self.latency.max() as f64 / 1000.0
    }

    /// `{"ops", "ops_per_s", "p50_ms", "p99_ms", "p999_ms", "p9999_ms",
    /// "max_ms", "errors", "error_kinds"}` over a run of `elapsed`.
    pub fn json(&self, elapsed: Duration) -> Value {
        let errors: BTreeMap<&str, Value> = self
            .errors
            .iter()
            .map(|(c, (n, example))| (c.as_str(), json!({"count": n, "example": example})))
            .collect();
        json!({
            "ops": self.ok_count(),
            "ops_per_s": per_second(self.ok_count(), elapsed),
            "p50_ms": self.quantile_ms(0.50),
            "p99_ms": self.quantile_ms(0.99),
            "p999_ms": self.quantile_ms(0.999),
            "p9999_ms": self.quantile_ms(0.9999),
            "max_ms": self.max_ms(),
            "errors": self.error_count(),
            "error_kinds": errors,
        })
    }

    /// A table row: name, ops, ops/s, p50, p99, p99.9, errors.
    pub fn row(&self, name: &str, elapsed: Duration) -> Vec<String> {
        vec![
            name.to_string(),
            self.ok_count().to_string(),
            format!("{:.0}", per_second(self.ok_count(), elapsed)),
            format!("{:.3}", self.quantile_ms(0.50)),
            format!("{:.3}", self.quantile_ms(0.99)),
            format!("{:.3}", self.quantile_ms(0.999)),
            self.error_count().to_string(),
        ]
    }

    /// One line per error category: count and an example message.
    pub fn error_lines(&self, name: &str) -> Vec<String> {
        self.errors
            .iter()
            .map(|(c, (n, example))| format!("{name}: {n} {c} errors, e.g. {example}"))
            .collect()
    }
}

/// `count` over `elapsed`, per second.
pub fn per_second(count: u64, elapsed: Duration) -> f64 {
    let secs = elapsed.as_secs_f64();
    if secs > 0.0 { count as f64 / secs } else { 0.0 }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_errors_and_merging() {
        let mut a = OpStats::default();
        for ms in 1..=1000u64 {
            a.ok(Duration::from_micros(ms * 1000));
        }
        let mut b = OpStats::default();
        b.failed("unavailable: node2: only 1 of 3".into());
        b.failed("unavailable: node3: only 1 of 3".into());
        a.merge(&b);
        assert_eq!((a.ok_count(), a.error_count()), (1000, 2));
        assert!(
            (a.quantile_ms(0.5) - 500.0).abs() < 1.0,
            "{}",
            a.quantile_ms(0.5)
        );
        assert!((a.quantile_ms(0.999) - 999.0).abs() < 1.0);
        let v = a.json(Duration::from_secs(2));
        // p99.99 of 1..=1000 ms is the slowest but none: 1000 ms.
        let p9999 = v["p9999_ms"].as_f64().unwrap_or(0.0);
        assert!((p9999 - 1000.0).abs() < 1.0, "{p9999}");
        assert_eq!(v["ops_per_s"], 500.0);
        assert_eq!(v["error_kinds"]["unavailable"]["count"], 2);
        assert_eq!(a.row("get", Duration::from_secs(1))[2], "1000");
        assert!(a.error_lines("get")[0].starts_with("get: 2 unavailable errors"));
    }
}
