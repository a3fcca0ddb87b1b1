//! Where keys live while membership changes: two rings.
//!
//! - The **current** ring is built from the nodes that hold data: UP and
//!   DRAINING ones (a draining node keeps serving what it holds). Reads are
//!   answered by its replicas and only they coordinate writes (they hold the
//!   keys' clocks).
//! - The **target** ring is built from the nodes that will own data: JOINING
//!   and UP ones (the router gives DRAINING and LEFT nodes no ownership).
//!
//! When nobody joins or drains, both rings are the same ring. Otherwise a
//! partition whose target replicas differ from its current ones is
//! *pending* for the target-only nodes ("pending ranges", as in Cassandra):
//! writes also go to them and need W + (number of pending replicas) acks,
//! so that a write acknowledged during the move is on W of the new owners
//! once the move completes; reads back-fill them (within a rate, see
//! `Coordinator::read`); and they pull the partition from its current
//! holders (see `transfer`). A
//! joining node becomes UP when it has pulled every pending partition; a
//! draining node becomes LEFT when every node has.

use std::sync::Arc;

use kv_router::{Ring, RingSettings};
use kv_types::{Member, NodeId, NodeStatus};

/// The two rings of one membership.
#[derive(Debug)]
pub struct Placement {
    /// Data holders' ring (UP, DRAINING).
    pub current: Arc<Ring>,
    /// Future owners' ring (JOINING, UP).
    pub target: Arc<Ring>,
}

/// The replicas of one partition.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Replicas {
    /// The current ring's preference list.
    pub current: Vec<NodeId>,
    /// Target replicas that are not current ones (empty when stable).
    pub pending: Vec<NodeId>,
}

impl Replicas {
    /// Current replicas, then pending ones.
    pub fn all(&self) -> Vec<NodeId> {
        self.current
            .iter()
            .chain(self.pending.iter())
            .cloned()
            .collect()
    }
}

impl Placement {
    /// Builds both rings from the members (statuses included).
    ///
    /// When no member holds data yet (a cluster whose every node is
    /// joining), the current ring is the target ring: there is nothing to
    /// pull, so joining nodes own their partitions at once.
    ///
    /// # Errors
    /// When no member may own partitions at all.
    pub fn build(config: RingSettings, members: &[Member]) -> kv_router::Result<Self> {
        let target = Ring::build(config, members)?;
        let holders: Vec<Member> = members
            .iter()
            .filter(|m| matches!(m.status, NodeStatus::Up | NodeStatus::Draining))
            .map(|m| Member {
                status: NodeStatus::Up,
                ..m.clone()
            })
            .collect();
        let current = if holders.iter().any(|m| m.weight > 0) {
            Ring::build(config, &holders)?
        } else {
            target.clone()
        };
        Ok(Placement {
            current: Arc::new(current),
            target: Arc::new(target),
        })
    }

    /// The version of this placement, which every answer carries: the
    /// target ring's version while nothing moves (what `kvctl status`
    /// shows), else the xxh3 of both rings' versions, so that it changes
    /// when either ring does.
    pub fn version(&self) -> u64 {
        if !self.is_moving() {
            return self.target.version();
        }
        let mut bytes = [0u8; 16];
        bytes[..8].copy_from_slice(&self.current.version().to_be_bytes());
        bytes[8..].copy_from_slice(&self.target.version().to_be_bytes());
        kv_types::key_hash(&bytes)
    }

    /// Whether `node` replicates `key` now or once the move completes (a
    /// current or pending replica of its partition).
    pub fn owns(&self, node: &NodeId, key: &[u8]) -> bool {
        let p = self.target.key_partition(key);
        self.current.preference_list(p).contains(node)
            || self.target.preference_list(p).contains(node)
    }

    /// Whether a membership change is in progress.
    pub fn is_moving(&self) -> bool {
        self.current.version() != self.target.version()
    }

