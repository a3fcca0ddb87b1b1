//! What this node knows about the cluster: the gossip view (who exists,
//! where, alive or not) and the ring computed from it.
//!
//! The ring's input is every node that has not LEFT: live or dead does not
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

/// Metadata key of the persisted ring in storage.
pub const RING_META: &str = "ring";

/// The shared cluster state of one node.
pub struct Cluster {
    me: NodeInfo,
    ring_config: RingConfig,
    ring: RwLock<Arc<Ring>>,
    view: RwLock<Arc<View>>,
    storage: Arc<dyn Storage>,
    started: std::time::Instant,
}

impl Cluster {
    /// Starts from the persisted ring (if any) plus this node.
    ///
    /// # Errors
    /// When no ring can be built (a bug: this node itself is always a
    /// member), or the ring settings are invalid.
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
        let ring = Ring::build(ring_config, &list)?;
        info!(
            version = ring.version(),
            members = list.len(),
            "starting with ring"
        );
        Ok(Cluster {
            me,
            ring_config,
            ring: RwLock::new(Arc::new(ring)),
            view: RwLock::new(Arc::new(View::default())),
            storage,
            started: std::time::Instant::now(),
        })
    }

    /// Time since this node started.
    pub fn uptime(&self) -> std::time::Duration {
        self.started.elapsed()
    }

    /// This node.
    pub fn me(&self) -> &NodeInfo {
        &self.me
    }

    /// The ring requests are routed with now.
    pub fn ring(&self) -> Arc<Ring> {
        self.ring.read().unwrap_or_else(|p| p.into_inner()).clone()
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
    /// ring when its input changes, until `stop`.
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
                this.apply(view).await;
                tokio::select! {
                    _ = stop.cancelled() => break,
                    changed = views.changed() => if changed.is_err() { break },
                }
            }
        });
    }

    async fn apply(&self, view: Arc<View>) {
        *self.view.write().unwrap_or_else(|p| p.into_inner()) = view.clone();
        let current = self.ring();
        let members = ring_members(current.members(), &view, &self.me);
        if members.as_slice() == current.members() {
            return;
        }
        let ring = match Ring::build(self.ring_config, &members) {
            Ok(r) => r,
            Err(e) => {
                warn!(error = %e, "cannot build a ring from the gossip view; keeping the old one");
                return;
            }
        };
        if ring.version() == current.version() {
            return;
        }
        info!(
            old = current.version(),
            new = ring.version(),
            members = members.len(),
            "ring changed"
        );
        let bytes = ring.to_bytes();
        *self.ring.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(ring);
        let storage = self.storage.clone();
        match tokio::task::spawn_blocking(move || storage.put_meta(RING_META, &bytes)).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => warn!(error = %e, "cannot persist the ring"),
            Err(e) => warn!(error = %e, "ring persistence task failed"),
        }
    }
}

/// The ring's input: the previous members, updated and extended by what
/// gossip says, without nodes that LEFT; this node as it is configured.
fn ring_members(previous: &[Member], view: &View, me: &NodeInfo) -> Vec<Member> {
    let mut members: BTreeMap<NodeId, Member> =
        previous.iter().map(|m| (m.id.clone(), m.clone())).collect();
    for (id, state) in &view.members {
        if state.info.status == NodeStatus::Left {
            members.remove(id);
        } else {
            members.insert(id.clone(), state.info.member());
        }
    }
    members.insert(me.id.clone(), me.member());
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

    #[test]
    fn dead_nodes_stay_left_nodes_go_and_persisted_ones_remain() {
        let me = info("node1", NodeStatus::Up);
        let previous = vec![info("node9", NodeStatus::Up).member()];
        let v = view(&[("node2", NodeStatus::Up), ("node3", NodeStatus::Left)]);
        let ids: Vec<String> = ring_members(&previous, &v, &me)
            .into_iter()
            .map(|m| m.id.to_string())
            .collect();
        assert_eq!(ids, ["node1", "node2", "node9"]);
        let v = view(&[("node9", NodeStatus::Left)]);
        let ids: Vec<String> = ring_members(&previous, &v, &me)
            .into_iter()
            .map(|m| m.id.to_string())
            .collect();
        assert_eq!(ids, ["node1"]);
    }
}
