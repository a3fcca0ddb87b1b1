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
use kv_replication::{Announcement, LoadReport, PeerState, View};
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
    /// Phi above which a node is suspect: half the conviction threshold.
    suspect_phi: f64,
    /// Each node's last `load` value and when it arrived.
    received: std::sync::Mutex<BTreeMap<NodeId, (String, tokio::time::Instant)>>,
    /// Reports sent so far (their sequence number).
    reports: std::sync::atomic::AtomicU64,
}

impl GossipMembership {
    /// A membership with an empty view, not attached to gossip yet, for a
    /// node that clients reach at `client_addr`, whose failure detector
    /// convicts at `phi_threshold` (half of it makes a node suspect).
    pub fn new(client_addr: SocketAddr, phi_threshold: f64) -> Arc<Self> {
        Arc::new(GossipMembership {
            views: watch::channel(Arc::new(View::default())).0,
            gossip: RwLock::new(Arc::new(kv_gossip::View::default())),
            announced: Mutex::new(BTreeMap::new()),
            publisher: OnceLock::new(),
            client_addr,
            suspect_phi: phi_threshold / 2.0,
            received: std::sync::Mutex::new(BTreeMap::new()),
            reports: std::sync::atomic::AtomicU64::new(0),
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
        let now = tokio::time::Instant::now();
        let received = {
            let mut received = self.received.lock().unwrap_or_else(|p| p.into_inner());
            for (id, state) in &gossip.members {
                if let Some(load) = state.extra.get(keys::LOAD) {
                    let entry = received
                        .entry(id.clone())
                        .or_insert_with(|| (load.clone(), now));
                    if entry.0 != *load {
                        *entry = (load.clone(), now);
                    }
                }
            }
            received.clone()
        };
        let view = translate(&gossip, self.suspect_phi, &received);
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
            Announcement::Report(report) => {
                let seq = self
                    .reports
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                report_keys(seq, &report)
            }
        };
        self.publish(pairs).await;
    }

    fn refresh(&self) {
        if let Some(publisher) = self.publisher.get() {
            publisher.refresh();
        }
    }
}

/// The gossip keys of one load report.
fn report_keys(seq: u64, r: &LoadReport) -> Vec<(String, String)> {
    let text = r.to_text(seq);
    vec![
        (keys::LOAD.to_string(), text.load),
        (keys::CACHE_HIT_RATIO.to_string(), text.hit_ratio),
        (keys::HOT_KEYS.to_string(), text.hot_keys),
        (keys::HINTS.to_string(), text.hints),
    ]
}

/// The load report a node published, if its keys parse
/// ([`LoadReport::from_text`]).
fn parse_report(extra: &BTreeMap<String, String>) -> Option<LoadReport> {
    LoadReport::from_text(
        extra.get(keys::LOAD)?,
        extra.get(keys::CACHE_HIT_RATIO).map(String::as_str),
        extra.get(keys::HOT_KEYS).map(String::as_str),
        extra.get(keys::HINTS).map(String::as_str),
    )
}

/// The core's view of a gossip view: ring records, liveness and
/// suspicion, the incarnations, removals and load reports nodes published
/// (with when each report arrived).
fn translate(
    gossip: &kv_gossip::View,
    suspect_phi: f64,
    received: &BTreeMap<NodeId, (String, tokio::time::Instant)>,
) -> View {
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
            let report = parse_report(&state.extra).and_then(|r| Some((r, received.get(id)?.1)));
            let peer = PeerState {
                member: state.info.member(),
                alive: state.alive,
                incarnation,
                removed,
                suspect: state.phi.is_some_and(|phi| phi > suspect_phi),
                generation: Some(state.generation),
                report,
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
                generation: 1_796_000_000_123,
                gossip_addr: "127.0.0.1:2".parse().unwrap(),
                alive: true,
                phi: Some(5.0),
                extra,
            },
        );
        let view = translate(&gossip, 4.0, &BTreeMap::new());
        let peer = &view.members[&id];
        assert!(peer.alive);
        assert_eq!(peer.incarnation, Some(255));
        assert_eq!(peer.removed, vec![NodeId::new("node9").unwrap()]);
        assert_eq!(peer.member.status, NodeStatus::Draining);
        assert_eq!(peer.member.weight, 2);
        assert!(peer.suspect);
        // The process generation, for telling a restart from a flap.
        assert_eq!(peer.generation, Some(1_796_000_000_123));
        // No load key: no report.
        assert!(peer.report.is_none());
    }

    #[test]
    fn a_load_report_survives_its_gossip_keys() {
        let report = LoadReport {
            cpu: 0.25,
            queue: 7,
            backlog: 3,
            hit_ratio: 0.875,
            hot_keys: vec![0xabc, 0xdef],
            hints: vec![(NodeId::new("node3").unwrap(), 12)],
            repair: true,
        };
        let extra: BTreeMap<String, String> = report_keys(9, &report).into_iter().collect();
        assert_eq!(parse_report(&extra), Some(report));
        let mut broken = extra.clone();
        broken.insert(keys::LOAD.to_string(), "9 x".into());
        assert_eq!(parse_report(&broken), None);
    }
}
