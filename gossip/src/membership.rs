//! Starting chitchat, publishing this node, and keeping the [`View`] fresh.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use chitchat::{ChitchatConfig, ChitchatHandle, ChitchatId, FailureDetectorConfig};
use kv_types::{Member, NodeId, NodeStatus};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::keys;
use crate::pause::LocalPause;
use crate::view::{RawNode, View, build_view};
use crate::{Error, QuicTransport, Result};

/// What a node publishes about itself.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeInfo {
    /// Stable node id.
    pub id: NodeId,
    /// Address clients (kvctl) reach this node at; may differ from the peer
    /// address behind NAT or published container ports.
    pub client_addr: SocketAddr,
    /// Zone label.
    pub zone: String,
    /// Host label.
    pub host: String,
    /// Relative capacity for partition claim.
    pub weight: u32,
    /// Lifecycle status.
    pub status: NodeStatus,
}

impl NodeInfo {
    /// The ring's view of this node.
    pub fn member(&self) -> Member {
        Member {
            id: self.id.clone(),
            zone: self.zone.clone(),
            host: self.host.clone(),
            weight: self.weight,
            status: self.status,
        }
    }
}

/// Publishes this node's keys (see [`Membership::publisher`]).
#[derive(Clone)]
pub struct Publisher {
    chitchat: Arc<tokio::sync::Mutex<chitchat::Chitchat>>,
    /// Wakes the view refresher.
    refresh: Arc<tokio::sync::Notify>,
}

impl Publisher {
    /// Publishes a new lifecycle status for this node.
    pub async fn set_status(&self, status: NodeStatus) {
        self.publish(keys::STATUS, status.as_str()).await;
    }

    /// Publishes (or replaces) a key about this node.
    pub async fn publish(&self, key: &str, value: &str) {
        self.chitchat.lock().await.self_node_state().set(key, value);
    }

    /// Rebuilds the view now instead of at the next refresh period (a peer
    /// answered with a ring this node does not have yet).
    pub fn refresh(&self) {
        self.refresh.notify_one();
    }
}

/// Gossip settings, derived by the node from its `[gossip]` section.
#[derive(Clone, Debug)]
pub struct GossipSettings {
    /// Nodes with a different cluster id refuse each other's gossip.
    pub cluster_id: String,
    /// This node's endpoint address as peers reach it.
    pub gossip_addr: SocketAddr,
    /// `HOST:PORT` of seed nodes (resolved, and re-resolved, by chitchat).
    pub seeds: Vec<String>,
    /// Time between gossip rounds. Default 500 ms.
    pub interval: Duration,
    /// Phi above which the failure detector declares a node dead. Default
    /// 8.0 (chitchat's and Cassandra's default).
    pub phi_threshold: f64,
    /// How long a dead node's state is kept before it is forgotten. Default
    /// 24 h (chitchat's default); the ring keeps dead nodes regardless.
    pub dead_node_grace: Duration,
    /// Incarnation of this process: must grow across restarts (the start
    /// time in ms is used).
    pub generation: u64,
}

/// A running membership service: see the crate documentation.
pub struct Membership {
    handle: ChitchatHandle,
    view: watch::Receiver<Arc<View>>,
    refresher: JoinHandle<()>,
    refresh: Arc<tokio::sync::Notify>,
}

