//! Node identities and the membership record every node publishes.

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::{Error, Result};

/// The stable identity of a node, such as `node1`.
///
/// A lowercase DNS label (1..=63 characters of `a-z`, `0-9` and `-`, starting
/// with a letter and not ending with `-`), because it is also the DNS subject
/// alternative name of the node's certificate. It survives restarts and data
/// loss; the *incarnation* (see [`crate::Actor`]) is what changes with a new
/// data directory.
///
/// Shared text (`Arc<str>`): node ids are cloned into every routing
/// decision, peer call and map entry on the request path, and a clone is
/// a reference count, not an allocation.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct NodeId(Arc<str>);

impl NodeId {
    /// Validates and wraps `id`.
    ///
    /// # Errors
    /// [`Error::InvalidNodeId`] when `id` is not a lowercase DNS label.
    pub fn new(id: impl Into<String>) -> Result<Self> {
        let id = id.into();
        let reject = |reason| {
            Err(Error::InvalidNodeId {
                id: id.chars().take(80).collect(),
                reason,
            })
        };
        if id.is_empty() || id.len() > 63 {
            return reject("must be 1..=63 characters");
        }
        if !id
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        {
            return reject("only a-z, 0-9 and '-' are allowed");
        }
        if !id.as_bytes()[0].is_ascii_lowercase() {
            return reject("must start with a letter");
        }
        if id.ends_with('-') {
            return reject("must not end with '-'");
        }
        Ok(NodeId(Arc::from(id)))
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for NodeId {
    type Error = Error;
    fn try_from(value: String) -> Result<Self> {
        NodeId::new(value)
    }
}

impl From<NodeId> for String {
    fn from(value: NodeId) -> String {
        value.0.to_string()
    }
}

impl FromStr for NodeId {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        NodeId::new(s)
    }
}

impl fmt::Display for NodeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for NodeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.0)
    }
}

/// Checks a zone or host label: 1..=64 printable ASCII characters, no spaces.
///
/// # Errors
/// [`Error::InvalidLabel`] naming `what` (`"zone"` or `"host"`).
pub fn check_label(what: &'static str, label: &str) -> Result<()> {
    let ok = !label.is_empty() && label.len() <= 64 && label.bytes().all(|b| b.is_ascii_graphic());
    if ok {
        Ok(())
    } else {
        Err(Error::InvalidLabel {
            what,
            label: label.chars().take(80).collect(),
        })
    }
}

/// Where a node is in its life in the cluster (design.md, Membership).
///
/// Only `Up` and `Joining` nodes take new ownership in the ring; `Draining`
/// nodes keep serving what they hold while it streams away; `Left` nodes are
/// gone for good and never come back under the same incarnation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum NodeStatus {
    /// Started, claims partitions; data may still be streaming to it.
    Joining,
    /// A full member.
    Up,
    /// Leaving: takes no new ownership, streams its data away.
    Draining,
    /// Left the cluster; owns nothing.
    Left,
}

impl NodeStatus {
    /// The upper-case name used in gossip, JSON and tables: `JOINING`, `UP`,
    /// `DRAINING`, `LEFT`.
    pub fn as_str(self) -> &'static str {
        match self {
            NodeStatus::Joining => "JOINING",
            NodeStatus::Up => "UP",
            NodeStatus::Draining => "DRAINING",
            NodeStatus::Left => "LEFT",
        }
    }

    /// Whether a node in this status may own partitions of the ring.
    pub fn takes_ownership(self) -> bool {
        matches!(self, NodeStatus::Joining | NodeStatus::Up)
    }
}

impl fmt::Display for NodeStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for NodeStatus {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "JOINING" => Ok(NodeStatus::Joining),
            "UP" => Ok(NodeStatus::Up),
            "DRAINING" => Ok(NodeStatus::Draining),
            "LEFT" => Ok(NodeStatus::Left),
            _ => Err(Error::Decode(format!("unknown node status {s:?}"))),
        }
    }
}

/// What the ring needs to know about one node: the input of partition claim
/// and preference lists. Liveness is deliberately absent: a node that is down
/// keeps its partitions (sloppy quorum covers for it); only status changes
/// ownership.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Member {
    /// Stable node id.
    pub id: NodeId,
    /// Failure domain (availability zone); replicas spread over zones.
    pub zone: String,
    /// Physical machine; several nodes may share one.
    pub host: String,
    /// Relative capacity; partitions are claimed in proportion to it
    /// (1..=1000, 0 means "owns nothing").
    pub weight: u32,
    /// Lifecycle status.
    pub status: NodeStatus,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_ids_are_dns_labels() {
        for good in ["node1", "a", "n-1", "x0123456789"] {
            assert!(NodeId::new(good).is_ok(), "{good}");
        }
        for bad in [
            "",
            "Node1",
            "1node",
            "node-",
            "no de",
            "nodé",
            &"a".repeat(64),
        ] {
            assert!(NodeId::new(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn node_id_deserialization_validates() {
        let bytes = crate::codec::encode(&"Bad Id".to_string()).unwrap();
        assert!(crate::codec::decode::<NodeId>(&bytes).is_err());
        let bytes = crate::codec::encode(&"node7".to_string()).unwrap();
        assert_eq!(
            crate::codec::decode::<NodeId>(&bytes).unwrap().as_str(),
            "node7"
        );
    }

    #[test]
    fn status_names_round_trip() {
        for s in [
            NodeStatus::Joining,
            NodeStatus::Up,
            NodeStatus::Draining,
            NodeStatus::Left,
        ] {
            assert_eq!(s.as_str().parse::<NodeStatus>().unwrap(), s);
        }
    }

    #[test]
    fn labels_are_checked() {
        assert!(check_label("zone", "zone-a").is_ok());
        assert!(check_label("zone", "").is_err());
        assert!(check_label("host", "has space").is_err());
    }
}
