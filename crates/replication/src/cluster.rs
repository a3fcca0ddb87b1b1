//! What this node knows about the cluster: the membership view (who
//! exists, where, alive or not), its own lifecycle status, and the
//! placement (two rings, see [`crate::placement`]) computed from them.
//!
//! The rings' input is every node that has not LEFT: live or dead does not
//! matter (a down node keeps its partitions; sloppy quorum covers for it).
//! Nodes known only from the persisted ring stay members until the view
//! says they left, so a node restarting alone routes with the ring it last
//! had, before gossip catches up.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use kv_router::{Ring, RingSettings};
use kv_storage::Storage;
use kv_types::{Member, NodeId, NodeStatus};
use tokio::sync::{Notify, watch};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::{info, warn};

use crate::membership::{Announcement, Membership, View};
use crate::offload::offload;
use crate::placement::Placement;
use crate::{Clock, Error, Result};

/// Metadata key of the persisted ring in storage.
pub const RING_META: &str = "ring";

/// Metadata key of this node's own lifecycle status.
pub const STATUS_META: &str = "status";

/// Metadata key of the node ids this node knows were removed.
pub const REMOVED_META: &str = "removed";

/// The shared cluster state of one node.
pub struct Cluster {
    /// This node as configured (its `status` field is the one at startup;
    /// [`Cluster::status`] is the live one).
    me: Member,
    ring_config: RingSettings,
    /// The last membership the placement was built from.
    members: RwLock<Vec<Member>>,
    placement: RwLock<Arc<Placement>>,
    /// `placement`'s [`Placement::version`], read by every request and
    /// every answer without taking the lock (written with it).
    ring_version: AtomicU64,
    view: RwLock<Arc<View>>,
    /// Bumped each time `view` is replaced (read without the lock, so a
    /// cache of what the view shows knows when it is out of date).
    view_epoch: AtomicU64,
    /// This node's status.
    status: watch::Sender<NodeStatus>,
    /// Nodes removed by an admin, through this node or learned from others.
    removed: Mutex<Vec<NodeId>>,
    storage: Arc<dyn Storage>,
    membership: Arc<dyn Membership>,
    clock: Arc<Clock>,
    started: Instant,
    /// When the placement last changed.
    changed_at: Mutex<Instant>,
    /// Partitions this node became a current replica of without pulling
    /// them (a removed node's ranges): anti-entropy exchanges them first.
    gained: Mutex<BTreeSet<u32>>,
    /// Wakes anti-entropy when `gained` grows.
    gained_notify: Arc<Notify>,
    /// Answers from nodes that routed with another ring than this node.
    ring_mismatches: AtomicU64,
}

impl Cluster {
    /// Starts from the persisted ring (if any) plus this node.
    ///
    /// # Errors
    /// [`Error::Internal`] when no ring can be built (the ring settings are
    /// invalid); a storage error reading the removed nodes.
    pub fn new(
        me: Member,
        ring_config: RingSettings,
        storage: Arc<dyn Storage>,
        membership: Arc<dyn Membership>,
        clock: Arc<Clock>,
        persisted: Option<Ring>,
    ) -> Result<Self> {
        let mut members: BTreeMap<NodeId, Member> = BTreeMap::new();
        if let Some(ring) = &persisted {
            if *ring.config() != ring_config {
                warn!(
                    persisted = ?ring.config(),
                    configured = ?ring_config,
                    "the persisted ring has other settings; the configured ones win"
                );
            }
            for m in ring.members() {
                members.insert(m.id.clone(), m.clone());
            }
        }
        members.insert(me.id.clone(), me.clone());
        let list: Vec<Member> = members.into_values().collect();
        let placement = Placement::build(ring_config, &list)
            .map_err(|e| Error::Internal(format!("cannot build the ring: {e}")))?;
        info!(
            version = placement.target.version(),
            members = list.len(),
            "starting with ring"
        );
        let known_removed: Vec<NodeId> = storage
            .get_meta(REMOVED_META)
            .map_err(|e| Error::from_storage(&me.id, e))?
            .map(|b| {
                String::from_utf8_lossy(&b)
                    .split(',')
                    .filter_map(|id| NodeId::new(id).ok())
                    .collect()
            })
            .unwrap_or_default();
        let now = clock.now();
        Ok(Cluster {
            status: watch::channel(me.status).0,
            me,
            ring_config,
            members: RwLock::new(list),
            ring_version: AtomicU64::new(placement.version()),
            placement: RwLock::new(Arc::new(placement)),
            view: RwLock::new(Arc::new(View::default())),
            view_epoch: AtomicU64::new(0),
            removed: Mutex::new(known_removed),
            storage,
            membership,
            clock,
            started: now,
            changed_at: Mutex::new(now),
            gained: Mutex::new(BTreeSet::new()),
            gained_notify: Arc::new(Notify::new()),
            ring_mismatches: AtomicU64::new(0),
        })
    }

