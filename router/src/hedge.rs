//! Hedged reads (Dean and Barroso, "The Tail at Scale", 2013): a read
//! whose first replicas have not answered after a delay derived from
//! observed latency (a quantile: p95 by default) is also sent to the next
//! replica; the first answers win. A budget keeps a cluster-wide slowdown
//! from doubling the load: a token bucket that earns `budget` tokens per
//! request (5%) and spends one per hedge.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// Tokens the bucket holds at most: a short burst of hedges after a quiet
/// spell, never more.
const BURST: f64 = 10.0;

/// The process's hedge budget.
#[derive(Clone, Debug)]
pub struct HedgeBudget {
    /// Hedges earned per request.
    budget: f64,
    /// Tokens available.
    tokens: f64,
    /// Hedges sent.
    sent: u64,
    /// Hedges the budget refused.
    denied: u64,
}

impl HedgeBudget {
    /// A budget of `budget` hedges per request (0.05: at most 5% more
    /// requests), starting empty.
    pub fn new(budget: f64) -> Self {
        HedgeBudget {
            budget,
            tokens: 0.0,
            sent: 0,
            denied: 0,
        }
    }

    /// One request was made: it earns `budget` tokens.
    pub fn on_request(&mut self) {
        self.tokens = (self.tokens + self.budget).min(BURST);
    }

    /// Asks to hedge once: true (and a token spent) when the budget allows.
    pub fn try_hedge(&mut self) -> bool {
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            self.sent += 1;
            true
        } else {
            self.denied += 1;
            false
        }
    }

    /// Hedges sent so far.
    pub fn sent(&self) -> u64 {
        self.sent
    }

    /// Hedges refused by the budget so far.
    pub fn denied(&self) -> u64 {
        self.denied
    }
}

/// Samples kept per quantile tracker.
const SAMPLES: usize = 1024;

/// How often the quantiles are recomputed at most.
const RECOMPUTE: Duration = Duration::from_millis(100);

/// Recent latencies of one operation across peers, and quantiles of them
/// (recomputed at most every 100 ms: sorting 1024 samples costs a few
/// microseconds, not per request).
#[derive(Clone, Debug, Default)]
pub struct LatencyQuantiles {
    samples: VecDeque<f64>,
    /// Sorted copy of `samples` as of `at`.
    sorted: Vec<f64>,
    at: Option<Instant>,
}

impl LatencyQuantiles {
    /// Folds in one latency, microseconds.
    pub fn record(&mut self, us: f64) {
        if self.samples.len() == SAMPLES {
            self.samples.pop_front();
        }
        self.samples.push_back(us);
    }

    /// The `q` quantile (0 < q < 1) of the recent samples, microseconds;
    /// `None` before 20 samples.
    pub fn quantile(&mut self, q: f64, now: Instant) -> Option<f64> {
        if self.samples.len() < 20 {
            return None;
        }
        if self.at.is_none_or(|at| now.duration_since(at) >= RECOMPUTE) {
            self.sorted = self.samples.iter().copied().collect();
            self.sorted.sort_by(f64::total_cmp);
            self.at = Some(now);
        }
        let last = self.sorted.len().checked_sub(1)?;
        let index = ((last as f64) * q).round() as usize;
        self.sorted.get(index.min(last)).copied()
    }

    /// Forgets every sample.
    pub fn clear(&mut self) {
        *self = LatencyQuantiles::default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_budget_allows_its_share_of_requests_and_no_more() {
        let mut b = HedgeBudget::new(0.05);
        let mut hedged = 0;
        for _ in 0..1000 {
            b.on_request();
            if b.try_hedge() {
                hedged += 1;
            }
        }
        assert_eq!(hedged, 50);
        assert_eq!(b.sent(), 50);
        assert_eq!(b.denied(), 950);
        // A quiet spell earns at most a short burst.
        let mut quiet = HedgeBudget::new(0.05);
        for _ in 0..100_000 {
            quiet.on_request();
        }
        let burst = (0..100).filter(|_| quiet.try_hedge()).count();
        assert_eq!(burst, 10);
    }

    #[test]
    fn quantiles_follow_the_recent_samples() {
        let mut q = LatencyQuantiles::default();
        let t0 = Instant::now();
        assert_eq!(q.quantile(0.95, t0), None);
        for i in 1..=100 {
            q.record(f64::from(i));
        }
        assert_eq!(q.quantile(0.95, t0), Some(95.0));
        assert_eq!(q.quantile(0.5, t0), Some(51.0));
        // New samples show once the sorted copy is 100 ms old.
        for _ in 0..100 {
            q.record(1000.0);
        }
        assert_eq!(q.quantile(0.95, t0), Some(95.0));
        assert_eq!(q.quantile(0.95, t0 + RECOMPUTE), Some(1000.0));
    }
}
