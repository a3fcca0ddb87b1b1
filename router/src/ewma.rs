//! Exponentially weighted moving average of latency samples.
//!
//! Source: seed 000 section 2.2 (`EWMA = a * sample + (1 - a) * EWMA`, a
//! about 0.2: "about 5 samples to follow a trend", one EWMA per operation
//! type) and design.md, "The scoring model" (alpha 0.2).

use std::time::Duration;

/// The smoothing factor of design.md, "The scoring model".
pub const DEFAULT_ALPHA: f64 = 0.2;

/// A latency EWMA in microseconds, with the number of samples folded in.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Ewma {
    /// Current average in microseconds; meaningless while `samples == 0`.
    value_us: f64,
    /// Samples folded in so far (saturating).
    samples: u64,
}

impl Ewma {
    /// An average with no samples.
    pub fn new() -> Self {
        Self::default()
    }

    /// Folds in one sample: the first sample is taken as is, later ones as
    /// `alpha * sample + (1 - alpha) * average`. `alpha` in (0, 1].
    pub fn record(&mut self, sample: Duration, alpha: f64) {
        let us = sample.as_secs_f64() * 1e6;
        self.value_us = if self.samples == 0 {
            us
        } else {
            alpha * us + (1.0 - alpha) * self.value_us
        };
        self.samples = self.samples.saturating_add(1);
    }

    /// The average in microseconds, `None` before the first sample.
    pub fn value_us(&self) -> Option<f64> {
        (self.samples > 0).then_some(self.value_us)
    }

    /// How many samples have been folded in.
    pub fn samples(&self) -> u64 {
        self.samples
    }

    /// Moves the average `fraction` of the way to `target_us` without
    /// counting a sample: an estimate with no new samples drifts toward
    /// the cluster mean (docs/design.md, "The scoring model"), so a peer
    /// that was slow is tried again rather than forgotten by a timer.
    pub fn drift_toward(&mut self, target_us: f64, fraction: f64) {
        if self.samples > 0 {
            self.value_us += fraction * (target_us - self.value_us);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn follows_the_formula() {
        let mut e = Ewma::new();
        assert_eq!(e.value_us(), None);
        e.record(Duration::from_micros(100), 0.2);
        assert_eq!(e.value_us(), Some(100.0));
        e.record(Duration::from_micros(200), 0.2);
        assert!((e.value_us().unwrap() - 120.0).abs() < 1e-9);
        assert_eq!(e.samples(), 2);
        // A step change is mostly followed after ~10 samples.
        for _ in 0..10 {
            e.record(Duration::from_micros(1000), 0.2);
        }
        assert!(e.value_us().unwrap() > 900.0);
    }

    #[test]
    fn drift_moves_toward_a_target_without_adding_samples() {
        let mut e = Ewma::new();
        e.drift_toward(500.0, 0.5);
        assert_eq!(e.value_us(), None);
        e.record(Duration::from_micros(1000), 0.2);
        e.drift_toward(500.0, 0.5);
        assert_eq!(e.value_us(), Some(750.0));
        assert_eq!(e.samples(), 1);
    }
}
