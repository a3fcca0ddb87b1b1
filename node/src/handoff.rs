//! Hinted handoff: delivering the writes this node holds for replicas that
//! were down (Dynamo section 4.6).
//!
//! Every period the node walks its hints. A hint is delivered to the node
//! that owns its key's range *now*: its intended owner when that node is
//! still in the key's preference list (and alive), otherwise every current
//! member of the preference list (live ones directly, dead ones as a new
//! hint kept here), so a ring change re-targets hints instead of dropping
//! them and nothing is ever sent to a node that left. A hint is deleted only
//! once every target acknowledged it durably, and only if it did not change
//! meanwhile. Deliveries are paced (`rate_per_sec`) so handoff never starves
//! foreground traffic. Hints older than `max_age` are dropped with a warning
//! and counted (anti-entropy repairs what they carried).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use kv_storage::{Hint, Storage};
use kv_types::{NodeId, NodeStatus};
use kv_wire::PeerRequest;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::{debug, info, warn};

use crate::cluster::Cluster;
use crate::coordinator::now_ms;
use crate::peers::Peers;

/// Most hints read from storage per pass.
const BATCH: usize = 2000;

/// Handoff settings (config section `[handoff]`).
#[derive(Clone, Debug)]
pub struct HandoffConfig {
    /// Time between passes over the hints.
    pub interval: Duration,
    /// Deliveries per second at most.
    pub rate_per_sec: u32,
    /// Hints older than this are dropped (and counted).
    pub max_age: Duration,
    /// Deadline of one delivery.
    pub timeout: Duration,
}

/// Counters of the handoff loop, for metrics and tests.
#[derive(Debug, Default)]
pub struct HandoffStats {
    /// Hints delivered and deleted.
    pub delivered: AtomicU64,
    /// Hints dropped (too old, or refused because the hint store was full).
    pub dropped: AtomicU64,
}

/// The handoff loop of one node.
pub struct Handoff {
    cluster: Arc<Cluster>,
    peers: Arc<Peers>,
    storage: Arc<dyn Storage>,
    config: HandoffConfig,
    /// Shared with the replica, which counts hints refused when full.
    pub stats: Arc<HandoffStats>,
}

impl Handoff {
    /// A handoff loop over `storage`'s hints.
    pub fn new(
        cluster: Arc<Cluster>,
        peers: Arc<Peers>,
        storage: Arc<dyn Storage>,
        config: HandoffConfig,
        stats: Arc<HandoffStats>,
    ) -> Self {
        Handoff {
            cluster,
            peers,
            storage,
            config,
            stats,
        }
    }