    /// The replicas of partition `p`.
    pub fn replicas(&self, p: u32) -> Replicas {
        let current = self.current.preference_list(p).to_vec();
        let pending = self
            .target
            .preference_list(p)
            .iter()
            .filter(|id| !current.contains(id))
            .cloned()
            .collect();
        Replicas { current, pending }
    }

    /// The replicas of `key`'s partition.
    pub fn key_replicas(&self, key: &[u8]) -> (u32, Replicas) {
        let p = self.target.key_partition(key);
        (p, self.replicas(p))
    }

    /// Partitions that `node` must still receive: it is a target replica of
    /// them but not a current one.
    pub fn pending_for(&self, node: &NodeId) -> Vec<u32> {
        (0..self.target.partitions())
            .filter(|p| {
                self.target.preference_list(*p).contains(node)
                    && !self.current.preference_list(*p).contains(node)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn member(id: &str, zone: &str, status: NodeStatus) -> Member {
        Member {
            id: NodeId::new(id).unwrap(),
            zone: zone.into(),
            host: id.into(),
            weight: 1,
            status,
        }
    }

    fn config() -> RingSettings {
        RingSettings {
            partitions: 64,
            replicas: 3,
            zone_redundancy: 2,
        }
    }

    #[test]
    fn a_stable_cluster_has_one_ring_and_nothing_pending() {
        let members: Vec<Member> = (1..=4)
            .map(|i| {
                member(
                    &format!("node{i}"),
                    if i % 2 == 0 { "a" } else { "b" },
                    NodeStatus::Up,
                )
            })
            .collect();
        let p = Placement::build(config(), &members).unwrap();
        assert!(!p.is_moving());
        assert_eq!(p.version(), p.target.version());
        assert!((0..64).all(|i| p.replicas(i).pending.is_empty()));
    }

    #[test]
    fn a_joining_node_is_pending_where_it_will_own_and_current_nowhere() {
        let mut members: Vec<Member> = (1..=4)
            .map(|i| {
                member(
                    &format!("node{i}"),
                    if i % 2 == 0 { "a" } else { "b" },
                    NodeStatus::Up,
                )
            })
            .collect();
        members.push(member("node5", "c", NodeStatus::Joining));
        let p = Placement::build(config(), &members).unwrap();
        let n5 = NodeId::new("node5").unwrap();
        assert!(p.is_moving());
        let pending = p.pending_for(&n5);
        assert!(!pending.is_empty());
        for part in 0..64 {
            let r = p.replicas(part);
            assert!(!r.current.contains(&n5));
            assert_eq!(r.pending.contains(&n5), pending.contains(&part));
        }
    }

    #[test]
    fn a_draining_node_holds_data_but_owns_nothing_in_the_target() {
        let mut members: Vec<Member> = (1..=4)
            .map(|i| {
                member(
                    &format!("node{i}"),
                    if i % 2 == 0 { "a" } else { "b" },
                    NodeStatus::Up,
                )
            })
            .collect();
        members[3].status = NodeStatus::Draining;
        let p = Placement::build(config(), &members).unwrap();
        let n4 = NodeId::new("node4").unwrap();
        assert!(p.is_moving());
        assert_ne!(p.version(), p.target.version());
        assert_ne!(p.version(), p.current.version());
        assert!(p.current.ownership_share(&n4) > 0.0);
        assert_eq!(p.target.ownership_share(&n4), 0.0);
        assert!(p.pending_for(&n4).is_empty());
    }

    #[test]
    fn an_all_joining_cluster_owns_at_once() {
        let members: Vec<Member> = (1..=3)
            .map(|i| {
                member(
                    &format!("node{i}"),
                    if i % 2 == 0 { "a" } else { "b" },
                    NodeStatus::Joining,
                )
            })
            .collect();
        let p = Placement::build(config(), &members).unwrap();
        assert!(!p.is_moving());
    }
}
