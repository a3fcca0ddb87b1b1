//! The membership seam: who the other nodes are, whether they are alive,
//! and what this node says about itself.
//!
//! A running node implements [`Membership`] on chitchat gossip (liveness
//! from its phi-accrual failure detector only); tests and the simulation
//! implement it in memory ([`crate::testkit::MemoryMembership`]) and decide
//! liveness themselves. The core reads views and announces; it never sees
//! gossip keys.

use std::collections::BTreeMap;
use std::sync::Arc;

use kv_types::{Member, NodeId, NodeStatus};
use tokio::sync::watch;

/// One other node as this node's membership sees it.
#[derive(Clone, Debug, PartialEq)]
pub struct PeerState {
    /// Its ring record (zone, host, weight, lifecycle status).
    pub member: Member,
    /// Whether the failure detector believes it alive.
    pub alive: bool,
    /// The incarnation of its data directory, once it announced it: clock
    /// entries of its older incarnations are retired.
    pub incarnation: Option<u64>,
    /// Nodes it announced an admin removed (treated as LEFT everywhere).
    pub removed: Vec<NodeId>,
    /// Whether its phi is above half the conviction threshold (design
    /// note 003's "suspect" health).
    pub suspect: bool,
    /// The generation of the process shown (chitchat's generation id,
    /// larger for each start of the node), if the membership knows it: the
    /// router tells a restart from a liveness flap by it.
    pub generation: Option<u64>,
    /// Its last load report, and when this node received it.
    pub report: Option<(LoadReport, tokio::time::Instant)>,
}

/// What a node reports about its load every report period (1 s), for the
/// other coordinators' routers.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LoadReport {
    /// CPU use of the process over the last period, 0.0 ..= 1.0 of its
    /// cores.
    pub cpu: f64,
    /// Replica requests accepted and not yet answered.
    pub queue: u32,
    /// Writes applied and not yet flushed.
    pub backlog: u32,
    /// Read-cache hit ratio of the last few report periods (counts
    /// halved every period), 0.0 ..= 1.0.
    pub hit_ratio: f64,
    /// The most read key hashes (decayed counts: the current load's).
    pub hot_keys: Vec<u64>,
    /// Hints it holds, per intended owner (from its last handoff pass).
    pub hints: Vec<(NodeId, u64)>,
    /// Whether it runs an anti-entropy repair pass.
    pub repair: bool,
}

/// Every known node (this one may be among them), keyed by id.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct View {
    /// Nodes by id.
    pub members: BTreeMap<NodeId, PeerState>,
}

impl View {
    /// Whether `id` is known and alive.
    pub fn is_alive(&self, id: &NodeId) -> bool {
        self.members.get(id).is_some_and(|m| m.alive)
    }

    /// Live nodes that hold or will hold data (UP or JOINING), other than
    /// `except`.
    pub fn live_owners<'a>(&'a self, except: &'a [&NodeId]) -> impl Iterator<Item = &'a NodeId> {
        self.members
            .iter()
            .filter(move |(id, m)| {
                !except.contains(id)
                    && m.alive
                    && matches!(m.member.status, NodeStatus::Up | NodeStatus::Joining)
            })
            .map(|(id, _)| id)
    }
}

/// What this node announces about itself.
#[derive(Clone, Debug, PartialEq)]
pub enum Announcement {
    /// Its lifecycle status changed.
    Status(NodeStatus),
    /// The incarnation of its data directory (announced once at start).
    Incarnation(u64),
    /// Its streaming progress: `done` of `total` pending partitions pulled
    /// (`total` 0: nothing to pull).
    Transfer {
        /// Partitions pulled.
        done: u64,
        /// Partitions pending.
        total: u64,
    },
    /// The nodes an admin removed through this node (the whole list).
    Removed(Vec<NodeId>),
    /// Its load, every report period.
    Report(LoadReport),
}

/// Where the core learns the cluster and tells it about itself.
#[async_trait::async_trait]
pub trait Membership: Send + Sync + 'static {
    /// The current view, and every later one.
    fn views(&self) -> watch::Receiver<Arc<View>>;

    /// Tells the other nodes something about this node.
    async fn announce(&self, announcement: Announcement);

    /// A peer answered with a ring other than this node's: bring the view
    /// up to date as soon as possible. The default does nothing (a view
    /// that is pushed on every change is always as fresh as it gets).
    fn refresh(&self) {}
}
