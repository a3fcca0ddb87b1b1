//! What this node knows about the cluster: the gossip view (who exists,
//! where, alive or not), its own lifecycle status, and the placement (two
//! rings, see `placement`) computed from them.
//!
//! The rings' input is every node that has not LEFT: live or dead does not
//! matter (a down node keeps its partitions; sloppy quorum covers for it).
//! Nodes known only from the persisted ring stay members until gossip says
//! they left, so a node restarting alone routes with the ring it last had
//! (SPEC item 4: "starts from it before gossip catches up").

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, RwLock};

use kv_gossip::{NodeInfo, View};
use kv_router::{Ring, RingConfig};
use kv_storage::Storage;
use kv_types::{Member, NodeId, NodeStatus};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::{info, warn};

use crate::placement::Placement;

/// Metadata key of the persisted ring in storage.
pub const RING_META: &str = "ring";

/// Metadata key of this node's own lifecycle status.
pub const STATUS_META: &str = "status";

/// Metadata key of the node ids this node knows were removed.
pub const REMOVED_META: &str = "removed";

/// Gossip key prefix by which a node announces that an admin removed a dead
/// node (`removed:<id>`); every node treats such a node as LEFT.
pub const REMOVED_PREFIX: &str = "removed:";

/// The shared cluster state of one node.
pub struct Cluster {
    /// This node as configured (its `status` field is the one at startup;
    /// [`Cluster::status`] is the live one).
    me: NodeInfo,
    ring_config: RingConfig,
    /// The last membership the placement was built from.
    members: RwLock<Vec<Member>>,
    placement: RwLock<Arc<Placement>>,
    view: RwLock<Arc<View>>,
    /// This node's status; gossip publishes every change.
    status: watch::Sender<NodeStatus>,
    /// Nodes removed through this node (`kvctl remove`); gossip publishes
    /// them as `removed:<id>` keys.
    removed: watch::Sender<Vec<NodeId>>,
    storage: Arc<dyn Storage>,
    started: std::time::Instant,
    /// Partitions this node became a current replica of without pulling
    /// them (a removed node's ranges): anti-entropy exchanges them first.
    gained: std::sync::Mutex<std::collections::BTreeSet<u32>>,
    /// Wakes anti-entropy when `gained` grows.
    pub gained_notify: tokio::sync::Notify,
}

impl Cluster {
    /// Starts from the persisted ring (if any) plus this node.
    ///
    /// # Errors
    /// When no ring can be built (a bug: this node itself is always a
    /// member unless it left), or the ring settings are invalid.
    pub fn new(
        me: NodeInfo,
        ring_config: RingConfig,
        storage: Arc<dyn Storage>,
        persisted: Option<Ring>,
    ) -> anyhow::Result<Self> {
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
        members.insert(me.id.clone(), me.member());
        let list: Vec<Member> = members.into_values().collect();
        let placement = Placement::build(ring_config, &list)?;
        info!(
            version = placement.target.version(),
            members = list.len(),
            "starting with ring"
        );
        let (status, _) = watch::channel(me.status);
        let known_removed: Vec<NodeId> = storage
            .get_meta(REMOVED_META)?
            .map(|b| {
                String::from_utf8_lossy(&b)
                    .split(',')
                    .filter_map(|id| NodeId::new(id).ok())
                    .collect()
            })
            .unwrap_or_default();
        let (removed, _) = watch::channel(known_removed);
        Ok(Cluster {
            me,
            ring_config,
            members: RwLock::new(list),
            placement: RwLock::new(Arc::new(placement)),
            view: RwLock::new(Arc::new(View::default())),
            status,
            removed,
            storage,
            started: std::time::Instant::now(),
            gained: std::sync::Mutex::new(Default::default()),
            gained_notify: tokio::sync::Notify::new(),
        })
    }

    /// Time since this node started.
    pub fn uptime(&self) -> std::time::Duration {
        self.started.elapsed()
    }

