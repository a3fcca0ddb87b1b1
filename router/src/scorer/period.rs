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
        for p in self.peers.values_mut() {
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
                p.baseline = super::snapshot::median(&p.history);
                p.declining = super::snapshot::declining(&p.history, band);
            }
            let rate = p.window.rate(now);
            match p.cooldown_since {
                None if rate > error_rate => p.cooldown_since = Some(now),
                Some(since) if now.saturating_duration_since(since) >= settle => {
                    p.cooldown_since = (rate > error_rate).then_some(now);
                }
                _ => {}
            }
        }
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
