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
//! A quorum read answers the merged object, whose siblings carry their
//! write times, so `newest` needs no extra round.

use std::str::FromStr;

use kv_types::Object;

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

/// The newest live sibling of `object`: the highest `written_at_ms`, then
/// the greatest bytes; `None` when every version is a tombstone.
pub fn newest(object: &Object) -> Option<&[u8]> {
    object
        .values()
        .filter_map(|s| s.data.as_deref().map(|d| (s.written_at_ms, d)))
        .max()
        .map(|(_, d)| d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn newest_by_time_then_by_bytes() {
        use kv_types::{Actor, NodeId, Sibling, VersionVector};
        let actor = |n: &str| Actor {
            node: NodeId::new(n).unwrap(),
            incarnation: 1,
        };
        let blind = |o: Object, n: &str, data: Option<&[u8]>, t| {
            o.update(
                &VersionVector::new(),
                &actor(n),
                Sibling {
                    data: data.map(<[u8]>::to_vec),
                    written_at_ms: t,
                },
            )
        };
        let o = blind(Object::new(), "node1", Some(b"a"), 30);
        let o = blind(o, "node2", Some(b"b"), 10);
        let o = blind(o, "node3", Some(b"c"), 30);
        assert_eq!(newest(&o), Some(&b"c"[..]));
        // A newer tombstone is not a value.
        let o = blind(o, "node4", None, 99);
        assert_eq!(newest(&o), Some(&b"c"[..]));
        assert_eq!(newest(&blind(Object::new(), "node1", None, 5)), None);
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
