//! Exponentially weighted moving average of latency samples.
//!
//! Source: seed 000 section 2.2 (`EWMA = a * sample + (1 - a) * EWMA`, a
//! about 0.2: "about 5 samples to follow a trend", one EWMA per operation
//! type) and design.md, "The scoring model" (alpha 0.2).
//!
//! The seed's five samples assume samples spread over time. At a few
//! thousand requests a second they are not: five answers of one peer
//! span about 3 ms here, shorter than one scheduler time slice of a
//! 2-core machine running six processes, so the average followed the
//! operating system's scheduling of that moment rather than the peer, and
//! ranks flipped from one request to the next (docs/benchmarks.md,
//! "Per-key ties"). So the average is the mean of the answers of the last
//! `window` (each answer weighted by `exp(-age / window)`), in which a
//! new answer weighs `1 / (weight of the window's answers + 1)`, and never
//! more than `alpha`: sparse answers (fewer than `1 / alpha - 1` per
//! window) keep the seed's formula. Every answer counts alike, however
//! close together they come: a peer that was frozen and then answers a
//! hundred queued requests at once moves the average by all hundred,
//! not by one.

use std::time::{Duration, Instant};

/// The smoothing factor of design.md, "The scoring model".
pub const DEFAULT_ALPHA: f64 = 0.2;

/// A latency EWMA in microseconds, with the number of samples folded in.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Ewma {
    /// Current average in microseconds; meaningless while `samples == 0`.
    value_us: f64,
    /// Samples folded in so far (saturating).
    samples: u64,
    /// When the last sample was folded in.
    at: Option<Instant>,
    /// The decayed count of the samples of the last window.
    weight: f64,
}

impl Ewma {
    /// An average with no samples.
    pub fn new() -> Self {
        Self::default()
    }

    /// Folds in one sample taken at `now`: the first sample is taken as
    /// is, later ones as `a * sample + (1 - a) * average` with
    /// `a = min(alpha, 1 / (w + 1))`, `w` the window's decayed count of
    /// earlier samples (module documentation). `alpha` in (0, 1]; a zero
    /// `window` leaves `a = alpha`.
    pub fn record(&mut self, sample: Duration, alpha: f64, window: Duration, now: Instant) {
        let us = sample.as_secs_f64() * 1e6;
        let decay = match self.at {
            Some(at) if !window.is_zero() => {
                let dt = now.saturating_duration_since(at).as_secs_f64();
                (-dt / window.as_secs_f64()).exp()
            }
            _ => 0.0,
        };
        let earlier = self.weight * decay;
        self.value_us = if self.samples == 0 {
            us
        } else {
            let a = alpha.min(1.0 / (earlier + 1.0));
            a * us + (1.0 - a) * self.value_us
        };
        self.weight = earlier + 1.0;
        self.at = Some(now);
        self.samples = self.samples.saturating_add(1);
    }

    /// The average in microseconds, `None` before the first sample.
    pub fn value_us(&self) -> Option<f64> {
        (self.samples > 0).then_some(self.value_us)
    }

    /// The average in microseconds once at least `min_samples` samples
    /// are folded in (`None` before): the estimate the scoring trusts
    /// (`min_latency_samples`; below it the cluster mean stands in).
    pub fn settled_us(&self, min_samples: u64) -> Option<f64> {
        self.value_us().filter(|_| self.samples >= min_samples)
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

    const WINDOW: Duration = Duration::from_millis(100);

    #[test]
    fn sparse_samples_follow_the_seeds_formula() {
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        let mut e = Ewma::new();
        assert_eq!(e.value_us(), None);
        e.record(Duration::from_micros(100), 0.2, WINDOW, at(0));
        assert_eq!(e.value_us(), Some(100.0));
        // 50 ms apart: 1 - exp(-0.5) = 0.39 > 0.2, so alpha holds.
        e.record(Duration::from_micros(200), 0.2, WINDOW, at(50));
        assert!((e.value_us().unwrap() - 120.0).abs() < 1e-9);
        assert_eq!(e.samples(), 2);
        // A step change is mostly followed after ~10 samples.
        for k in 0..10 {
            e.record(Duration::from_micros(1000), 0.2, WINDOW, at(100 + 50 * k));
        }
        assert!(e.value_us().unwrap() > 900.0);
    }

    #[test]
    fn dense_samples_are_averaged_over_the_window_not_over_five_samples() {
        let t0 = Instant::now();
        let ms = Duration::from_millis;
        let mut e = Ewma::new();
        // A peer answering in 1 ms, 1,000 times a second.
        for k in 0..100 {
            e.record(ms(1), 0.2, WINDOW, t0 + ms(k));
        }
        // Ten 5 ms answers in a row (a scheduler hiccup): the seed's alpha
        // alone would follow them to ~4.5 ms.
        let mut noisy = e;
        for k in 0..10 {
            noisy.record(
                ms(5),
                0.2,
                WINDOW,
                t0 + ms(100) + Duration::from_micros(100 * k),
            );
        }
        let v = noisy.value_us().unwrap();
        assert!(v > 1000.0 && v < 1700.0, "{v}");
        // Answers that come together count together: a peer frozen for
        // 50 ms answers its 50 queued requests at once.
        let mut frozen = e;
        for _ in 0..50 {
            frozen.record(ms(50), 0.2, WINDOW, t0 + ms(150));
        }
        let v = frozen.value_us().unwrap();
        assert!(v > 15_000.0, "{v}");
        // A lasting change is followed within a few windows.
        for k in 0..300 {
            e.record(ms(5), 0.2, WINDOW, t0 + ms(100 + k));
        }
        assert!(e.value_us().unwrap() > 4700.0);
        // A zero window is the plain per-sample formula.
        let mut plain = Ewma::new();
        plain.record(Duration::from_micros(100), 0.2, Duration::ZERO, t0);
        plain.record(Duration::from_micros(200), 0.2, Duration::ZERO, t0);
        assert!((plain.value_us().unwrap() - 120.0).abs() < 1e-9);
    }

    #[test]
    fn drift_moves_toward_a_target_without_adding_samples() {
        let mut e = Ewma::new();
        e.drift_toward(500.0, 0.5);
        assert_eq!(e.value_us(), None);
        e.record(Duration::from_micros(1000), 0.2, WINDOW, Instant::now());
        e.drift_toward(500.0, 0.5);
        assert_eq!(e.value_us(), Some(750.0));
        assert_eq!(e.samples(), 1);
    }
}
