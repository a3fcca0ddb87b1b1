//! A per-peer circuit breaker: closed, open, half-open.
//!
//! Source: design.md, "The scoring model" (open after 5 consecutive timeouts or
//! errors; half-open probe later) and seed 000 section 2.4; the state
//! machine is the classic one of Nygard, "Release It!" (2007), ch. 5:
//!
//! - **Closed**: requests flow; each timeout or error increments a counter
//!   that any success resets; at `threshold` consecutive failures the
//!   breaker opens.
//! - **Open**: no requests for `cooldown` (default 5 s). Outcomes of requests
//!   sent before it opened are ignored.
//! - **Half-open**: after the cool-down exactly one probe request may go:
//!   [`Breaker::try_acquire`] grants it once. Its success closes the
//!   breaker, its failure re-opens it for another cool-down. If the probe's
//!   outcome never arrives, the grant lapses after one more cool-down and
//!   another probe may go (a lost probe must not wedge the peer forever).

use std::time::{Duration, Instant};

/// Consecutive failures that open a breaker (design.md, "The scoring model").
pub const DEFAULT_THRESHOLD: u32 = 5;
/// How long an open breaker refuses requests before a probe (5 s).
pub const DEFAULT_COOLDOWN: Duration = Duration::from_secs(5);

/// What a breaker allows at some instant.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BreakerState {
    /// Requests flow.
    Closed,
    /// No requests until `until`.
    Open {
        /// End of the cool-down.
        until: Instant,
    },
    /// One probe may go (`probe_in_flight == false`) or has gone.
    HalfOpen {
        /// Whether the one probe has been granted and not yet answered.
        probe_in_flight: bool,
    },
}

/// One peer's breaker. Time is passed in; the breaker never reads a clock.
#[derive(Clone, Debug)]
pub struct Breaker {
    /// Failures that open the breaker.
    threshold: u32,
    /// Length of the open state.
    cooldown: Duration,
    /// Timeouts and errors since the last success.
    consecutive_failures: u32,
    /// When the breaker last opened; `None` while closed.
    opened_at: Option<Instant>,
    /// When the half-open probe was granted, if it was.
    probe_granted_at: Option<Instant>,
}

impl Breaker {
    /// A closed breaker.
    pub fn new(threshold: u32, cooldown: Duration) -> Self {
        Breaker {
            threshold: threshold.max(1),
            cooldown,
            consecutive_failures: 0,
            opened_at: None,
            probe_granted_at: None,
        }
    }

    /// The state at `now`.
    pub fn state(&self, now: Instant) -> BreakerState {
        let Some(opened) = self.opened_at else {
            return BreakerState::Closed;
        };
        let until = opened + self.cooldown;
        if now < until {
            return BreakerState::Open { until };
        }
        BreakerState::HalfOpen {
            probe_in_flight: self
                .probe_granted_at
                .is_some_and(|g| now < g + self.cooldown),
        }
    }

    /// Timeouts and errors since the last success.
    pub fn consecutive_failures(&self) -> u32 {
        self.consecutive_failures
    }

    /// Whether a request may be sent at `now`: always when closed, never
    /// when open, and exactly once per half-open period (this call takes the
    /// probe).
    pub fn try_acquire(&mut self, now: Instant) -> bool {
        match self.state(now) {
            BreakerState::Closed => true,
            BreakerState::Open { .. } => false,
            BreakerState::HalfOpen {
                probe_in_flight: true,
            } => false,
            BreakerState::HalfOpen {
                probe_in_flight: false,
            } => {
                self.probe_granted_at = Some(now);
                true
            }
        }
    }

    /// Records a success at `now`.
    pub fn on_success(&mut self, now: Instant) {
        match self.state(now) {
            BreakerState::Open { .. } => {}
            BreakerState::Closed | BreakerState::HalfOpen { .. } => {
                self.consecutive_failures = 0;
                self.opened_at = None;
                self.probe_granted_at = None;
            }
        }
    }

    /// Records a timeout or error at `now`.
    pub fn on_failure(&mut self, now: Instant) {
        match self.state(now) {
            BreakerState::Open { .. } => {}
            BreakerState::Closed => {
                self.consecutive_failures = self.consecutive_failures.saturating_add(1);
                if self.consecutive_failures >= self.threshold {
                    self.opened_at = Some(now);
                }
            }
            BreakerState::HalfOpen { .. } => {
                self.consecutive_failures = self.consecutive_failures.saturating_add(1);
                self.opened_at = Some(now);
                self.probe_granted_at = None;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn opens_after_threshold_and_a_success_resets_the_count() {
        let t0 = Instant::now();
        let mut b = Breaker::new(5, Duration::from_secs(5));
        for _ in 0..4 {
            b.on_failure(t0);
        }
        b.on_success(t0);
        for _ in 0..4 {
            b.on_failure(t0);
        }
        assert_eq!(b.state(t0), BreakerState::Closed);
        b.on_failure(t0);
        assert_eq!(
            b.state(t0),
            BreakerState::Open {
                until: t0 + Duration::from_secs(5)
            }
        );
        assert!(!b.try_acquire(t0));
    }

    #[test]
    fn half_open_lets_one_probe_through() {
        let t0 = Instant::now();
        let s = Duration::from_secs;
        let mut b = Breaker::new(1, s(5));
        b.on_failure(t0);
        // A straggler's success while open changes nothing.
        b.on_success(t0 + s(1));
        assert!(matches!(b.state(t0 + s(1)), BreakerState::Open { .. }));
        let t = t0 + s(5);
        assert!(b.try_acquire(t));
        assert!(!b.try_acquire(t));
        assert!(!b.try_acquire(t + s(1)));
        // The probe fails: open again for a full cool-down.
        b.on_failure(t + s(1));
        assert!(matches!(b.state(t + s(5)), BreakerState::Open { .. }));
        assert!(b.try_acquire(t + s(6)));
        b.on_success(t + s(6));
        assert_eq!(b.state(t + s(6)), BreakerState::Closed);
        assert!(b.try_acquire(t + s(6)));
    }

    #[test]
    fn a_lost_probe_lapses_after_a_cooldown() {
        let t0 = Instant::now();
        let s = Duration::from_secs;
        let mut b = Breaker::new(1, s(5));
        b.on_failure(t0);
        assert!(b.try_acquire(t0 + s(5)));
        assert!(!b.try_acquire(t0 + s(9)));
        assert!(b.try_acquire(t0 + s(10)));
    }
}