    /// This node as configured.
    pub fn me(&self) -> &NodeInfo {
        &self.me
    }

    /// This node's lifecycle status now.
    pub fn status(&self) -> NodeStatus {
        *self.status.borrow()
    }

    /// A receiver of this node's status changes (gossip publishes them).
    pub fn subscribe_status(&self) -> watch::Receiver<NodeStatus> {
        self.status.subscribe()
    }

    /// Changes this node's status: persisted first (a restart resumes it),
    /// then routed with and published.
    ///
    /// # Errors
    /// When the status cannot be persisted.
    pub async fn set_status(&self, status: NodeStatus) -> anyhow::Result<()> {
        let storage = self.storage.clone();
        tokio::task::spawn_blocking(move || {
            storage.put_meta(STATUS_META, status.as_str().as_bytes())
        })
        .await??;
        info!(status = status.as_str(), "this node's status changed");
        self.status.send_replace(status);
        let view = self.view();
        self.rebuild(&view).await;
        Ok(())
    }

    /// A receiver of the nodes removed through this node.
    pub fn subscribe_removed(&self) -> watch::Receiver<Vec<NodeId>> {
        self.removed.subscribe()
    }

    /// Removes a node that is down for good: announced in gossip, and
    /// treated as LEFT here at once.
    ///
    /// # Errors
    /// When `node` is this node, unknown, or alive (drain it instead).
    pub async fn remove(&self, node: &NodeId) -> anyhow::Result<()> {
        anyhow::ensure!(
            *node != self.me.id,
            "a node cannot remove itself: drain it instead"
        );
        anyhow::ensure!(
            self.members().iter().any(|m| m.id == *node),
            "{node} is not a member of the ring"
        );
        anyhow::ensure!(
            !self.is_alive(node),
            "{node} is alive: drain it (kvctl drain {node}) so that its data moves first"
        );
        let mut list = self.removed.borrow().clone();
        if !list.contains(node) {
            list.push(node.clone());
        }
        let text = list
            .iter()
            .map(NodeId::as_str)
            .collect::<Vec<_>>()
            .join(",");
        let storage = self.storage.clone();
        tokio::task::spawn_blocking(move || storage.put_meta(REMOVED_META, text.as_bytes()))
            .await??;
        self.removed.send_replace(list);
        info!(%node, "node removed from the ring by an admin");
        let view = self.view();
        self.rebuild(&view).await;
        Ok(())
    }

    /// Takes the partitions gained without a pull (see the field).
    pub fn take_gained(&self) -> Vec<u32> {
        let mut gained = self.gained.lock().unwrap_or_else(|p| p.into_inner());
        std::mem::take(&mut *gained).into_iter().collect()
    }