impl Membership {
    /// Starts gossiping as `me` over `transport`.
    ///
    /// # Errors
    /// [`Error::Start`] if chitchat cannot open the transport.
    pub async fn start(
        config: GossipSettings,
        me: &NodeInfo,
        transport: &QuicTransport,
    ) -> Result<Self> {
        let interval = config.interval;
        let chitchat_config = ChitchatConfig {
            chitchat_id: ChitchatId::new(me.id.as_str(), config.generation, config.gossip_addr),
            cluster_id: config.cluster_id,
            gossip_interval: interval,
            listen_addr: config.gossip_addr,
            seed_nodes: config.seeds,
            failure_detector_config: FailureDetectorConfig {
                phi_threshold: config.phi_threshold,
                sampling_window_size: 1000,
                max_interval: interval * 20,
                initial_interval: interval,
                dead_node_grace_period: config.dead_node_grace,
            },
            marked_for_deletion_grace_period: Duration::from_secs(3600),
            catchup_callback: None,
            extra_liveness_predicate: None,
        };
        let initial = vec![
            (keys::CLIENT_ADDR.to_string(), me.client_addr.to_string()),
            (keys::ZONE.to_string(), me.zone.clone()),
            (keys::HOST.to_string(), me.host.clone()),
            (keys::WEIGHT.to_string(), me.weight.to_string()),
            (keys::STATUS.to_string(), me.status.as_str().to_string()),
        ];
        let handle = chitchat::spawn_chitchat(chitchat_config, initial, transport)
            .await
            .map_err(|e| Error::Start(e.to_string()))?;
        let (tx, view) = watch::channel(Arc::new(View::default()));
        let chitchat = handle.chitchat();
        // The view is rebuilt a few times per gossip round, so liveness
        // changes reach routing within a fraction of the interval.
        let period = (interval / 4).max(Duration::from_millis(50));
        let refresh = Arc::new(tokio::sync::Notify::new());
        let wake = refresh.clone();
        // A refresh more than `max_pause` late (at least two gossip
        // rounds, eight refresh periods) is a stall of this node.
        let mut pause = LocalPause::new(interval, config.phi_threshold);
        let refresher = tokio::spawn(async move {
            let mut beats = Heartbeats::default();
            let mut tick = tokio::time::interval(period);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    _ = tick.tick() => {}
                    _ = wake.notified() => {}
                }
                let now = std::time::Instant::now();
                if let Some(stall) = pause.refresh(now) {
                    // The stall is no silence of the peers: their phi
                    // counts from when this node ran again.
                    beats.forgive(stall);
                }
                let next = {
                    let guard = chitchat.lock().await;
                    let live: std::collections::HashSet<&ChitchatId> = guard.live_nodes().collect();
                    build_view(guard.node_states().iter().map(|(id, state)| {
                        let beat = u64::from(state.heartbeat());
                        RawNode {
                            node_id: &id.node_id,
                            generation: id.generation_id,
                            gossip_addr: id.gossip_advertise_addr,
                            alive: pause.alive(id, beat, live.contains(id), now),
                            phi: beats.phi(id, beat),
                            kv: state
                                .key_values()
                                .map(|(k, v)| (k.to_string(), v.to_string()))
                                .collect::<BTreeMap<_, _>>(),
                        }
                    }))
                };
                if **tx.borrow() != next {
                    tx.send_replace(Arc::new(next));
                }
                if tx.is_closed() {
                    break;
                }
            }
        });
        Ok(Membership {
            handle,
            view,
            refresher,
            refresh,
        })
    }

    /// The current view.
    pub fn view(&self) -> Arc<View> {
        self.view.borrow().clone()
    }

    /// A receiver notified whenever the view changes.
    pub fn subscribe(&self) -> watch::Receiver<Arc<View>> {
        self.view.clone()
    }

    /// Publishes a new lifecycle status for this node.
    pub async fn set_status(&self, status: NodeStatus) {
        self.publish(keys::STATUS, status.as_str()).await;
    }

    /// Publishes (or replaces) an arbitrary key about this node, e.g. load
    /// or cache figures. Keys of [`NodeInfo`] are set by their own methods.
    pub async fn publish(&self, key: &str, value: &str) {
        self.handle
            .with_chitchat(|c| c.self_node_state().set(key, value))
            .await;
    }

    /// A cloneable handle that publishes this node's keys, for tasks that
    /// outlive a borrow of the membership.
    pub fn publisher(&self) -> Publisher {
        Publisher {
            chitchat: self.handle.chitchat(),
            refresh: self.refresh.clone(),
        }
    }

    /// Stops gossiping.
    pub async fn shutdown(self) {
        self.refresher.abort();
        let _ = self.handle.shutdown().await;
    }
}

/// The heartbeats seen per node, for its phi: chitchat keeps its own phi
/// private, so the view computes the same quantity from the heartbeat
/// values it reads (time since the heartbeat last advanced over the mean
/// interval between advances).
#[derive(Default)]
struct Heartbeats {
    /// Node -> (last heartbeat, when it advanced, mean interval in s).
    seen: std::collections::HashMap<ChitchatId, (u64, std::time::Instant, Option<f64>)>,
}

/// Weight of a new interval in the mean.
const INTERVAL_ALPHA: f64 = 0.1;

impl Heartbeats {
    /// This node stalled for `stall`: that time is no silence of the
    /// peers, so it counts neither in their phi nor in their mean interval.
    fn forgive(&mut self, stall: std::time::Duration) {
        for entry in self.seen.values_mut() {
            entry.1 = entry.1.checked_add(stall).unwrap_or(entry.1);
        }
    }

    /// Notes `beat` of `id` now; its phi.
    fn phi(&mut self, id: &ChitchatId, beat: u64) -> Option<f64> {
        let now = std::time::Instant::now();
        let entry = self.seen.entry(id.clone()).or_insert((beat, now, None));
        if beat != entry.0 {
            let interval = now.duration_since(entry.1).as_secs_f64();
            entry.2 = Some(match entry.2 {
                Some(mean) => INTERVAL_ALPHA * interval + (1.0 - INTERVAL_ALPHA) * mean,
                None => interval,
            });
            entry.0 = beat;
            entry.1 = now;
        }
        let mean = entry.2?;
        (mean > 0.0).then(|| now.duration_since(entry.1).as_secs_f64() / mean)
    }
}
