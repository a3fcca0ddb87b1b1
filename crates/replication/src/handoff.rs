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
//! and counted (anti-entropy repairs what they carried). A target whose
//! storage refuses a delivery (its disk is full) is left alone for a
//! growing delay (`backoff`): its hints wait, nothing is sent to it.
//!
//! A hint whose owner is this node itself marks a stray copy (see
//! [`crate::strays`]): once this node's view has caught up, it is dropped
//! if this node owns the key after all, and otherwise handed to the owners
//! and the local copy removed.
//!
//! **Ownership handoff** (Riak's): a node holds objects of partitions it
//! no longer replicates when the ring changed while it was down (a join
//! pulls only from live holders, so a down holder's copy, maybe the only
//! one of an acknowledged write, is not pulled; found by the simulation,
//! seed 7011). Once its view has caught up (the placement is stable, not
//! moving, for `stray_grace`) and the node is UP, each pass scans the
//! partitions it does not replicate, hands every object there to the key's
//! owners (live ones directly, dead ones through a hint kept here) and
//! removes the local copy if it did not change meanwhile. A clean scan is
//! not repeated until the ring changes. Nothing waits for this: joins and
//! drains complete without the down holder, which hands its data over
//! when it is back.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use kv_storage::{Hint, Storage};
use kv_types::{NodeId, NodeStatus, Object};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::{debug, info, warn};

use crate::backoff::Backoff;
use crate::network::{HintCopy, ReplaceIf, ScanRequest};
use crate::offload::offload;
use crate::periodic::spawn_every;
use crate::replica::Replica;
use crate::strays::Strays;
use crate::{Cluster, HandoffSettings, Peers};

/// Most hints read from storage per pass.
const BATCH: usize = 2000;

/// Objects read per page of an ownership handoff scan.
const FOREIGN_PAGE: u32 = 500;

/// Counters of the handoff loop, for metrics and tests.
#[derive(Debug, Default)]
pub struct HandoffStats {
    /// Hints delivered and deleted.
    pub delivered: AtomicU64,
    /// Hints dropped (too old, or refused because the hint store was full).
    pub dropped: AtomicU64,
    /// Objects of partitions this node no longer replicates handed to
    /// their owners and removed here (ownership handoff).
    pub foreign_handed: AtomicU64,
}

/// The handoff loop of one node.
pub struct Handoff {
    cluster: Arc<Cluster>,
    peers: Arc<Peers>,
    replica: Arc<Replica>,
    storage: Arc<dyn Storage>,
    settings: HandoffSettings,
    stats: Arc<HandoffStats>,
    strays: Arc<Strays>,
    /// Hints held per intended owner, as of the last pass (of its batch).
    per_owner: std::sync::Mutex<Vec<(NodeId, u64)>>,
    /// Targets whose storage refused a delivery (disk full), left alone
    /// for a while.
    backoff: Backoff,
    /// The placement version under which the last ownership handoff scan
    /// found nothing left to hand off (not repeated until it changes).
    foreign_clean: std::sync::Mutex<Option<u64>>,
}

impl Handoff {
    /// A handoff loop over the replica's hints.
    pub fn new(
        cluster: Arc<Cluster>,
        peers: Arc<Peers>,
        replica: Arc<Replica>,
        settings: HandoffSettings,
        stats: Arc<HandoffStats>,
        strays: Arc<Strays>,
    ) -> Self {
        Handoff {
            storage: replica.storage().clone(),
            cluster,
            peers,
            replica,
            settings,
            stats,
            strays,
            per_owner: std::sync::Mutex::new(Vec::new()),
            backoff: Backoff::default(),
            foreign_clean: std::sync::Mutex::new(None),
        }
    }