    /// Time since this node started.
    pub fn uptime(&self) -> Duration {
        self.clock.now().saturating_duration_since(self.started)
    }

    /// Time since the placement last changed.
    pub fn stable_for(&self) -> Duration {
        let at = *self.changed_at.lock().unwrap_or_else(|p| p.into_inner());
        self.clock.now().saturating_duration_since(at)
    }

    /// This node's id.
    pub fn id(&self) -> &NodeId {
        &self.me.id
    }

    /// This node as configured.
    pub fn me(&self) -> &Member {
        &self.me
    }

    /// This node's clock.
    pub fn clock(&self) -> &Arc<Clock> {
        &self.clock
    }

    /// This node's lifecycle status now.
    pub fn status(&self) -> NodeStatus {
        *self.status.borrow()
    }

    /// A receiver of this node's status changes.
    pub fn subscribe_status(&self) -> watch::Receiver<NodeStatus> {
        self.status.subscribe()
    }

    /// Changes this node's status: persisted first (a restart resumes it),
    /// then routed with and announced.
    ///
    /// # Errors
    /// When the status cannot be persisted.
    pub async fn set_status(&self, status: NodeStatus) -> Result<()> {
        let (storage, me) = (self.storage.clone(), self.me.id.clone());
        offload(move || storage.put_meta(STATUS_META, status.as_str().as_bytes()))
            .await?
            .map_err(|e| not_persisted(&me, &e))?;
        info!(status = status.as_str(), "this node's status changed");
        self.status.send_replace(status);
        self.membership.announce(Announcement::Status(status)).await;
        let view = self.view();
        self.rebuild(&view).await;
        Ok(())
    }

    /// Tells the other nodes something about this node.
    pub async fn announce(&self, announcement: Announcement) {
        self.membership.announce(announcement).await;
    }

