//! Recent failure rate of one peer: request and failure counts over the last
//! minute, in fixed buckets.
//!
//! Source: seed 000 section 2.4 (exclude a node whose failure rate over the
//! last minute exceeds 30%) and design.md, "The scoring model" (same rule;
//! availability = clamp(1 - 2 x recent failure rate)). Counting in buckets
//! (6 x 10 s by default) keeps memory constant: the window is the buckets
//! that *started* less than `buckets x width` ago, so its effective span is
//! between `(buckets - 1) x width` and `buckets x width` (50-60 s).

use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// One bucket's counts.
#[derive(Clone, Copy, Debug)]
struct Bucket {
    /// When the bucket's first request was recorded.
    start: Instant,
    /// Requests recorded in the bucket.
    requests: u64,
    /// Of which failed (error or timeout).
    failures: u64,
}

/// Bucketed request and failure counts over a sliding window.
#[derive(Clone, Debug)]
pub struct FailureWindow {
    /// Width of one bucket.
    width: Duration,
    /// Number of buckets in the window.
    buckets: usize,
    /// Oldest first; at most `buckets` entries.
    ring: VecDeque<Bucket>,
    /// When the last failure was recorded (a window without one needs no
    /// counting to know its failure rate is 0).
    last_failure: Option<Instant>,
}

impl FailureWindow {
    /// A window of `buckets` buckets of `width` each (at least one bucket of
    /// at least 1 ms).
    pub fn new(width: Duration, buckets: usize) -> Self {
        let buckets = buckets.max(1);
        FailureWindow {
            width: width.max(Duration::from_millis(1)),
            buckets,
            ring: VecDeque::with_capacity(buckets),
            last_failure: None,
        }
    }

    /// Records one request outcome at `now`.
    pub fn record(&mut self, failed: bool, now: Instant) {
        self.expire(now);
        let open = self.ring.back().is_some_and(|b| now < b.start + self.width);
        if !open {
            if self.ring.len() == self.buckets {
                self.ring.pop_front();
            }
            self.ring.push_back(Bucket {
                start: now,
                requests: 0,
                failures: 0,
            });
        }
        if let Some(b) = self.ring.back_mut() {
            b.requests += 1;
            b.failures += u64::from(failed);
        }
        if failed {
            self.last_failure = Some(now);
        }
    }

    /// Whether a failure may be in the window ending at `now`: false when
    /// none was recorded in the last `buckets x width` (O(1), no
    /// counting; true does not promise one, [`FailureWindow::counts`]
    /// tells).
    pub fn may_have_failures(&self, now: Instant) -> bool {
        let span = self.width * self.buckets as u32;
        self.last_failure
            .is_some_and(|at| now.saturating_duration_since(at) < span)
    }

    /// `(requests, failures)` in the window ending at `now`.
    pub fn counts(&self, now: Instant) -> (u64, u64) {
        let span = self.width * self.buckets as u32;
        self.ring
            .iter()
            .filter(|b| now.saturating_duration_since(b.start) < span)
            .fold((0, 0), |(r, f), b| (r + b.requests, f + b.failures))
    }

    /// Failures / requests in the window ending at `now` (0.0 with no
    /// requests).
    pub fn rate(&self, now: Instant) -> f64 {
        match self.counts(now) {
            (0, _) => 0.0,
            (r, f) => f as f64 / r as f64,
        }
    }

    fn expire(&mut self, now: Instant) {
        let span = self.width * self.buckets as u32;
        while self
            .ring
            .front()
            .is_some_and(|b| now.saturating_duration_since(b.start) >= span)
        {
            self.ring.pop_front();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_expire_bucket_by_bucket() {
        let t0 = Instant::now();
        let s = Duration::from_secs;
        let mut w = FailureWindow::new(s(10), 6);
        for _ in 0..4 {
            w.record(true, t0);
        }
        for _ in 0..6 {
            w.record(false, t0 + s(25));
        }
        assert_eq!(w.counts(t0 + s(30)), (10, 4));
        assert!((w.rate(t0 + s(30)) - 0.4).abs() < 1e-9);
        // The first bucket started at t0 and leaves the window at t0 + 60 s.
        assert_eq!(w.counts(t0 + s(59)), (10, 4));
        assert_eq!(w.counts(t0 + s(60)), (6, 0));
        assert_eq!(w.counts(t0 + s(85)), (0, 0));
        assert_eq!(w.rate(t0 + s(85)), 0.0);
    }

    #[test]
    fn a_window_knows_without_counting_that_it_holds_no_failure() {
        let t0 = Instant::now();
        let s = Duration::from_secs;
        let mut w = FailureWindow::new(s(10), 6);
        w.record(false, t0);
        assert!(!w.may_have_failures(t0 + s(1)));
        w.record(true, t0 + s(5));
        assert!(w.may_have_failures(t0 + s(5)));
        assert!(w.may_have_failures(t0 + s(64)));
        assert_eq!(w.counts(t0 + s(64)), (0, 0));
        // 60 s after the failure, no bucket can still hold it.
        assert!(!w.may_have_failures(t0 + s(65)));
    }

    #[test]
    fn memory_stays_bounded() {
        let t0 = Instant::now();
        let mut w = FailureWindow::new(Duration::from_secs(10), 6);
        for i in 0..1000 {
            w.record(i % 2 == 0, t0 + Duration::from_secs(i));
        }
        assert!(w.ring.len() <= 6);
        let (r, _) = w.counts(t0 + Duration::from_secs(999));
        assert!((50..=60).contains(&r), "{r}");
    }
}