    /// Hints held per intended owner, as counted by the last pass (over at
    /// most one batch of 2000: a lower bound when more are held).
    pub fn per_owner(&self) -> Vec<(NodeId, u64)> {
        self.per_owner
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// The counters.
    pub fn stats(&self) -> &Arc<HandoffStats> {
        &self.stats
    }

    /// Runs passes until `stop`.
    pub fn spawn(self: Arc<Self>, tasks: &TaskTracker, stop: CancellationToken) {
        let interval = self.settings.interval;
        let token = stop.clone();
        spawn_every(tasks, stop, interval, None, move || {
            let (this, stop) = (self.clone(), token.clone());
            async move { this.pass(&stop).await }
        });
    }

    /// One pass: (a batch of) the hints, then the ownership handoff.
    pub async fn pass(&self, stop: &CancellationToken) {
        self.deliver_hints(stop).await;
        if !stop.is_cancelled() {
            self.hand_off_foreign(stop).await;
        }
    }

    /// Delivers (a batch of) the hints.
    async fn deliver_hints(&self, stop: &CancellationToken) {
        let storage = self.storage.clone();
        let batch = offload(move || {
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
        let mut counts: std::collections::BTreeMap<NodeId, u64> = Default::default();
        for hint in &batch {
            *counts.entry(hint.owner.clone()).or_default() += 1;
        }
        *self.per_owner.lock().unwrap_or_else(|p| p.into_inner()) = counts.into_iter().collect();
        if batch.is_empty() {
            return;
        }
        let pace = Duration::from_secs(1) / self.settings.rate_per_sec.max(1);
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
        let age_ms = self
            .cluster
            .clock()
            .wall_ms()
            .saturating_sub(hint.created_at_ms);
        if Duration::from_millis(age_ms) > self.settings.max_age {
            warn!(
                owner = %hint.owner,
                age_s = age_ms / 1000,
                "dropping a hint older than the maximum age; anti-entropy will repair the key"
            );
            self.stats.dropped.fetch_add(1, Ordering::Relaxed);
            self.remove(hint).await;
            return true;
        }
        let me = self.cluster.id().clone();
        if hint.owner == me {
            return self.settle_stray(hint).await;
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
        if !self.send_to(&targets, hint, &hint.object).await {
            return false;
        }
        if self.remove(hint).await {
            self.stats.delivered.fetch_add(1, Ordering::Relaxed);
        }
        true
    }

    /// The hint of a stray copy (this node is its owner): dropped when
    /// this node owns the key after all, else, once the view has caught
    /// up, handed to the owners with whatever this node holds for the key,
    /// and the local copy removed.
    async fn settle_stray(&self, hint: &Hint) -> bool {
        let placement = self.cluster.placement();
        let me = self.cluster.id().clone();
        if placement.owns(&me, &hint.key) {
            self.strays.forget(&hint.key);
            return self.remove(hint).await;
        }
        let ready = self.strays.ready(
            &hint.key,
            placement.version(),
            self.cluster.clock().now(),
            self.settings.stray_grace,
            self.cluster.stable_for(),
        );
        if !ready {
            return false;
        }
        // A corrupt or missing local copy leaves the hint's object alone.
        let local = self.replica.get(&hint.key).await.ok().flatten();
        let merged = match &local {
            Some(l) => l.sync(&hint.object),
            None => hint.object.clone(),
        };
        let (_, replicas) = placement.key_replicas(&hint.key);
        if !self.an_owner_is_alive(&replicas.all())
            || !self.send_to(&replicas.all(), hint, &merged).await
        {
            return false;
        }
        if let Some(local) = local {
            let request = ReplaceIf {
                key: hint.key.clone(),
                expected: local,
                replacement: None,
            };
            // Changed since it was read: a newer stray copy, whose own
            // hint will hand it off.
            let _ = self.replica.replace_if(request).await;
        }
        info!(key = %hint.key.escape_ascii(), "stray copy handed to the key's owners");
        self.strays.forget(&hint.key);
        self.remove(hint).await
    }

    /// Whether one of `owners` other than this node is alive: a local copy
    /// is removed only once an owner took it directly (`send_to` succeeds
    /// only when every live owner did), never when hints kept here would
    /// be its only copy (they expire after `max_age`).
    fn an_owner_is_alive(&self, owners: &[NodeId]) -> bool {
        let me = self.cluster.id();
        owners.iter().any(|n| n != me && self.cluster.is_alive(n))
    }

    /// Sends `object` (a hint's, or a merge of it) to each target: live
    /// ones directly; dead ones through a hint kept here (re-targeting),
    /// or, while this node drains, handed to a node that stays.
    async fn send_to(&self, targets: &[NodeId], hint: &Hint, object: &Object) -> bool {
        let me = self.cluster.id().clone();
        let draining = self.cluster.status() == NodeStatus::Draining;
        for target in targets {
            let ok = if *target != me && !self.cluster.is_alive(target) {
                if draining {
                    self.pass_on(target, hint, object).await
                } else {
                    // Keep the original age: hints are bounded by it, and
                    // clock compaction relies on that bound.
                    let (storage, target, key, object, created) = (
                        self.storage.clone(),
                        target.clone(),
                        hint.key.clone(),
                        object.clone(),
                        hint.created_at_ms,
                    );
                    matches!(
                        offload(move || storage.put_hint(&target, &key, &object, created)).await,
                        Ok(Ok(()))
                    )
                }
            } else if !self.backoff.ready(target, self.cluster.clock().now()) {
                // Its storage refused the last delivery (disk full): the
                // hint waits, nothing is sent.
                false
            } else {
                let id = self.peers.fresh_id();
                let result = self
                    .peers
                    .replicate(target, id, &hint.key, object, self.settings.timeout)
                    .await;
                self.backoff
                    .note(target, self.cluster.clock().now(), &result);
                match result {
                    Ok(()) => true,
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
        true
    }

    /// Ownership handoff (see the module): once this UP node's view has
    /// been stable for `stray_grace` and nothing moves, hands whatever it
    /// holds of partitions it does not replicate to their owners.
    async fn hand_off_foreign(&self, stop: &CancellationToken) {
        if self.cluster.status() != NodeStatus::Up {
            return;
        }
        let placement = self.cluster.placement();
        if placement.is_moving() || self.cluster.stable_for() < self.settings.stray_grace {
            return;
        }
        let version = placement.version();
        if *self.foreign_clean.lock().unwrap_or_else(|p| p.into_inner()) == Some(version) {
            return;
        }
        let me = self.cluster.id().clone();
        let pace = Duration::from_secs(1) / self.settings.rate_per_sec.max(1);
        let mut clean = true;
        for p in 0..placement.target.partitions() {
            if placement.replicas(p).all().contains(&me) {
                continue;
            }
            let (from_hash, to_hash) = placement.target.partition_range(p);
            let mut after: Option<Vec<u8>> = None;
            loop {
                if stop.is_cancelled() || self.cluster.placement().version() != version {
                    return;
                }
                let request = ScanRequest {
                    from_hash,
                    to_hash,
                    after: after.clone(),
                    limit: FOREIGN_PAGE,
                };
                let Ok(page) = self.replica.scan(request).await else {
                    clean = false;
                    break;
                };
                after = page.objects.last().map(|(k, _)| k.clone());
                for (key, object) in page.objects {
                    if self.hand_off_object(&placement, &key, object).await {
                        tokio::time::sleep(pace).await;
                    } else {
                        clean = false;
                    }
                }
                if !page.more || after.is_none() {
                    break;
                }
            }
        }
        if clean {
            *self.foreign_clean.lock().unwrap_or_else(|p| p.into_inner()) = Some(version);
        }
    }

    /// Hands one object of a partition this node does not replicate to
    /// the key's owners, then removes the local copy unless it changed
    /// meanwhile (a newer copy is handed off by the next scan); true when
    /// both were done.
    async fn hand_off_object(
        &self,
        placement: &crate::Placement,
        key: &[u8],
        object: Object,
    ) -> bool {
        let me = self.cluster.id().clone();
        let (_, replicas) = placement.key_replicas(key);
        // Dated now: a hint kept here for an owner that is down lives the
        // full `max_age` from this handoff.
        let carrier = Hint {
            owner: me,
            key: key.to_vec(),
            object: object.clone(),
            created_at_ms: self.cluster.clock().wall_ms(),
        };
        if !self.an_owner_is_alive(&replicas.all())
            || !self.send_to(&replicas.all(), &carrier, &object).await
        {
            return false;
        }
        let request = ReplaceIf {
            key: key.to_vec(),
            expected: object,
            replacement: None,
        };
        match self.replica.replace_if(request).await {
            Ok(true) => {
                self.stats.foreign_handed.fetch_add(1, Ordering::Relaxed);
                debug!(key = %key.escape_ascii(), "ownership handoff: copy handed to the key's owners");
                true
            }
            _ => false,
        }
    }

    /// Gives a hint for `owner` to another live node that is not leaving.
    async fn pass_on(&self, owner: &NodeId, hint: &Hint, object: &Object) -> bool {
        let me = self.cluster.id().clone();
        let view = self.cluster.view();
        let Some(keeper) = view.live_owners(&[&me, owner]).next().cloned() else {
            return false;
        };
        // The hint keeps its age, measured on this node's clock (the
        // keeper adds its own): hints are bounded by it, and the tombstone
        // purge and clock compaction rely on that bound.
        let copy = HintCopy {
            owner: owner.clone(),
            key: hint.key.clone(),
            object: object.clone(),
            age_ms: self
                .cluster
                .clock()
                .wall_ms()
                .saturating_sub(hint.created_at_ms),
        };
        let id = self.peers.fresh_id();
        let passed = self
            .peers
            .store_hint(&keeper, id, copy, self.settings.timeout)
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
            offload(move || storage.remove_hint_if(&owner, &key, &object)).await,
            Ok(Ok(true))
        )
    }
}
