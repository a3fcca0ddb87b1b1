//! The router's scorer behind a lock, fed with what this node observes, and
//! the order in which a coordinator contacts a key's replicas.

use std::sync::{Arc, Mutex};

use kv_router::{Candidate, ExcludeReason, Op, Outcome, Ranked, Scorer, ScorerSettings};
use kv_types::NodeId;

use crate::{Clock, Cluster, Error, Result};

/// Shared scorer state of this node.
pub struct Scoring {
    scorer: Mutex<Scorer>,
    local: NodeId,
    clock: Arc<Clock>,
}

impl Scoring {
    /// A scorer with `config` for coordinator `local`.
    ///
    /// # Errors
    /// A refusal naming the bad setting when `config` is invalid.
    pub fn new(config: ScorerSettings, local: NodeId, clock: Arc<Clock>) -> Result<Self> {
        let scorer = Scorer::new(config, local.clone())
            .map_err(|e| Error::invalid(format!("router settings: {e}")))?;
        Ok(Scoring {
            scorer: Mutex::new(scorer),
            local,
            clock,
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Scorer> {
        self.scorer.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Folds in the outcome of one request to `peer`.
    pub fn record(&self, peer: &NodeId, op: Op, outcome: Outcome) {
        let now = self.clock.now().into_std();
        self.lock().record(peer, op, outcome, now);
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
        let now = self.clock.now().into_std();
        self.lock().rank(&candidates, op, now)
    }

    /// The replicas to contact, best first: those that pass the hard filter
    /// in score order, then those the breaker or failure rate excluded (a
    /// last resort). Dead nodes are left out: contacting them only waits for
    /// a timeout.
    pub fn order(&self, cluster: &Cluster, preference: &[NodeId], op: Op) -> Vec<NodeId> {
        let ranked = self.rank(cluster, preference, op);
        let now = self.clock.now().into_std();
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
