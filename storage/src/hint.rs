//! Hints: writes a fallback node keeps for a replica that was down (sloppy
//! quorum and hinted handoff, design.md, Replication).
//!
//! Hints live in their own tree (`hints`), never among the node's own
//! objects: they do not count as keys, do not enter scans or anti-entropy
//! digests, and are not served by reads. On disk a hint is keyed by
//! `[owner len: u8][owner bytes][key_hash(key): u64 BE][key]`, so the hints
//! of one owner are one contiguous range (grouped by owner, then in ring
//! order), and its value is a hint record ([`crate::record::encode_hint`]:
//! creation time and object, checksummed).
//!
//! Bounds on the number and the age of hints are the node's business (it
//! reads [`crate::Storage::hint_count`] and [`Hint::created_at_ms`], says
//! when they overflow, and drops or refuses hints itself): this crate
//! stores every hint it is given.

use kv_types::{NodeId, Object, key_hash};

use crate::record::{self, RecordError};
use crate::{Error, Result};

/// One hint: a write for `owner` that this node holds until `owner`
/// acknowledges it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hint {
    /// The node the write is meant for (the key's intended replica).
    pub owner: NodeId,
    /// The user key.
    pub key: Vec<u8>,
    /// Every version kept for `owner` (hints for the same key merge).
    pub object: Object,
    /// When the first write of this hint was stored, in milliseconds since
    /// the Unix epoch (the `now_ms` the node passed to
    /// [`crate::Storage::put_hint`]); later merges keep it.
    pub created_at_ms: u64,
}

impl Hint {
    /// Decodes one stored hint from its on-disk key and record, with every
    /// check the engines apply ([`crate::Storage::hints`]).
    ///
    /// # Errors
    /// [`Error::Corrupt`] when the key or the record fails its checks.
    pub fn from_row(disk_key: &[u8], raw: &[u8]) -> Result<Hint> {
        decode_row(disk_key, raw)
    }

    /// The on-disk key and record of this hint, as the engines store it.
    ///
    /// # Errors
    /// [`Error::Encode`] when the object cannot be encoded.
    pub fn to_row(&self) -> Result<(Vec<u8>, Vec<u8>)> {
        Ok((
            disk_key(&self.owner, &self.key),
            record::encode_hint(self.created_at_ms, &self.object)?,
        ))
    }
}

/// A boxed iterator over hints, as returned by [`crate::Storage::hints`]
/// and [`crate::Storage::hints_for`]. A hint whose record fails its checks
/// is yielded as [`Error::Corrupt`] (never as a hint) and iteration goes on.
pub type HintIter<'a> = Box<dyn Iterator<Item = Result<Hint>> + 'a>;

/// The on-disk prefix of every hint for `owner`: `[len][owner bytes]`.
pub(crate) fn owner_prefix(owner: &NodeId) -> Vec<u8> {
    let id = owner.as_str().as_bytes();
    let mut out = Vec::with_capacity(1 + id.len());
    // A node id is a DNS label of at most 63 bytes.
    out.push(u8::try_from(id.len()).unwrap_or(u8::MAX));
    out.extend_from_slice(id);
    out
}

/// The on-disk key of the hint for (`owner`, `key`).
pub(crate) fn disk_key(owner: &NodeId, key: &[u8]) -> Vec<u8> {
    let mut out = owner_prefix(owner);
    out.reserve(8 + key.len());
    out.extend_from_slice(&key_hash(key).to_be_bytes());
    out.extend_from_slice(key);
    out
}

/// Splits an on-disk hint key into owner and user key; `None` when the
/// owner is not a valid node id or the hash prefix does not match.
fn split(disk_key: &[u8]) -> Option<(NodeId, &[u8])> {
    let (&len, rest) = disk_key.split_first()?;
    let (owner, rest) = rest.split_at_checked(usize::from(len))?;
    let owner = NodeId::new(std::str::from_utf8(owner).ok()?).ok()?;
    let key = crate::keyspace::user_key(rest)?;
    Some((owner, key))
}

