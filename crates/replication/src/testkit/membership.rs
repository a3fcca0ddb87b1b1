//! An in-memory [`Membership`]: what every node announces is seen by every
//! other node at once, and the test decides liveness (the failure detector
//! a running node gets from chitchat's phi accrual), per observer if it
//! likes.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use kv_types::{Member, NodeId};
use tokio::sync::watch;

use crate::membership::{Announcement, Membership, PeerState, View};

/// The shared membership of a test cluster.
#[derive(Clone, Default)]
pub struct MemoryMembership {
    inner: Arc<Mutex<State>>,
}

#[derive(Default)]
struct State {
    /// What each node announced, as others see it (liveness aside).
    nodes: BTreeMap<NodeId, PeerState>,
    /// Transfer progress each node announced, `(done, total)`.
    transfer: BTreeMap<NodeId, (u64, u64)>,
    /// Liveness overrides: `(observer, target) -> alive`; `None` as the
    /// observer applies to everyone.
    liveness: BTreeMap<(Option<NodeId>, NodeId), bool>,
    /// Each node's view channel.
    views: BTreeMap<NodeId, watch::Sender<Arc<View>>>,
    /// Joins so far: each join is a new process generation (as chitchat
    /// gives a restarted node a larger generation id).
    joins: u64,
}

impl State {
    fn alive(&self, observer: &NodeId, target: &NodeId) -> bool {
        if observer == target {
            return true;
        }
        self.liveness
            .get(&(Some(observer.clone()), target.clone()))
            .or_else(|| self.liveness.get(&(None, target.clone())))
            .copied()
            .unwrap_or(true)
    }

    fn view_of(&self, observer: &NodeId) -> View {
        let members = self
            .nodes
            .iter()
            .map(|(id, state)| {
                let mut state = state.clone();
                state.alive = self.alive(observer, id);
                (id.clone(), state)
            })
            .collect();
        View { members }
    }

    /// Publishes every node's view (only changed ones wake their readers).
    fn publish(&self) {
        for (observer, tx) in &self.views {
            let view = self.view_of(observer);
            tx.send_if_modified(|old| {
                if **old == view {
                    return false;
                }
                *old = Arc::new(view);
                true
            });
        }
    }
}

impl MemoryMembership {
    /// An empty membership.
    pub fn new() -> Self {
        MemoryMembership::default()
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// `me` joins (or rejoins after a restart): the membership as it uses
    /// it. Each join shows a new, larger process generation.
    pub fn join(&self, me: &Member) -> Arc<dyn Membership> {
        let mut state = self.state();
        state.joins += 1;
        let generation = Some(state.joins);
        let entry = state.nodes.entry(me.id.clone()).or_insert(PeerState {
            member: me.clone(),
            alive: true,
            incarnation: None,
            removed: Vec::new(),
            suspect: false,
            generation,
            report: None,
        });
        entry.member = me.clone();
        entry.generation = generation;
        let view = state.view_of(&me.id);
        let (tx, _) = watch::channel(Arc::new(view));
        state.views.insert(me.id.clone(), tx);
        state.publish();
        Arc::new(Handle {
            membership: self.clone(),
            me: me.id.clone(),
        })
    }

    /// Sets whether `target` looks alive to `observer` (`None`: to every
    /// node without an override of its own).
    pub fn set_alive(&self, observer: Option<&NodeId>, target: &NodeId, alive: bool) {
        let mut state = self.state();
        state
            .liveness
            .insert((observer.cloned(), target.clone()), alive);
        state.publish();
    }

    /// Marks `target` suspect (phi above half the threshold) or not, to
    /// every node.
    pub fn set_suspect(&self, target: &NodeId, suspect: bool) {
        let mut state = self.state();
        if let Some(node) = state.nodes.get_mut(target) {
            node.suspect = suspect;
        }
        state.publish();
    }

    /// Removes every liveness override: every node looks alive again.
    pub fn all_alive(&self) {
        let mut state = self.state();
        state.liveness.clear();
        state.publish();
    }

    /// The view `observer` has now.
    pub fn view_of(&self, observer: &NodeId) -> View {
        self.state().view_of(observer)
    }

    /// The transfer progress `id` announced last, `(done, total)`.
    pub fn transfer_of(&self, id: &NodeId) -> Option<(u64, u64)> {
        self.state().transfer.get(id).copied()
    }
}

/// The membership as one node uses it.
struct Handle {
    membership: MemoryMembership,
    me: NodeId,
}

#[async_trait::async_trait]
impl Membership for Handle {
    fn views(&self) -> watch::Receiver<Arc<View>> {
        let mut state = self.membership.state();
        let view = state.view_of(&self.me);
        state
            .views
            .entry(self.me.clone())
            .or_insert_with(|| watch::channel(Arc::new(view)).0)
            .subscribe()
    }

    async fn announce(&self, announcement: Announcement) {
        let mut state = self.membership.state();
        match announcement {
            Announcement::Transfer { done, total } => {
                state.transfer.insert(self.me.clone(), (done, total));
                return;
            }
            Announcement::Status(status) => {
                if let Some(node) = state.nodes.get_mut(&self.me) {
                    node.member.status = status;
                }
            }
            Announcement::Incarnation(incarnation) => {
                if let Some(node) = state.nodes.get_mut(&self.me) {
                    node.incarnation = Some(incarnation);
                }
            }
            Announcement::Removed(list) => {
                if let Some(node) = state.nodes.get_mut(&self.me) {
                    node.removed = list;
                }
            }
            Announcement::Report(report) => {
                if let Some(node) = state.nodes.get_mut(&self.me) {
                    node.report = Some((report, tokio::time::Instant::now()));
                }
            }
        }
        state.publish();
    }
}
