//! The router's scorer behind a lock, fed with what this node observes, and
//! the order in which a coordinator contacts a key's replicas.

use std::sync::Mutex;
use std::time::Instant;

use kv_router::{Candidate, ExcludeReason, Op, Outcome, Ranked, Scorer, ScorerConfig};
use kv_types::NodeId;

use crate::cluster::Cluster;

/// Shared scorer state of this node.
pub struct Scoring {
    scorer: Mutex<Scorer>,
    local: NodeId,
}

impl Scoring {
    /// A scorer with the default model for coordinator `local`.
    ///
    /// # Errors
    /// Only if the default configuration is invalid (a bug).
    pub fn new(local: NodeId) -> anyhow::Result<Self> {
        Ok(Scoring {
            scorer: Mutex::new(Scorer::new(ScorerConfig::default(), local.clone())?),
            local,
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Scorer> {
        self.scorer.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Folds in the outcome of one request to `peer`.
    pub fn record(&self, peer: &NodeId, op: Op, outcome: Outcome) {
        self.lock().record(peer, op, outcome, Instant::now());
    }

    /// Scores the replicas of a key (`preference`, in ring order).
    pub fn rank(&self, cluster: &Cluster, preference: &[NodeId], op: Op) -> Vec<Ranked> {
        let candidates: Vec<Candidate> = preference
            .iter()
            .map(|id| Candidate {
                id: id.clone(),
                alive: cluster.is_alive(id),
                is_local: *id == self.local,
            })
            .collect();
        self.lock().rank(&candidates, op, Instant::now())
    }

    /// The replicas to contact, best first: those that pass the hard filter
    /// in score order, then those the breaker or failure rate excluded (a
    /// last resort). Dead nodes are left out: contacting them only waits for
    /// a timeout.
    pub fn order(&self, cluster: &Cluster, preference: &[NodeId], op: Op) -> Vec<NodeId> {
        let ranked = self.rank(cluster, preference, op);
        let now = Instant::now();
        let mut scorer = self.lock();
        let (mut first, mut last) = (Vec::new(), Vec::new());
        for r in ranked {
            match r.excluded {
                None if !r.needs_probe || scorer.try_acquire_probe(&r.id, now) => first.push(r.id),
                None => last.push(r.id),
                Some(ExcludeReason::Dead) => {}
                Some(_) => last.push(r.id),
            }
        }
        first.extend(last);
        first
    }
}