/// Decodes one stored hint.
///
/// # Errors
/// [`Error::Corrupt`] naming the user key (or the whole on-disk key when it
/// cannot be split) when the key or the record fails its checks.
pub(crate) fn decode_row(disk_key: &[u8], raw: &[u8]) -> Result<Hint> {
    let Some((owner, key)) = split(disk_key) else {
        return Err(Error::Corrupt {
            key: disk_key.to_vec(),
            reason: RecordError::Misplaced,
        });
    };
    match record::decode_hint(raw) {
        Ok((created_at_ms, object)) => Ok(Hint {
            owner,
            key: key.to_vec(),
            object,
            created_at_ms,
        }),
        Err(reason) => {
            tracing::warn!(%owner, key = %key.escape_ascii(), %reason, "corrupt hint skipped");
            Err(Error::Corrupt {
                key: key.to_vec(),
                reason,
            })
        }
    }
}

/// Plans a `put_hint`: the record to store over `raw` (the stored hint, if
/// any), or `None` when nothing changes. A stored hint that fails its
/// checks is replaced (and logged): it could never be delivered anyway.
///
/// # Errors
/// [`Error::Encode`] when the merged hint cannot be encoded.
pub(crate) fn plan_put(
    raw: Option<&[u8]>,
    owner: &NodeId,
    key: &[u8],
    object: &Object,
    now_ms: u64,
) -> Result<Option<Vec<u8>>> {
    let stored = match raw.map(record::decode_hint) {
        None => None,
        Some(Ok(stored)) => Some(stored),
        Some(Err(reason)) => {
            tracing::error!(%owner, key = %key.escape_ascii(), %reason,
                "corrupt hint replaced by a new write for its owner");
            None
        }
    };
    match stored {
        Some((created_at_ms, stored)) => {
            let merged = stored.sync(object);
            if merged == stored {
                return Ok(None);
            }
            record::encode_hint(created_at_ms, &merged).map(Some)
        }
        // Nothing to keep: an empty object carries no write.
        None if object.is_empty() => Ok(None),
        None => record::encode_hint(now_ms, object).map(Some),
    }
}

/// Whether the stored hint `raw` holds exactly `expected`, for
/// `remove_hint_if`.
///
/// # Errors
/// [`Error::Corrupt`] when the stored hint fails its checks.
pub(crate) fn holds(key: &[u8], raw: &[u8], expected: &Object) -> Result<bool> {
    match record::decode_hint(raw) {
        Ok((_, stored)) => Ok(stored == *expected),
        Err(reason) => Err(Error::Corrupt {
            key: key.to_vec(),
            reason,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_group_by_owner_and_round_trip() {
        let (a, b) = (
            NodeId::new("node1").unwrap(),
            NodeId::new("node10").unwrap(),
        );
        let k = disk_key(&a, b"key");
        assert!(k.starts_with(&owner_prefix(&a)));
        // The length byte keeps "node1" from being a prefix of "node10".
        assert!(!disk_key(&b, b"key").starts_with(&owner_prefix(&a)));
        assert_eq!(split(&k), Some((a.clone(), &b"key"[..])));
        assert_eq!(split(&disk_key(&a, b"")), Some((a.clone(), &b""[..])));
        assert_eq!(k[0], 5);
        assert_eq!(&k[6..14], key_hash(b"key").to_be_bytes());
        // Damaged keys are refused, not misattributed.
        for bad in [&b""[..], &[9, b'n'], &[1, b'N', 0, 0, 0, 0, 0, 0, 0, 0]] {
            assert_eq!(split(bad), None);
        }
        let mut moved = k.clone();
        moved[8] ^= 1;
        assert!(matches!(
            decode_row(&moved, b""),
            Err(Error::Corrupt {
                reason: RecordError::Misplaced,
                ..
            })
        ));
    }
}
