//! The value RESP returns for a key with siblings.
//!
//! RESP has no way to return several versions, so the listener applies a
//! configured rule (`[resp] siblings`):
//!
//! - `newest` (default): the sibling with the highest `written_at_ms` (the
//!   wall-clock time of the write at its coordinating replica); on a tie the
//!   greatest value by bytes, so every node picks the same one.
//! - `error`: `-ERR` naming how many siblings there are and how to resolve
//!   them (`kvctl get KEY`, then `kvctl put KEY VALUE --context CTX`).
//!
//! Either way the rule only picks what to *answer*: the siblings stay in
//! storage until a write resolves them (a RESP `SET` does: it supersedes
//! every version its coordinating replica holds). Wall clocks pick nothing
//! else in this store.
//!
//! A quorum read answers the sibling values without their timestamps, so
//! for `newest` the listener asks the key's live replicas for their stored
//! versions (one extra round, only for keys that have siblings) and looks
//! the timestamps up there; a value no replica reports (a race with a
//! write) counts as written at time 0.

use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use futures::future::join_all;
use kv_wire::{PeerRequest, Response};

use crate::cluster::Cluster;
use crate::peers::Peers;

/// What RESP answers for a key with siblings.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SiblingRule {
    /// The most recently written sibling (ties: the greatest bytes).
    #[default]
    Newest,
    /// An error naming the sibling count.
    Error,
}

impl FromStr for SiblingRule {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "newest" => Ok(SiblingRule::Newest),
            "error" => Ok(SiblingRule::Error),
            other => Err(format!(
                "unknown sibling rule {other:?}: use newest or error"
            )),
        }
    }
}

impl SiblingRule {
    /// The name used in the config file and INFO.
    pub fn as_str(self) -> &'static str {
        match self {
            SiblingRule::Newest => "newest",
            SiblingRule::Error => "error",
        }
    }
}

/// The message of the `error` rule.
pub fn conflict_message(key: &[u8], count: usize) -> String {
    format!(
        "key '{}' has {count} concurrent values (siblings); RESP cannot return them: read them with `kvctl get KEY` and resolve with `kvctl put KEY VALUE --context CTX`, or overwrite with SET",
        String::from_utf8_lossy(&key[..key.len().min(64)])
    )
}

/// Picks the newest of `values` given `(value, written_at_ms)` pairs known
/// from the replicas: highest timestamp, then greatest bytes.
pub fn newest<'a>(values: &'a [Vec<u8>], stamps: &[(Vec<u8>, u64)]) -> Option<&'a [u8]> {
    let stamp = |v: &[u8]| {
        stamps
            .iter()
            .filter(|(data, _)| data.as_slice() == v)
            .map(|(_, t)| *t)
            .max()
            .unwrap_or(0)
    };
    values
        .iter()
        .map(|v| (stamp(v), v.as_slice()))
        .max()
        .map(|(_, v)| v)
}

/// The `(value, written_at_ms)` of every live version the key's live
/// replicas store, asked concurrently (each within `timeout`).
pub async fn stamps(
    cluster: &Cluster,
    peers: &Arc<Peers>,
    request_id: u64,
    key: &[u8],
    timeout: Duration,
) -> Vec<(Vec<u8>, u64)> {
    let ring = cluster.ring();
    let replicas: Vec<_> = ring
        .key_preference_list(key)
        .iter()
        .filter(|id| cluster.is_alive(id))
        .cloned()
        .collect();
    let calls = replicas.iter().map(|id| {
        let request = PeerRequest::ReplicaGet { key: key.to_vec() };
        peers.call(id, request_id, request, timeout)
    });
    let mut out = Vec::new();
    for answer in join_all(calls).await {
        if let Ok(Response::Object(Some(object))) = answer {
            for sibling in object.values() {
                if let Some(data) = &sibling.data {
                    out.push((data.clone(), sibling.written_at_ms));
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn newest_by_time_then_by_bytes() {
        let values = vec![b"a".to_vec(), b"b".to_vec(), b"c".to_vec()];
        let stamps = vec![
            (b"a".to_vec(), 30),
            (b"b".to_vec(), 10),
            (b"c".to_vec(), 30),
        ];
        assert_eq!(newest(&values, &stamps), Some(&b"c"[..]));
        // Unknown timestamps count as 0.
        assert_eq!(newest(&values, &[(b"a".to_vec(), 1)]), Some(&b"a"[..]));
        assert_eq!(newest(&values, &[]), Some(&b"c"[..]));
        assert_eq!(newest(&[], &stamps), None);
    }

    #[test]
    fn rules_parse_and_print() {
        for rule in [SiblingRule::Newest, SiblingRule::Error] {
            assert_eq!(rule.as_str().parse::<SiblingRule>(), Ok(rule));
        }
        assert!("lww".parse::<SiblingRule>().is_err());
        assert!(conflict_message(b"k", 2).contains("2 concurrent values"));
    }
}
