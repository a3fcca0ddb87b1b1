//! This node's load report, every report period (1 s): CPU, replica
//! queue, flush backlog, cache hit ratio and hot keys, hints held per
//! owner, repair running. Announced through the membership for the other
//! coordinators' routers, and kept as the local candidate's own (fresh)
//! report. The hot-key counts are halved after each report, so the list
//! follows the current load, and so are the hit and miss counts behind
//! the reported hit ratio: it is the ratio of the last few periods, not
//! since start. A ratio since start climbed for minutes after a restart
//! with an empty cache, long after the cache was warm, and the router
//! kept such a node out of its fair share of reads for it
//! (docs/benchmarks.md, "Per-key ties").

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::membership::{Announcement, LoadReport};
use crate::periodic::spawn_every;
use crate::replica::Replica;
use crate::{AntiEntropy, Cluster, Handoff, PeerService, Scoring};

/// What the report is made from.
pub struct Reporter {
    pub(crate) cluster: Arc<Cluster>,
    pub(crate) replica: Arc<Replica>,
    pub(crate) service: Arc<PeerService>,
    pub(crate) handoff: Arc<Handoff>,
    pub(crate) anti_entropy: Arc<AntiEntropy>,
    pub(crate) scoring: Arc<Scoring>,
    /// The process's CPU use over the last period, 0.0 ..= 1.0 (f64
    /// bits), set by the node (which can read /proc).
    pub(crate) cpu: AtomicU64,
    /// The read cache's hits and misses of the last periods.
    pub(crate) hits: Mutex<HitWindow>,
}

/// Read-cache hits and misses with a half-life of one report period.
#[derive(Debug, Default)]
pub(crate) struct HitWindow {
    /// The cache's counters at the last period's end.
    hits_at: u64,
    misses_at: u64,
    /// Hits and misses before that, halved every period.
    hits: f64,
    misses: f64,
}

impl HitWindow {
    /// The hit ratio of the halved counts and of what came since the last
    /// period's end, given the cache's counters now; `None` before the
    /// first lookup.
    fn ratio(&self, hits: u64, misses: u64) -> Option<f64> {
        let h = self.hits + hits.saturating_sub(self.hits_at) as f64;
        let m = self.misses + misses.saturating_sub(self.misses_at) as f64;
        (h + m > 0.0).then(|| h / (h + m))
    }

    /// Ends a period at the cache's counters `hits` and `misses`.
    fn roll(&mut self, hits: u64, misses: u64) {
        self.hits = self.hits / 2.0 + hits.saturating_sub(self.hits_at) as f64;
        self.misses = self.misses / 2.0 + misses.saturating_sub(self.misses_at) as f64;
        (self.hits_at, self.misses_at) = (hits, misses);
    }
}

impl Reporter {
    /// Sets the CPU use to report, 0.0 ..= 1.0 of the process's cores.
    pub fn set_cpu(&self, fraction: f64) {
        self.cpu
            .store(fraction.clamp(0.0, 1.0).to_bits(), Ordering::Relaxed);
    }

    /// This node's figures now (the hit ratio of the last few periods).
    pub fn report(&self) -> LoadReport {
        let cache = self.replica.cache();
        let hot = self.scoring.settings().hot_keys;
        let stats = cache.stats();
        let recent = self
            .hits
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .ratio(stats.hits, stats.misses);
        LoadReport {
            cpu: f64::from_bits(self.cpu.load(Ordering::Relaxed)),
            queue: u32::try_from(self.service.in_flight()).unwrap_or(u32::MAX),
            backlog: u32::try_from(self.replica.storage().backlog()).unwrap_or(u32::MAX),
            hit_ratio: recent.unwrap_or_else(|| stats.hit_ratio()),
            hot_keys: cache.hot_keys(hot).into_iter().map(|(h, _)| h).collect(),
            hints: self.handoff.per_owner(),
            repair: self.anti_entropy.report().running,
        }
    }

    /// Reports every period until `stop`.
    pub fn spawn(self: Arc<Self>, tasks: &TaskTracker, stop: CancellationToken) {
        let period = self.scoring.settings().report_period;
        spawn_every(tasks, stop, period, None, move || {
            let this = self.clone();
            async move {
                let report = this.report();
                this.scoring.set_own_report(report.clone());
                this.cluster.announce(Announcement::Report(report)).await;
                this.replica.cache().decay_hot();
                let stats = this.replica.cache().stats();
                this.hits
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .roll(stats.hits, stats.misses);
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::HitWindow;

    #[test]
    fn the_hit_ratio_follows_the_last_periods_not_the_whole_life() {
        let mut w = HitWindow::default();
        assert_eq!(w.ratio(0, 0), None);
        // A cold start: 100 lookups, all misses.
        w.roll(0, 100);
        assert_eq!(w.ratio(0, 100), Some(0.0));
        // Then three periods at 90% hits.
        let (mut h, mut m) = (0, 100);
        for _ in 0..3 {
            (h, m) = (h + 900, m + 100);
            w.roll(h, m);
        }
        let r = w.ratio(h, m).unwrap();
        // Since start it would be 2700 / 3100 = 0.87; the window says 0.9
        // but for the first period's misses, halved three times.
        assert!(r > 0.89 && r < 0.9, "{r}");
        // What came since the last period's end counts at once.
        let r = w.ratio(h, m + 1000).unwrap();
        assert!(r < 0.7, "{r}");
    }
}
