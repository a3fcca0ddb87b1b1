//! The replication core's membership seam on chitchat gossip: views
//! translated from gossip's (liveness from its phi-accrual detector only),
//! and announcements published as gossip keys ([`kv_gossip::keys`]).
//!
//! The core is opened before gossip starts (the QUIC endpoint gossip runs
//! on needs the core's handler), so announcements made before are kept and
//! published when gossip is attached.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, OnceLock, RwLock};

use kv_gossip::{Publisher, keys};
use kv_replication::{Announcement, PeerState, View};
use kv_types::NodeId;
use tokio::sync::{Mutex, watch};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// Gossip as the core's membership.
pub struct GossipMembership {
    /// The core's views.
    views: watch::Sender<Arc<View>>,
    /// The latest gossip view (addresses and keys the core does not read).
    gossip: RwLock<Arc<kv_gossip::View>>,
    /// Every key announced so far; held while publishing, so a key is
    /// never published out of order.
    announced: Mutex<BTreeMap<String, String>>,
    /// Set once gossip runs.
    publisher: OnceLock<Publisher>,
    /// The address clients reach this node at (gossip shows it for the
    /// others).
    client_addr: SocketAddr,
}

impl GossipMembership {
    /// A membership with an empty view, not attached to gossip yet, for a
    /// node that clients reach at `client_addr`.
    pub fn new(client_addr: SocketAddr) -> Arc<Self> {
        Arc::new(GossipMembership {
            views: watch::channel(Arc::new(View::default())).0,
            gossip: RwLock::new(Arc::new(kv_gossip::View::default())),
            announced: Mutex::new(BTreeMap::new()),
            publisher: OnceLock::new(),
            client_addr,
        })
    }

    /// The address clients reach this node at.
    pub fn client_addr(&self) -> SocketAddr {
        self.client_addr
    }

    /// Attaches running gossip: publishes what was announced so far and
    /// follows gossip's views until `stop`.
    pub async fn attach(
        self: &Arc<Self>,
        gossip: &kv_gossip::Membership,
        tasks: &TaskTracker,
        stop: CancellationToken,
    ) {
        {
            let announced = self.announced.lock().await;
            let publisher = gossip.publisher();
            for (key, value) in announced.iter() {
                publisher.publish(key, value).await;
            }
            let _ = self.publisher.set(publisher);
        }
        let (this, mut views) = (self.clone(), gossip.subscribe());
        tasks.spawn(async move {
            loop {
                let view = views.borrow_and_update().clone();
                this.take(view);
                tokio::select! {
                    _ = stop.cancelled() => break,
                    changed = views.changed() => if changed.is_err() { break },
                }
            }
        });
    }

    /// Takes in one gossip view.
    fn take(&self, gossip: Arc<kv_gossip::View>) {
        let view = translate(&gossip);
        *self.gossip.write().unwrap_or_else(|p| p.into_inner()) = gossip;
        self.views.send_if_modified(|old| {
            if **old == view {
                return false;
            }
            *old = Arc::new(view);
            true
        });
    }

    /// The latest gossip view.
    pub fn gossip_view(&self) -> Arc<kv_gossip::View> {
        self.gossip
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Where peer `id` serves replica calls, if gossip has told us.
    pub fn peer_addr(&self, id: &NodeId) -> Option<SocketAddr> {
        self.gossip_view().members.get(id).map(|m| m.gossip_addr)
    }

    /// Publishes `pairs` (and keeps them for a later attach).
    async fn publish(&self, pairs: Vec<(String, String)>) {
        let mut announced = self.announced.lock().await;
        for (key, value) in pairs {
            if let Some(publisher) = self.publisher.get() {
                publisher.publish(&key, &value).await;
            }
            announced.insert(key, value);
        }
    }
}

#[async_trait::async_trait]
impl kv_replication::Membership for GossipMembership {
    fn views(&self) -> watch::Receiver<Arc<View>> {
        self.views.subscribe()
    }

    async fn announce(&self, announcement: Announcement) {
        let pairs = match announcement {
            Announcement::Status(status) => {
                vec![(keys::STATUS.to_string(), status.as_str().to_string())]
            }
            Announcement::Incarnation(incarnation) => {
                vec![(keys::INCARNATION.to_string(), format!("{incarnation:016x}"))]
            }
            Announcement::Transfer { done, total } => {
                let text = if total == 0 {
                    String::new()
                } else {
                    format!("{done}/{total}")
                };
                vec![(keys::TRANSFER.to_string(), text)]
            }
            Announcement::Removed(list) => list
                .iter()
                .map(|id| (format!("{}{id}", keys::REMOVED_PREFIX), "1".to_string()))
                .collect(),
        };
        self.publish(pairs).await;
    }

    fn refresh(&self) {
        if let Some(publisher) = self.publisher.get() {
            publisher.refresh();
        }
    }
}

/// The core's view of a gossip view: ring records, liveness, the
/// incarnations and removals nodes published.
fn translate(gossip: &kv_gossip::View) -> View {
    let members = gossip
        .members
        .iter()
        .map(|(id, state)| {
            let incarnation = state
                .extra
                .get(keys::INCARNATION)
                .and_then(|hex| u64::from_str_radix(hex, 16).ok());
            let removed = state
                .extra
                .keys()
                .filter_map(|k| k.strip_prefix(keys::REMOVED_PREFIX))
                .filter_map(|id| NodeId::new(id).ok())
                .collect();
            let peer = PeerState {
                member: state.info.member(),
                alive: state.alive,
                incarnation,
                removed,
            };
            (id.clone(), peer)
        })
        .collect();
    View { members }
}

/// A key a node published in gossip (its RESP or admin address, its
/// transfer progress), or "".
pub fn published(state: Option<&kv_gossip::MemberState>, key: &str) -> String {
    state
        .and_then(|s| s.extra.get(key))
        .cloned()
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use kv_gossip::{MemberState, NodeInfo};
    use kv_types::NodeStatus;

    use super::*;

    #[test]
    fn gossip_keys_become_the_cores_view() {
        let id = NodeId::new("node2").unwrap();
        let mut extra = BTreeMap::new();
        extra.insert(
            keys::INCARNATION.to_string(),
            "00000000000000ff".to_string(),
        );
        extra.insert(format!("{}node9", keys::REMOVED_PREFIX), "1".to_string());
        extra.insert(keys::HOT_KEYS.to_string(), "ab".to_string());
        let mut gossip = kv_gossip::View::default();
        gossip.members.insert(
            id.clone(),
            MemberState {
                info: NodeInfo {
                    id: id.clone(),
                    client_addr: "127.0.0.1:1".parse().unwrap(),
                    zone: "z".into(),
                    host: "h".into(),
                    weight: 2,
                    status: NodeStatus::Draining,
                },
                generation: 1,
                gossip_addr: "127.0.0.1:2".parse().unwrap(),
                alive: true,
                extra,
            },
        );
        let view = translate(&gossip);
        let peer = &view.members[&id];
        assert!(peer.alive);
        assert_eq!(peer.incarnation, Some(255));
        assert_eq!(peer.removed, vec![NodeId::new("node9").unwrap()]);
        assert_eq!(peer.member.status, NodeStatus::Draining);
        assert_eq!(peer.member.weight, 2);
    }
}
