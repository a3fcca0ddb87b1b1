//! The versions of one key: siblings with their causal history, and the
//! opaque causal context handed to clients.

use serde::{Deserialize, Serialize};

use crate::dvv::{DvvSet, VersionVector};
use crate::limits::MAX_CONTEXT_BYTES;
use crate::{Error, Result, codec};

/// One version of a key: a value, or a tombstone left by a delete.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Sibling {
    /// The value, or `None` for a tombstone.
    pub data: Option<Vec<u8>>,
    /// Wall-clock time of the write at its coordinator, in milliseconds
    /// since the Unix epoch. Informational (and the age of a tombstone for
    /// purging): clocks never decide between versions in this store.
    pub written_at_ms: u64,
}

impl Sibling {
    /// Whether this version is a delete marker.
    pub fn is_tombstone(&self) -> bool {
        self.data.is_none()
    }
}

/// All versions of one key with their causal history (Riak's
/// `riak_object`): what replicas store, exchange and merge.
pub type Object = DvvSet<Sibling>;

/// Format byte of encoded causal contexts; bump when the encoding changes.
const CONTEXT_FORMAT: u8 = 1;

impl DvvSet<Sibling> {
    /// The current values, without tombstones.
    pub fn live_values(&self) -> impl Iterator<Item = &[u8]> {
        self.values().filter_map(|s| s.data.as_deref())
    }

    /// Whether every remaining version is a tombstone (or there are none):
    /// a read answers "not found".
    pub fn is_deleted(&self) -> bool {
        self.values().all(Sibling::is_tombstone)
    }
}

impl VersionVector {
    /// Encodes this history as an opaque causal context for clients:
    /// a format byte followed by the codec's encoding.
    ///
    /// # Errors
    /// [`Error::Encode`] only if the codec fails (a bug).
    pub fn to_context(&self) -> Result<Vec<u8>> {
        let mut out = vec![CONTEXT_FORMAT];
        out.extend(codec::encode(self)?);
        Ok(out)
    }

    /// Decodes a causal context produced by [`VersionVector::to_context`].
    /// An empty context is the empty history (a blind write).
    ///
    /// # Errors
    /// [`Error::InvalidContext`] when the bytes are too long, carry an unknown
    /// format, do not decode, or break the vector's invariants.
    pub fn from_context(bytes: &[u8]) -> Result<Self> {
        if bytes.is_empty() {
            return Ok(VersionVector::new());
        }
        if bytes.len() > MAX_CONTEXT_BYTES {
            return Err(Error::InvalidContext(format!(
                "{} bytes exceed the limit of {MAX_CONTEXT_BYTES}",
                bytes.len()
            )));
        }
        if bytes[0] != CONTEXT_FORMAT {
            return Err(Error::InvalidContext(format!(
                "unknown format {}",
                bytes[0]
            )));
        }
        let vv: VersionVector =
            codec::decode(&bytes[1..]).map_err(|e| Error::InvalidContext(e.to_string()))?;
        vv.validate()
            .map_err(|e| Error::InvalidContext(e.to_string()))?;
        Ok(vv)
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;
    use crate::{Actor, NodeId};

    fn actor(i: u8, inc: u64) -> Actor {
        Actor {
            node: NodeId::new(format!("node{i}")).unwrap(),
            incarnation: inc,
        }
    }

    #[test]
    fn tombstones_mean_deleted() {
        let a = actor(1, 1);
        let put = Object::new().update(
            &VersionVector::new(),
            &a,
            Sibling {
                data: Some(b"x".to_vec()),
                written_at_ms: 1,
            },
        );
        assert!(!put.is_deleted());
        let del = put.update(
            &put.join(),
            &a,
            Sibling {
                data: None,
                written_at_ms: 2,
            },
        );
        assert!(del.is_deleted());
        assert_eq!(del.live_values().count(), 0);
        assert!(Object::new().is_deleted());
    }

    #[test]
    fn garbage_contexts_are_refused() {
        assert!(VersionVector::from_context(&[9, 1, 2]).is_err());
        assert!(VersionVector::from_context(&[CONTEXT_FORMAT, 0xFF, 0xFF]).is_err());
        assert!(VersionVector::from_context(&vec![CONTEXT_FORMAT; MAX_CONTEXT_BYTES + 1]).is_err());
        assert_eq!(
            VersionVector::from_context(&[]).unwrap(),
            VersionVector::new()
        );
    }

    proptest! {
        #[test]
        fn contexts_round_trip(pairs in prop::collection::vec((0u8..20, 0u64..5, 1u64..1_000_000), 0..12)) {
            let vv = VersionVector::from_pairs(pairs.into_iter().map(|(i, inc, n)| (actor(i, inc), n)));
            let bytes = vv.to_context().unwrap();
            prop_assert_eq!(VersionVector::from_context(&bytes).unwrap(), vv);
        }
    }
}
