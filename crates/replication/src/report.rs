//! This node's load report, every report period (1 s): CPU, replica
//! queue, flush backlog, cache hit ratio and hot keys, hints held per
//! owner, repair running. Announced through the membership for the other
//! coordinators' routers, and kept as the local candidate's own (fresh)
//! report. The hot-key counts are halved after each report, so the list
//! follows the current load.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

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
}

impl Reporter {
    /// Sets the CPU use to report, 0.0 ..= 1.0 of the process's cores.
    pub fn set_cpu(&self, fraction: f64) {
        self.cpu
            .store(fraction.clamp(0.0, 1.0).to_bits(), Ordering::Relaxed);
    }

    /// This node's figures now.
    pub fn report(&self) -> LoadReport {
        let cache = self.replica.cache();
        let hot = self.scoring.settings().hot_keys;
        LoadReport {
            cpu: f64::from_bits(self.cpu.load(Ordering::Relaxed)),
            queue: u32::try_from(self.service.in_flight()).unwrap_or(u32::MAX),
            backlog: u32::try_from(self.replica.storage().backlog()).unwrap_or(u32::MAX),
            hit_ratio: cache.stats().hit_ratio(),
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
            }
        });
    }
}
