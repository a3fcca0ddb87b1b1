//! The membership view: one entry per node id, its newest incarnation.

use std::collections::BTreeMap;
use std::net::SocketAddr;

use kv_types::{Member, NodeId, NodeStatus};
use tracing::debug;

use crate::keys;
use crate::membership::NodeInfo;

/// One node as this node currently sees it.
#[derive(Clone, Debug, PartialEq)]
pub struct MemberState {
    /// What the node publishes about itself.
    pub info: NodeInfo,
    /// chitchat generation of the incarnation shown (newest seen).
    pub generation: u64,
    /// Address the node gossips and serves peers on.
    pub gossip_addr: SocketAddr,
    /// Whether the phi-accrual failure detector believes it alive; after
    /// a stall of this node, a peer alive before it stays alive until fresh
    /// heartbeats convince the detector again, or until it has been silent
    /// for a conviction time since (CASSANDRA-9183's rule).
    pub alive: bool,
    /// Its phi now: time since its heartbeat last advanced over the mean
    /// interval between advances (chitchat's own formula); `None` before
    /// two advances were seen. Above half the conviction threshold it is
    /// "suspect" to the router.
    pub phi: Option<f64>,
    /// Every other key the node publishes (load, cache figures, ...).
    pub extra: BTreeMap<String, String>,
}

/// Every known node, keyed by id; a restarted node (new generation)
/// replaces its previous incarnation here.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct View {
    /// Nodes by id.
    pub members: BTreeMap<NodeId, MemberState>,
}

impl View {
    /// Whether `id` is known and alive.
    pub fn is_alive(&self, id: &NodeId) -> bool {
        self.members.get(id).is_some_and(|m| m.alive)
    }

    /// The ring's input: every known node that has not left.
    pub fn ring_members(&self) -> Vec<Member> {
        self.members
            .values()
            .filter(|m| m.info.status != NodeStatus::Left)
            .map(|m| m.info.member())
            .collect()
    }
}

/// One incarnation as chitchat reports it, before grouping.
pub(crate) struct RawNode<'a> {
    pub node_id: &'a str,
    pub generation: u64,
    pub gossip_addr: SocketAddr,
    pub alive: bool,
    pub phi: Option<f64>,
    pub kv: BTreeMap<String, String>,
}

/// Groups incarnations by node id, keeps the newest generation of each, and
/// parses what it publishes; nodes with missing or invalid keys are left out
/// until they publish valid ones.
pub(crate) fn build_view<'a>(nodes: impl IntoIterator<Item = RawNode<'a>>) -> View {
    let mut newest: BTreeMap<&str, RawNode<'a>> = BTreeMap::new();
    for node in nodes {
        match newest.get(node.node_id) {
            Some(seen) if seen.generation >= node.generation => {}
            _ => {
                newest.insert(node.node_id, node);
            }
        }
    }
    let mut view = View::default();
    for (id, mut node) in newest {
        match parse_info(id, &mut node.kv) {
            Ok(info) => {
                view.members.insert(
                    info.id.clone(),
                    MemberState {
                        info,
                        generation: node.generation,
                        gossip_addr: node.gossip_addr,
                        alive: node.alive,
                        phi: node.phi,
                        extra: node.kv,
                    },
                );
            }
            Err(reason) => debug!(node = id, %reason, "node left out of the view"),
        }
    }
    view
}

/// Parses (and removes from `kv`) the keys of [`keys`].
fn parse_info(id: &str, kv: &mut BTreeMap<String, String>) -> Result<NodeInfo, String> {
    let mut take = |k: &str| kv.remove(k).ok_or_else(|| format!("missing key {k}"));
    let id = NodeId::new(id).map_err(|e| e.to_string())?;
    let client_addr = take(keys::CLIENT_ADDR)?
        .parse()
        .map_err(|e| format!("bad client_addr: {e}"))?;
    let zone = take(keys::ZONE)?;
    let host = take(keys::HOST)?;
    let weight = take(keys::WEIGHT)?
        .parse()
        .map_err(|e| format!("bad weight: {e}"))?;
    let status = take(keys::STATUS)?
        .parse()
        .map_err(|e: kv_types::Error| e.to_string())?;
    kv_types::node::check_label("zone", &zone).map_err(|e| e.to_string())?;
    kv_types::node::check_label("host", &host).map_err(|e| e.to_string())?;
    Ok(NodeInfo {
        id,
        client_addr,
        zone,
        host,
        weight,
        status,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw<'a>(id: &'a str, generation: u64, alive: bool, status: &str) -> RawNode<'a> {
        let kv = [
            (keys::CLIENT_ADDR, "127.0.0.1:7001"),
            (keys::ZONE, "z1"),
            (keys::HOST, "h1"),
            (keys::WEIGHT, "1"),
            (keys::STATUS, status),
            ("load", "0.5"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        RawNode {
            node_id: id,
            generation,
            gossip_addr: "127.0.0.1:7001".parse().unwrap(),
            alive,
            phi: None,
            kv,
        }
    }

    #[test]
    fn the_newest_incarnation_replaces_the_old_one() {
        let view = build_view([raw("node1", 5, false, "UP"), raw("node1", 9, true, "UP")]);
        let m = &view.members[&NodeId::new("node1").unwrap()];
        assert_eq!(m.generation, 9);
        assert!(m.alive);
        // Order does not matter.
        let view2 = build_view([raw("node1", 9, true, "UP"), raw("node1", 5, false, "UP")]);
        assert_eq!(view, view2);
        // A dead newest incarnation is dead, even if an old one looked alive.
        let view3 = build_view([raw("node1", 5, true, "UP"), raw("node1", 9, false, "UP")]);
        assert!(!view3.members[&NodeId::new("node1").unwrap()].alive);
    }

    #[test]
    fn incomplete_or_invalid_nodes_are_left_out() {
        let mut missing = raw("node2", 1, true, "UP");
        missing.kv.remove(keys::ZONE);
        let view = build_view([
            missing,
            raw("Bad Id", 1, true, "UP"),
            raw("node3", 1, true, "NOPE"),
        ]);
        assert!(view.members.is_empty());
    }

    #[test]
    fn left_nodes_are_not_ring_members_and_extras_are_kept() {
        let view = build_view([raw("node1", 1, true, "UP"), raw("node2", 1, false, "LEFT")]);
        let ids: Vec<_> = view.ring_members().into_iter().map(|m| m.id).collect();
        assert_eq!(ids, vec![NodeId::new("node1").unwrap()]);
        assert_eq!(
            view.members[&NodeId::new("node1").unwrap()].extra["load"],
            "0.5"
        );
    }
}
