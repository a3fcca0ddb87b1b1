//! Latency percentiles and throughput of a history's client operations.
//!
//! Percentiles use the nearest-rank method: the p-th percentile of n sorted
//! samples is the sample at rank ceil(p/100 x n) (1-based), so it is always
//! a latency that was really measured, and p99.9 of fewer than 1,000
//! samples is the maximum. Final reads are not client operations and are
//! left out.

use crate::history::{Entry, OpKind};

/// Latency and throughput figures of a run.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Stats {
    /// Client operations in the history (final reads excluded).
    pub ops: usize,
    /// Median latency, in milliseconds.
    pub p50_ms: f64,
    /// 99th percentile latency, in milliseconds.
    pub p99_ms: f64,
    /// 99.9th percentile latency, in milliseconds.
    pub p999_ms: f64,
    /// Client operations per second of the run: from the first start to the
    /// last end of a client operation.
    pub ops_per_s: f64,
}

impl Stats {
    /// The figures of every client operation in `entries`, whatever its
    /// outcome.
    pub fn of(entries: &[Entry]) -> Self {
        let ops: Vec<&Entry> = entries.iter().filter(|e| e.op != OpKind::Final).collect();
        if ops.is_empty() {
            return Stats::default();
        }
        let mut latencies: Vec<f64> = ops.iter().map(|e| e.latency_ms).collect();
        latencies.sort_by(f64::total_cmp);
        let first = ops.iter().map(|e| e.start_ms).fold(f64::INFINITY, f64::min);
        let last = ops
            .iter()
            .map(|e| e.start_ms + e.latency_ms)
            .fold(f64::NEG_INFINITY, f64::max);
        let span_s = (last - first) / 1000.0;
        Stats {
            ops: ops.len(),
            p50_ms: percentile(&latencies, 50.0),
            p99_ms: percentile(&latencies, 99.0),
            p999_ms: percentile(&latencies, 99.9),
            ops_per_s: if span_s > 0.0 {
                ops.len() as f64 / span_s
            } else {
                0.0
            },
        }
    }
}

/// The `p`-th percentile (0 < p <= 100) of `sorted` (ascending) by the
/// nearest-rank method; 0 when there are no samples.
pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let n = sorted.len();
    // Rank in 1..=n. The small epsilon keeps 99.9% of 1000 samples at rank
    // 999 although 0.999 * 1000.0 is 998.9999999999999 in floating point.
    let rank = ((p / 100.0) * n as f64 - 1e-9).ceil().clamp(1.0, n as f64) as usize;
    sorted[rank - 1]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::Outcome;

    fn ascending(n: usize) -> Vec<f64> {
        (1..=n).map(|i| i as f64).collect()
    }

    #[test]
    fn percentiles_are_nearest_rank() {
        let xs = ascending(1000);
        assert_eq!(percentile(&xs, 50.0), 500.0);
        assert_eq!(percentile(&xs, 99.0), 990.0);
        assert_eq!(percentile(&xs, 99.9), 999.0);
        assert_eq!(percentile(&xs, 100.0), 1000.0);
        let xs = ascending(10);
        assert_eq!(percentile(&xs, 50.0), 5.0);
        assert_eq!(percentile(&xs, 99.0), 10.0);
        assert_eq!(percentile(&xs, 99.9), 10.0);
        assert_eq!(percentile(&xs, 1.0), 1.0);
    }

    #[test]
    fn percentiles_of_tiny_samples() {
        assert_eq!(percentile(&[], 50.0), 0.0);
        assert_eq!(percentile(&[7.5], 50.0), 7.5);
        assert_eq!(percentile(&[7.5], 99.9), 7.5);
        assert_eq!(percentile(&[1.0, 2.0], 50.0), 1.0);
        assert_eq!(percentile(&[1.0, 2.0], 51.0), 2.0);
    }

    fn op(kind: OpKind, start_ms: f64, latency_ms: f64) -> Entry {
        Entry {
            op: kind,
            client: Some(0),
            key: "k".into(),
            value: None,
            element: None,
            blind: false,
            saw: None,
            values: None,
            deleted: None,
            outcome: Outcome::Ok,
            error: None,
            start_ms,
            latency_ms,
        }
    }

    #[test]
    fn final_reads_are_not_client_operations() {
        let entries = [
            op(OpKind::Read, 0.0, 4.0),
            op(OpKind::Put, 500.0, 2.0),
            op(OpKind::Read, 998.0, 2.0),
            op(OpKind::Final, 5000.0, 90.0),
        ];
        let stats = Stats::of(&entries);
        assert_eq!(stats.ops, 3);
        assert_eq!(stats.p50_ms, 2.0);
        assert_eq!(stats.p999_ms, 4.0);
        // Three operations between 0 ms and 1000 ms.
        assert!((stats.ops_per_s - 3.0).abs() < 1e-9, "{stats:?}");
        assert_eq!(Stats::of(&[]), Stats::default());
    }
}
