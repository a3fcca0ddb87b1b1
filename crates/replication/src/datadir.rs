//! Whose data a data directory holds, and whether its metadata survived.
//!
//! A data directory records its node id and cluster id (metadata
//! `identity`) beside its incarnation (metadata `incarnation`, the random
//! half of this node's clock actor). At open:
//!
//! - an identity naming another node or cluster refuses the start, with
//!   or without a rebuild (the directory is somebody else's data);
//! - a missing or damaged incarnation while the directory holds data
//!   (objects, hints, a status, a ring, an identity), or a damaged
//!   identity, refuses the start: an empty or foreign store must never be
//!   served as this node's data, and a lost incarnation means a lost
//!   clock actor. With `rebuild` the node takes a new incarnation instead
//!   (a new clock actor, so no dot is ever reused) and keeps whatever is
//!   readable; anti-entropy and hinted handoff refill the rest;
//! - a new, empty directory gets a fresh incarnation and the identity;
//! - a directory from before identities were recorded (an incarnation, no
//!   identity) gets the identity recorded.

use kv_storage::Storage;
use kv_types::NodeId;
use tracing::{info, warn};

use crate::cluster::{RING_META, STATUS_META};
use crate::{Error, Result};

/// Metadata key of the data directory's incarnation.
pub(crate) const INCARNATION_META: &str = "incarnation";

/// Metadata key of the data directory's owner: node id and cluster id.
pub(crate) const IDENTITY_META: &str = "identity";

/// Format byte of the identity record.
const IDENTITY_FORMAT: u8 = 1;

/// Whose data a directory holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Identity {
    pub node: String,
    pub cluster: String,
}

impl Identity {
    /// `[format = 1][node id length: u8][node id][cluster id]`, UTF-8.
    fn encode(&self) -> Vec<u8> {
        let node = self.node.as_bytes();
        let mut out = Vec::with_capacity(2 + node.len() + self.cluster.len());
        out.push(IDENTITY_FORMAT);
        out.push(u8::try_from(node.len()).unwrap_or(u8::MAX));
        out.extend_from_slice(&node[..node.len().min(255)]);
        out.extend_from_slice(self.cluster.as_bytes());
        out
    }

    fn decode(bytes: &[u8]) -> std::result::Result<Identity, String> {
        let [format, len, rest @ ..] = bytes else {
            return Err(format!("{} bytes, too short", bytes.len()));
        };
        if *format != IDENTITY_FORMAT {
            return Err(format!("unknown format {format}"));
        }
        let len = usize::from(*len);
        if rest.len() < len {
            return Err("truncated".into());
        }
        let (node, cluster) = rest.split_at(len);
        let text = |b: &[u8]| String::from_utf8(b.to_vec()).map_err(|_| "not UTF-8".to_string());
        Ok(Identity {
            node: text(node)?,
            cluster: text(cluster)?,
        })
    }
}

/// A metadata record as found: absent, readable, or damaged (why).
enum Found<T> {
    Missing,
    Readable(T),
    Damaged(String),
}

fn read<T>(
    storage: &dyn Storage,
    name: &str,
    parse: impl FnOnce(&[u8]) -> std::result::Result<T, String>,
) -> kv_storage::Result<Found<T>> {
    match storage.get_meta(name) {
        Ok(None) => Ok(Found::Missing),
        Ok(Some(bytes)) => Ok(match parse(&bytes) {
            Ok(value) => Found::Readable(value),
            Err(why) => Found::Damaged(why),
        }),
        Err(e @ kv_storage::Error::Corrupt { .. }) => Ok(Found::Damaged(e.to_string())),
        Err(e) => Err(e),
    }
}

/// What the directory holds besides its incarnation, for the refusal's
/// text; empty when nothing.
fn contents(storage: &dyn Storage, identity_found: bool) -> kv_storage::Result<Vec<String>> {
    let mut held = Vec::new();
    let keys = storage.stats().keys;
    if keys > 0 {
        held.push(format!("{keys} objects"));
    }
    let hints = storage.hint_count();
    if hints > 0 {
        held.push(format!("{hints} hints"));
    }
    for name in [STATUS_META, RING_META] {
        match storage.get_meta(name) {
            Ok(None) => {}
            Ok(Some(_)) | Err(kv_storage::Error::Corrupt { .. }) => {
                held.push(format!("a {name} record"));
            }
            Err(e) => return Err(e),
        }
    }
    if identity_found {
        held.push("an identity record".into());
    }
    Ok(held)
}