    /// The nodes known to have been removed by an admin.
    pub fn removed(&self) -> Vec<NodeId> {
        self.removed
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Whether `node` is out of the ring for good as this node knows it:
    /// removed by an admin, or not a member and LEFT in the membership
    /// view (drained). Gossip forgets a LEFT node after its dead-node
    /// grace (a day by default); from then on it is merely unknown.
    pub fn has_left(&self, node: &NodeId) -> bool {
        if self.removed().contains(node) {
            return true;
        }
        if *node == self.me.id {
            return self.status() == NodeStatus::Left;
        }
        !self.members().iter().any(|m| m.id == *node)
            && self
                .view()
                .members
                .get(node)
                .is_some_and(|s| s.member.status == NodeStatus::Left)
    }

    /// Removes a node that is down for good: announced, and treated as
    /// LEFT here at once.
    ///
    /// # Errors
    /// A refusal when `node` is this node, unknown, or alive (drain it
    /// instead); [`Error::Storage`] when the removal cannot be persisted.
    pub async fn remove(&self, node: &NodeId) -> Result<()> {
        if *node == self.me.id {
            return Err(Error::invalid(
                "a node cannot remove itself: drain it instead",
            ));
        }
        if !self.members().iter().any(|m| m.id == *node) {
            return Err(Error::invalid(format!(
                "{node} is not a member of the ring"
            )));
        }
        if self.is_alive(node) {
            return Err(Error::invalid(format!(
                "{node} is alive: drain it (kvctl drain {node}) so that its data moves first"
            )));
        }
        let mut list = self.removed();
        if !list.contains(node) {
            list.push(node.clone());
        }
        self.keep_removed(list).await?;
        info!(%node, "node removed from the ring by an admin");
        let view = self.view();
        self.rebuild(&view).await;
        Ok(())
    }

    /// Persists and announces the removed nodes (so the removal outlives
    /// the node that made it).
    async fn keep_removed(&self, list: Vec<NodeId>) -> Result<()> {
        let text = list
            .iter()
            .map(NodeId::as_str)
            .collect::<Vec<_>>()
            .join(",");
        let (storage, me) = (self.storage.clone(), self.me.id.clone());
        offload(move || storage.put_meta(REMOVED_META, text.as_bytes()))
            .await?
            .map_err(|e| not_persisted(&me, &e))?;
        *self.removed.lock().unwrap_or_else(|p| p.into_inner()) = list.clone();
        self.membership.announce(Announcement::Removed(list)).await;
        Ok(())
    }

    /// Takes the partitions gained without a pull (see the field).
    pub fn take_gained(&self) -> Vec<u32> {
        let mut gained = self.gained.lock().unwrap_or_else(|p| p.into_inner());
        std::mem::take(&mut *gained).into_iter().collect()
    }

    /// Notified when partitions were gained without a pull.
    pub fn gained_notify(&self) -> &Arc<Notify> {
        &self.gained_notify
    }

    /// The members the placement was last built from (statuses included).
    pub fn members(&self) -> Vec<Member> {
        self.members
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// How many members the cluster has (without copying them).
    pub fn member_count(&self) -> usize {
        self.members.read().unwrap_or_else(|p| p.into_inner()).len()
    }

    /// The target ring (future owners): what status and explain show.
    pub fn ring(&self) -> Arc<Ring> {
        self.placement().target.clone()
    }

    /// Both rings.
    pub fn placement(&self) -> Arc<Placement> {
        self.placement
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// The version every answer of this node carries
    /// ([`Placement::version`]).
    pub fn ring_version(&self) -> u64 {
        self.ring_version.load(Ordering::Acquire)
    }

    /// The latest membership view.
    pub fn view(&self) -> Arc<View> {
        self.view.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// How many times the view was replaced: a cache of what it shows is
    /// current while this has not moved.
    pub fn view_epoch(&self) -> u64 {
        self.view_epoch.load(Ordering::Acquire)
    }

    /// Whether `id` is alive according to the failure detector (this node
    /// always is).
    pub fn is_alive(&self, id: &NodeId) -> bool {
        *id == self.me.id || self.view().is_alive(id)
    }

    /// Notes the ring version an answering peer routes with: when it is not
    /// this node's, one of the two views is behind, and this node asks its
    /// membership for a fresher one.
    pub fn observe_ring_version(&self, version: u64) {
        if version != 0 && version != self.ring_version() {
            self.ring_mismatches.fetch_add(1, Ordering::Relaxed);
            self.membership.refresh();
        }
    }

    /// Answers seen from nodes that routed with another ring.
    pub fn ring_mismatches(&self) -> u64 {
        self.ring_mismatches.load(Ordering::Relaxed)
    }

    /// Follows the membership: keeps the view fresh and rebuilds (and
    /// persists) the placement when its input changes, until `stop`.
    pub fn spawn_follower(self: &Arc<Self>, tasks: &TaskTracker, stop: CancellationToken) {
        let this = self.clone();
        let mut views = self.membership.views();
        tasks.spawn(async move {
            loop {
                let view = views.borrow_and_update().clone();
                {
                    let mut slot = this.view.write().unwrap_or_else(|p| p.into_inner());
                    *slot = view.clone();
                    this.view_epoch.fetch_add(1, Ordering::Release);
                }
                this.rebuild(&view).await;
                // Biased: the same order every time (the simulation
                // replays a seed exactly; tokio's default draw is random).
                tokio::select! {
                    biased;
                    _ = stop.cancelled() => break,
                    changed = views.changed() => if changed.is_err() { break },
                }
            }
        });
    }

    /// Takes in a view: learns removals, and rebuilds the placement when
    /// the ring's input changed.
    async fn rebuild(&self, view: &View) {
        let mut me = self.me.clone();
        me.status = self.status();
        let previous = self.members();
        let mut removed = self.removed();
        for state in view.members.values() {
            removed.extend(state.removed.iter().cloned());
        }
        removed.sort();
        removed.dedup();
        if removed != self.removed() {
            // Learned a removal: keep it across restarts and announce it
            // too, so it outlives the node that announced it.
            if let Err(e) = self.keep_removed(removed.clone()).await {
                warn!(error = %e, "cannot persist the removed nodes");
            }
        }
        if removed.contains(&me.id) && me.status != NodeStatus::Left {
            warn!(
                "an admin removed this node from the ring: it is LEFT and serves nothing it owned"
            );
            self.status.send_replace(NodeStatus::Left);
            me.status = NodeStatus::Left;
        }
        let mut members = ring_members(&previous, view, me);
        members.retain(|m| !removed.contains(&m.id));
        if members == previous {
            return;
        }
        let placement = match Placement::build(self.ring_config, &members) {
            Ok(p) => p,
            Err(e) => {
                warn!(error = %e, "cannot build a ring from the membership view; keeping the old one");
                return;
            }
        };
        let old = self.placement();
        *self.members.write().unwrap_or_else(|p| p.into_inner()) = members.clone();
        if placement.target.version() == old.target.version()
            && placement.current.version() == old.current.version()
        {
            return;
        }
        info!(
            old = old.target.version(),
            new = placement.target.version(),
            current = placement.current.version(),
            members = members.len(),
            moving = placement.is_moving(),
            "ring changed"
        );
        self.note_gained(&old, &placement);
        let bytes = placement.target.to_bytes();
        {
            let mut slot = self.placement.write().unwrap_or_else(|p| p.into_inner());
            self.ring_version
                .store(placement.version(), Ordering::Release);
            *slot = Arc::new(placement);
        }
        *self.changed_at.lock().unwrap_or_else(|p| p.into_inner()) = self.clock.now();
        let storage = self.storage.clone();
        match offload(move || storage.put_meta(RING_META, &bytes)).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => warn!(error = %e, "cannot persist the ring"),
            Err(e) => warn!(error = %e, "ring persistence task failed"),
        }
    }

    /// Partitions that became ours in the current ring without passing
    /// through a pending phase (a node was removed): anti-entropy fills
    /// them now rather than on its next round.
    fn note_gained(&self, old: &Placement, new: &Placement) {
        let me = &self.me.id;
        if old.current.partitions() != new.current.partitions() {
            return;
        }
        let gained: Vec<u32> = (0..new.current.partitions())
            .filter(|p| {
                new.current.preference_list(*p).contains(me)
                    && !old.current.preference_list(*p).contains(me)
                    && !old.target.preference_list(*p).contains(me)
            })
            .collect();
        if gained.is_empty() {
            return;
        }
        info!(
            partitions = gained.len(),
            "gained partitions without a pull: repairing them now"
        );
        self.gained
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .extend(gained);
        self.gained_notify.notify_one();
    }
}

/// The error of a membership change whose metadata could not be
/// persisted: the change did not take effect (nothing in memory changed,
/// nothing was announced), whatever the disk kept.
fn not_persisted(node: &NodeId, e: &kv_storage::Error) -> Error {
    Error::Storage {
        node: node.clone(),
        message: format!("cannot persist the change: {e}"),
    }
}

/// The rings' input: the previous members, updated and extended by the
/// view, without nodes that LEFT; this node as it is now (left out once it
/// has LEFT itself).
fn ring_members(previous: &[Member], view: &View, me: Member) -> Vec<Member> {
    let mut members: BTreeMap<NodeId, Member> =
        previous.iter().map(|m| (m.id.clone(), m.clone())).collect();
    for (id, state) in &view.members {
        if *id == me.id {
            continue;
        }
        if state.member.status == NodeStatus::Left {
            members.remove(id);
        } else {
            members.insert(id.clone(), state.member.clone());
        }
    }
    if me.status == NodeStatus::Left {
        members.remove(&me.id);
    } else {
        members.insert(me.id.clone(), me);
    }
    members.into_values().collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::membership::PeerState;

    fn member(id: &str, status: NodeStatus) -> Member {
        Member {
            id: NodeId::new(id).unwrap(),
            zone: "z".into(),
            host: "h".into(),
            weight: 1,
            status,
        }
    }

    fn view(nodes: &[(&str, NodeStatus)]) -> View {
        let mut v = View::default();
        for (id, status) in nodes {
            let m = member(id, *status);
            v.members.insert(
                m.id.clone(),
                PeerState {
                    member: m,
                    alive: false,
                    incarnation: None,
                    removed: Vec::new(),
                    suspect: false,
                    generation: None,
                    report: None,
                },
            );
        }
        v
    }

    fn ids(members: Vec<Member>) -> Vec<String> {
        members.into_iter().map(|m| m.id.to_string()).collect()
    }

    #[test]
    fn dead_nodes_stay_left_nodes_go_and_persisted_ones_remain() {
        let me = member("node1", NodeStatus::Up);
        let previous = vec![member("node9", NodeStatus::Up)];
        let v = view(&[("node2", NodeStatus::Up), ("node3", NodeStatus::Left)]);
        assert_eq!(
            ids(ring_members(&previous, &v, me.clone())),
            ["node1", "node2", "node9"]
        );
        let v = view(&[("node9", NodeStatus::Left)]);
        assert_eq!(ids(ring_members(&previous, &v, me)), ["node1"]);
    }

    #[test]
    fn a_node_that_left_is_not_a_member_of_its_own_rings() {
        let me = member("node1", NodeStatus::Left);
        let v = view(&[("node2", NodeStatus::Up), ("node1", NodeStatus::Up)]);
        assert_eq!(ids(ring_members(&[], &v, me)), ["node2"]);
    }
}
