//! Periodic upkeep, once per report period (and the snitch's at its own
//! interval): run lazily from [`Scorer::snapshot`].

use std::time::Instant;

use super::{HISTORY, Scorer};
use crate::scorer::Op;

impl Scorer {
    /// Runs what is due at `now`.
    pub(crate) fn upkeep(&mut self, now: Instant) {
        self.snitch_upkeep(now);
        let period = self.settings.report_period;
        if self
            .period_at
            .is_some_and(|at| now.saturating_duration_since(at) < period)
        {
            return;
        }
        self.period_at = Some(now);
        let means = [self.cluster_mean_us(Op::Get), self.cluster_mean_us(Op::Put)];
        let (drift, error_rate, band) = (
            self.settings.latency_drift,
            self.settings.penalties.error_rate,
            self.settings.decline_band,
        );
        let settle = self.settings.cooldown_hold + self.settings.cooldown_ramp;
        let outlier_periods = self.settings.outlier_periods;
        // This period's outlier: of the remote peers with at least
        // `outlier_share` of their requests slow (over their operation's
        // bar, see `OutlierTally`), the one with the largest share (then
        // the slowest request); judged against the bars its answers were
        // (before this period's drift), then new bars for the next period.
        // A peer in its slow start is not judged: it came back with a cold
        // cache, so its first answers are slow by design, and the ramp
        // already caps its share; cooling it too kept a restarted node at
        // 3.5% of reads for 30 s and its cache cold (docs/benchmarks.md,
        // "latency outliers cool down").
        let bars = self.outlier_bar_us;
        let min_samples = self.settings.min_latency_samples;
        let local = self.local.clone();
        let share = self.settings.outlier_share;
        let worst = self
            .peers
            .iter()
            .filter(|(id, p)| **id != local && self.ramp(p, now) >= 1.0)
            .map(|(id, p)| (id, p.outlier_standing(bars, min_samples, now)))
            .filter(|(_, (slow, _))| *slow >= share)
            .max_by(|a, b| a.1.0.total_cmp(&b.1.0).then(a.1.1.total_cmp(&b.1.1)))
            .map(|(id, _)| id.clone());
        self.outlier_bar_us = [0, 1].map(|i| self.outlier_bar(i));
        // One outlier cool-down at a time (as Envoy's max ejection
        // percent): a noisy host's bursts move from peer to peer, and
        // cooling them all would flatten every rank.
        let mut ejected = self.peers.values().any(|p| {
            p.outlier_cooling
                && p.cooldown_since
                    .is_some_and(|since| now.saturating_duration_since(since) < settle)
        });
        for (id, p) in self.peers.iter_mut() {
            let outlier = worst.as_ref() == Some(id);
            p.outlier_history = (p.outlier_history << 1) | u8::from(outlier);
            p.outlier_tally = super::OutlierTally::default();
            // An estimate with no new samples drifts toward the cluster
            // mean: a peer that was slow gets tried again.
            for (i, mean) in means.iter().enumerate() {
                if let (false, Some(mean)) = (p.sampled[i], mean) {
                    p.latency[i].drift_toward(*mean, drift);
                }
                p.sampled[i] = false;
            }
            if let Some(score) = p.last_score {
                if p.history.len() == HISTORY {
                    p.history.pop_front();
                }
                p.history.push_back(score);
                p.baseline = super::snapshot::median(p.history.iter().copied());
                p.declining = super::snapshot::declining(&p.history, band);
            }
            // A replica that pauses again and again cools down as one with
            // errors does: its estimate is high most of the time, but a
            // few fast answers between pauses, or the drift, made it a
            // near-tie again, and each pause's first requests waited.
            let errors = p.window.rate(now) > error_rate;
            let outlying = outlier_periods > 0
                && p.outlier_history.count_ones() >= outlier_periods
                && !ejected;
            let settled = p
                .cooldown_since
                .is_none_or(|since| now.saturating_duration_since(since) >= settle);
            if settled {
                p.cooldown_since = (errors || outlying).then_some(now);
                p.outlier_cooling = outlying && !errors;
                ejected |= p.outlier_cooling;
            }
        }
    }

    /// `outlier_factor` times the median of the remote peers' latency
    /// estimates for the operation `op` (an [`super::op_index`]), in
    /// microseconds, of those of at least `min_latency_samples` answers;
    /// `None` with fewer than three (a median of two is their mean, and
    /// one of them the outlier).
    fn outlier_bar(&self, op: usize) -> Option<f64> {
        let estimates: Vec<f64> = self
            .peers
            .iter()
            .filter(|(id, _)| **id != self.local)
            .filter_map(|(_, p)| p.latency[op].settled_us(self.settings.min_latency_samples))
            .collect();
        if estimates.len() < 3 {
            return None;
        }
        super::snapshot::median(estimates).map(|m| self.settings.outlier_factor * m)
    }

    /// The dynamic snitch: every interval, each peer's score is its median
    /// latency over its window divided by the worst peer's; every reset
    /// interval the samples are wiped (Cassandra's behaviour, flaw
    /// included: CASSANDRA-14459).
    fn snitch_upkeep(&mut self, now: Instant) {
        let s = &self.settings;
        if self
            .snitch_reset_at
            .is_none_or(|at| now.saturating_duration_since(at) >= s.snitch_reset)
        {
            if self.snitch_reset_at.is_some() {
                for p in self.peers.values_mut() {
                    p.snitch_samples.clear();
                    p.snitch = None;
                }
            }
            self.snitch_reset_at = Some(now);
        }
        if self
            .snitch_at
            .is_some_and(|at| now.saturating_duration_since(at) < s.snitch_interval)
        {
            return;
        }
        self.snitch_at = Some(now);
        let medians: Vec<(kv_types::NodeId, f64)> = self
            .peers
            .iter()
            .filter_map(|(id, p)| {
                let mut v: Vec<f64> = p.snitch_samples.iter().copied().collect();
                if v.is_empty() {
                    return None;
                }
                v.sort_by(f64::total_cmp);
                Some((id.clone(), v[v.len() / 2]))
            })
            .collect();
        let worst = medians.iter().map(|(_, m)| *m).fold(0.0, f64::max);
        for (id, m) in medians {
            if let Some(p) = self.peers.get_mut(&id) {
                p.snitch = Some(if worst > 0.0 { m / worst } else { 0.0 });
            }
        }
    }
}