    /// The members the placement was last built from (statuses included).
    pub fn members(&self) -> Vec<Member> {
        self.members
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
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

    /// The latest gossip view.
    pub fn view(&self) -> Arc<View> {
        self.view.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Whether `id` is alive according to the failure detector (this node
    /// always is).
    pub fn is_alive(&self, id: &NodeId) -> bool {
        *id == self.me.id || self.view().is_alive(id)
    }

    /// Where to reach peer `id`, if gossip has told us.
    pub fn peer_addr(&self, id: &NodeId) -> Option<SocketAddr> {
        self.view().members.get(id).map(|m| m.gossip_addr)
    }

    /// Follows gossip: keeps the view fresh and rebuilds (and persists) the
    /// placement when its input changes, until `stop`.
    pub fn spawn_follower(
        self: &Arc<Self>,
        mut views: watch::Receiver<Arc<View>>,
        tasks: &TaskTracker,
        stop: CancellationToken,
    ) {
        let this = self.clone();
        tasks.spawn(async move {
            loop {
                let view = views.borrow_and_update().clone();
                *this.view.write().unwrap_or_else(|p| p.into_inner()) = view.clone();
                this.rebuild(&view).await;
                tokio::select! {
                    _ = stop.cancelled() => break,
                    changed = views.changed() => if changed.is_err() { break },
                }
            }
        });
    }

    async fn rebuild(&self, view: &View) {
        let mut me = self.me.member();
        me.status = self.status();
        let previous = self
            .members
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        let mut removed: Vec<NodeId> = self.removed.borrow().clone();
        for state in view.members.values() {
            for key in state.extra.keys() {
                if let Some(id) = key
                    .strip_prefix(REMOVED_PREFIX)
                    .and_then(|id| NodeId::new(id).ok())
                {
                    removed.push(id);
                }
            }
        }
        removed.sort();
        removed.dedup();
        if removed != *self.removed.borrow() {
            // Learned (or made) a removal: keep it across restarts and
            // announce it too, so it outlives the node that announced it.
            self.removed.send_replace(removed.clone());
            let text = removed
                .iter()
                .map(NodeId::as_str)
                .collect::<Vec<_>>()
                .join(",");
            let storage = self.storage.clone();
            if let Ok(Err(e)) =
                tokio::task::spawn_blocking(move || storage.put_meta(REMOVED_META, text.as_bytes()))
                    .await
            {
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
                warn!(error = %e, "cannot build a ring from the gossip view; keeping the old one");
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
        // Partitions that became ours in the current ring without passing
        // through a pending phase (a node was removed): have anti-entropy
        // fill them now rather than on its next round.
        let me_id = &self.me.id;
        let gained: Vec<u32> = (0..placement.current.partitions())
            .filter(|p| {
                placement.current.preference_list(*p).contains(me_id)
                    && !old.current.preference_list(*p).contains(me_id)
                    && !old.target.preference_list(*p).contains(me_id)
            })
            .collect();
        if !gained.is_empty() && old.current.partitions() == placement.current.partitions() {
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
        let bytes = placement.target.to_bytes();
        *self.placement.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(placement);
        let storage = self.storage.clone();
        match tokio::task::spawn_blocking(move || storage.put_meta(RING_META, &bytes)).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => warn!(error = %e, "cannot persist the ring"),
            Err(e) => warn!(error = %e, "ring persistence task failed"),
        }
    }
}

/// The rings' input: the previous members, updated and extended by what
/// gossip says, without nodes that LEFT; this node as it is now (left out
/// once it has LEFT itself).
fn ring_members(previous: &[Member], view: &View, me: Member) -> Vec<Member> {
    let mut members: BTreeMap<NodeId, Member> =
        previous.iter().map(|m| (m.id.clone(), m.clone())).collect();
    for (id, state) in &view.members {
        if state.info.status == NodeStatus::Left {
            members.remove(id);
        } else {
            members.insert(id.clone(), state.info.member());
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

    fn info(id: &str, status: NodeStatus) -> NodeInfo {
        NodeInfo {
            id: NodeId::new(id).unwrap(),
            client_addr: "127.0.0.1:1".parse().unwrap(),
            zone: "z".into(),
            host: "h".into(),
            weight: 1,
            status,
        }
    }

    fn view(nodes: &[(&str, NodeStatus)]) -> View {
        let mut v = View::default();
        for (id, status) in nodes {
            let i = info(id, *status);
            v.members.insert(
                i.id.clone(),
                kv_gossip::MemberState {
                    info: i,
                    generation: 1,
                    gossip_addr: "127.0.0.1:1".parse().unwrap(),
                    alive: false,
                    extra: Default::default(),
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
        let me = info("node1", NodeStatus::Up).member();
        let previous = vec![info("node9", NodeStatus::Up).member()];
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
        let me = info("node1", NodeStatus::Left).member();
        let v = view(&[("node2", NodeStatus::Up)]);
        assert_eq!(ids(ring_members(&[], &v, me)), ["node2"]);
    }
}