/// Checks the data directory behind `storage` against this node (`node`
/// of cluster `cluster`) and answers its incarnation: the stored one, or
/// `fresh` (stored now) for a new directory or a rebuild (see the module
/// docs). The outer error is storage's.
///
/// # Errors
/// [`Error::DataDir`] when the directory is another node's or cluster's,
/// or its incarnation or identity is missing or damaged while it holds
/// data (and `rebuild` is false).
pub(crate) fn open(
    storage: &dyn Storage,
    node: &NodeId,
    cluster: &str,
    rebuild: bool,
    fresh: u64,
) -> kv_storage::Result<Result<u64>> {
    let me = Identity {
        node: node.to_string(),
        cluster: cluster.to_string(),
    };
    let identity = read(storage, IDENTITY_META, Identity::decode)?;
    if let Found::Readable(owner) = &identity
        && *owner != me
    {
        return Ok(Err(Error::DataDir {
            message: format!(
                "this data directory belongs to node {} of cluster {:?}, and this node is {} of cluster {:?}: \
                 refusing to start on another node's or cluster's data (check data_dir, id and cluster_id)",
                owner.node, owner.cluster, me.node, me.cluster
            ),
            rebuildable: false,
        }));
    }
    let incarnation = read(storage, INCARNATION_META, |b| {
        <[u8; 8]>::try_from(b)
            .map(u64::from_be_bytes)
            .map_err(|_| format!("{} bytes, not 8", b.len()))
    })?;
    if rebuild {
        storage.put_meta(INCARNATION_META, &fresh.to_be_bytes())?;
        storage.put_meta(IDENTITY_META, &me.encode())?;
        warn!(
            incarnation = format!("{fresh:016x}"),
            "rebuild: new incarnation; what is missing is refilled from the replicas \
             (anti-entropy, hinted handoff)"
        );
        return Ok(Ok(fresh));
    }
    let refuse = |what: String| Error::DataDir {
        message: format!("{what}: refusing to serve this store as this node's data"),
        rebuildable: true,
    };
    match (incarnation, identity) {
        (Found::Readable(incarnation), Found::Readable(_)) => Ok(Ok(incarnation)),
        (Found::Readable(incarnation), Found::Missing) => {
            storage.put_meta(IDENTITY_META, &me.encode())?;
            info!(node = %me.node, cluster = %me.cluster, "data directory identity recorded");
            Ok(Ok(incarnation))
        }
        (Found::Readable(_), Found::Damaged(why)) => Ok(Err(refuse(format!(
            "the identity record of this data directory is damaged ({why}), so whose data it holds is unknown"
        )))),
        (Found::Damaged(why), _) => Ok(Err(refuse(format!(
            "the incarnation record of this data directory is damaged ({why})"
        )))),
        (Found::Missing, identity) => {
            let held = contents(storage, !matches!(identity, Found::Missing))?;
            if !held.is_empty() {
                return Ok(Err(refuse(format!(
                    "this data directory holds data ({}) but no incarnation record: its metadata is lost",
                    held.join(", ")
                ))));
            }
            storage.put_meta(INCARNATION_META, &fresh.to_be_bytes())?;
            storage.put_meta(IDENTITY_META, &me.encode())?;
            info!(
                incarnation = format!("{fresh:016x}"),
                "new data directory: new incarnation"
            );
            Ok(Ok(fresh))
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use kv_storage::MemoryEngine;
    use kv_types::{Actor, Object, Sibling, VersionVector};

    use super::*;

    fn id(s: &str) -> NodeId {
        NodeId::new(s).unwrap()
    }

    fn refusal(r: Result<u64>) -> (String, bool) {
        match r {
            Err(Error::DataDir {
                message,
                rebuildable,
            }) => (message, rebuildable),
            other => panic!("not a refusal: {other:?}"),
        }
    }

    fn put_object(s: &MemoryEngine) {
        let actor = Actor {
            node: id("node1"),
            incarnation: 1,
        };
        let value = Sibling {
            data: Some(b"v".to_vec()),
            written_at_ms: 0,
        };
        s.update(b"k", &mut |_| {
            Ok(Object::new().update(&VersionVector::new(), &actor, value.clone()))
        })
        .unwrap();
    }

    #[test]
    fn a_new_directory_gets_an_incarnation_and_the_identity_and_keeps_them() {
        let s = MemoryEngine::new();
        let n1 = id("node1");
        assert_eq!(open(&s, &n1, "c1", false, 7).unwrap().unwrap(), 7);
        assert_eq!(open(&s, &n1, "c1", false, 9).unwrap().unwrap(), 7);
    }

    #[test]
    fn another_nodes_or_clusters_directory_is_refused_naming_both() {
        let s = MemoryEngine::new();
        open(&s, &id("node1"), "c1", false, 7).unwrap().unwrap();
        let (text, rebuildable) = refusal(open(&s, &id("node2"), "c1", false, 8).unwrap());
        assert!(text.contains("node1") && text.contains("node2"), "{text}");
        assert!(!rebuildable);
        let (text, _) = refusal(open(&s, &id("node1"), "c2", false, 8).unwrap());
        assert!(text.contains("\"c1\"") && text.contains("\"c2\""), "{text}");
        // Not even a rebuild takes another node's directory.
        let (_, rebuildable) = refusal(open(&s, &id("node2"), "c1", true, 8).unwrap());
        assert!(!rebuildable);
        assert_eq!(open(&s, &id("node1"), "c1", false, 9).unwrap().unwrap(), 7);
    }

    #[test]
    fn data_without_an_incarnation_is_refused_unless_rebuilt() {
        let s = MemoryEngine::new();
        put_object(&s);
        let (text, rebuildable) = refusal(open(&s, &id("node1"), "c1", false, 7).unwrap());
        assert!(
            text.contains("1 objects") && text.contains("no incarnation"),
            "{text}"
        );
        assert!(rebuildable);
        assert_eq!(open(&s, &id("node1"), "c1", true, 8).unwrap().unwrap(), 8);
        assert_eq!(open(&s, &id("node1"), "c1", false, 9).unwrap().unwrap(), 8);
        assert!(s.get(b"k").unwrap().is_some(), "readable data is kept");
    }

    #[test]
    fn a_status_or_identity_without_an_incarnation_is_refused() {
        let s = MemoryEngine::new();
        s.put_meta(STATUS_META, b"UP").unwrap();
        let (text, _) = refusal(open(&s, &id("node1"), "c1", false, 7).unwrap());
        assert!(text.contains("status"), "{text}");
        let s = MemoryEngine::new();
        s.put_meta(
            IDENTITY_META,
            &Identity {
                node: "node1".into(),
                cluster: "c1".into(),
            }
            .encode(),
        )
        .unwrap();
        let (text, _) = refusal(open(&s, &id("node1"), "c1", false, 7).unwrap());
        assert!(text.contains("identity"), "{text}");
    }

    #[test]
    fn damaged_incarnation_or_identity_records_are_refused_unless_rebuilt() {
        let s = MemoryEngine::new();
        open(&s, &id("node1"), "c1", false, 7).unwrap().unwrap();
        s.put_meta(INCARNATION_META, b"abc").unwrap();
        let (text, rebuildable) = refusal(open(&s, &id("node1"), "c1", false, 8).unwrap());
        assert!(
            text.contains("incarnation record") && text.contains("3 bytes"),
            "{text}"
        );
        assert!(rebuildable);
        assert_eq!(open(&s, &id("node1"), "c1", true, 8).unwrap().unwrap(), 8);
        s.put_meta(IDENTITY_META, &[1, 200, b'x']).unwrap();
        let (text, _) = refusal(open(&s, &id("node1"), "c1", false, 9).unwrap());
        assert!(
            text.contains("identity record") && text.contains("truncated"),
            "{text}"
        );
    }

    #[test]
    fn a_directory_from_before_identities_gets_one_recorded() {
        let s = MemoryEngine::new();
        s.put_meta(INCARNATION_META, &5u64.to_be_bytes()).unwrap();
        put_object(&s);
        assert_eq!(open(&s, &id("node1"), "c1", false, 7).unwrap().unwrap(), 5);
        let (text, _) = refusal(open(&s, &id("node3"), "c1", false, 7).unwrap());
        assert!(text.contains("node1"), "{text}");
    }

    #[test]
    fn identities_round_trip() {
        let i = Identity {
            node: "node-1".into(),
            cluster: "prod".into(),
        };
        assert_eq!(Identity::decode(&i.encode()), Ok(i));
        assert!(Identity::decode(&[]).is_err());
        assert!(Identity::decode(&[2, 0]).is_err());
    }
}