    /// Runs passes until `stop`.
    pub fn spawn(self: Arc<Self>, tasks: &TaskTracker, stop: CancellationToken) {
        tasks.spawn(async move {
            let mut tick = tokio::time::interval(self.config.interval);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    _ = stop.cancelled() => break,
                    _ = tick.tick() => {}
                }
                self.pass(&stop).await;
            }
        });
    }

    /// One pass over (a batch of) the hints.
    pub async fn pass(&self, stop: &CancellationToken) {
        let storage = self.storage.clone();
        let batch = tokio::task::spawn_blocking(move || {
            storage
                .hints()
                .filter_map(|h| match h {
                    Ok(h) => Some(h),
                    Err(e) => {
                        warn!(error = %e, "unreadable hint skipped");
                        None
                    }
                })
                .take(BATCH)
                .collect::<Vec<Hint>>()
        })
        .await
        .unwrap_or_default();
        if batch.is_empty() {
            return;
        }
        let pace = Duration::from_secs(1) / self.config.rate_per_sec.max(1);
        let mut delivered = 0usize;
        for hint in batch {
            if stop.is_cancelled() {
                break;
            }
            if self.deliver(&hint).await {
                delivered += 1;
                tokio::time::sleep(pace).await;
            }
        }
        if delivered > 0 {
            info!(
                delivered,
                left = self.storage.hint_count(),
                "hinted handoff pass"
            );
        }
    }

    /// Delivers one hint; true when it was handled (delivered or dropped).
    async fn deliver(&self, hint: &Hint) -> bool {
        let age_ms = now_ms().saturating_sub(hint.created_at_ms);
        if Duration::from_millis(age_ms) > self.config.max_age {
            warn!(
                owner = %hint.owner,
                age_s = age_ms / 1000,
                "dropping a hint older than the maximum age; anti-entropy will repair the key"
            );
            self.stats.dropped.fetch_add(1, Ordering::Relaxed);
            self.remove(hint).await;
            return true;
        }
        // Whoever owns the key's range now: current holders and pending new
        // owners (never a node that left: neither ring has it).
        let (_, replicas) = self.cluster.placement().key_replicas(&hint.key);
        let preference = replicas.all();
        let draining = self.cluster.status() == NodeStatus::Draining;
        let targets: Vec<NodeId> = if preference.contains(&hint.owner) {
            if !self.cluster.is_alive(&hint.owner) && !draining {
                return false;
            }
            vec![hint.owner.clone()]
        } else {
            preference
        };
        let me = &self.cluster.me().id;
        for target in &targets {
            let ok = if target != me && !self.cluster.is_alive(target) {
                if draining {
                    // This node is leaving: hand the hint to a live node
                    // that stays, to deliver when the owner is back.
                    self.pass_on(target, hint).await
                } else {
                    // Re-target: keep it here as a hint for the new owner.
                    let (storage, target, key, object) = (
                        self.storage.clone(),
                        target.clone(),
                        hint.key.clone(),
                        hint.object.clone(),
                    );
                    // Keep the original age: hints are bounded by it, and
                    // clock compaction relies on that bound.
                    let created = hint.created_at_ms;
                    matches!(
                        tokio::task::spawn_blocking(
                            move || storage.put_hint(&target, &key, &object, created)
                        )
                        .await,
                        Ok(Ok(()))
                    )
                }
            } else {
                let request = PeerRequest::Replicate {
                    key: hint.key.clone(),
                    object: hint.object.clone(),
                };
                match self
                    .peers
                    .call(target, rand::random(), request, self.config.timeout)
                    .await
                {
                    Ok(_) => true,
                    Err(e) => {
                        debug!(owner = %hint.owner, %target, error = %e, "hint delivery failed");
                        false
                    }
                }
            };
            if !ok {
                return false;
            }
        }
        if self.remove(hint).await {
            self.stats.delivered.fetch_add(1, Ordering::Relaxed);
        }
        true
    }

    /// Gives a hint for `owner` to another live node that is not leaving.
    async fn pass_on(&self, owner: &NodeId, hint: &Hint) -> bool {
        let me = &self.cluster.me().id;
        let view = self.cluster.view();
        let Some(keeper) = view
            .members
            .iter()
            .find(|(id, m)| {
                *id != me
                    && *id != owner
                    && m.alive
                    && matches!(m.info.status, NodeStatus::Up | NodeStatus::Joining)
            })
            .map(|(id, _)| id.clone())
        else {
            return false;
        };
        // The hint keeps its age: hints are bounded by it, and the
        // tombstone purge and clock compaction rely on that bound.
        let request = PeerRequest::StoreHint {
            owner: owner.to_string(),
            key: hint.key.clone(),
            object: hint.object.clone(),
            created_at_ms: hint.created_at_ms,
        };
        let passed = self
            .peers
            .call(&keeper, rand::random(), request, self.config.timeout)
            .await
            .is_ok();
        if passed {
            info!(%owner, %keeper, "draining: hint passed on");
        }
        passed
    }

    async fn remove(&self, hint: &Hint) -> bool {
        let (storage, owner, key, object) = (
            self.storage.clone(),
            hint.owner.clone(),
            hint.key.clone(),
            hint.object.clone(),
        );
        matches!(
            tokio::task::spawn_blocking(move || storage.remove_hint_if(&owner, &key, &object))
                .await,
            Ok(Ok(true))
        )
    }
}
