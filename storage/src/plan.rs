//! The engine-independent half of a read-modify-write: decide, from the raw
//! stored bytes and the caller's closure, what (if anything) to write.
//!
//! Both engines run this and then apply the outcome their own way (a sled
//! compare-and-swap, or a map insert under a mutex), so checksums,
//! quarantine and "skip unchanged writes" behave identically in both.

use kv_types::Object;

use crate::digest::item_digest;
use crate::record::{self, RecordError};
use crate::{Error, Prior, Result};

/// What a read-modify-write decided.
#[derive(Debug)]
pub(crate) enum Outcome {
    /// The result equals what is stored: write nothing, return this.
    Unchanged(Object),
    /// Store `record` (the encoding of `object`).
    Write {
        /// The new object, returned to the caller once durable.
        object: Object,
        /// Its encoded record.
        record: Vec<u8>,
        /// Why the stored record was refused, when it was corrupt: it must
        /// be quarantined as part of this write (and the key's segment
        /// digest recomputed).
        replaces_corrupt: Option<RecordError>,
        /// Item digest of the stored object (`None` when absent or
        /// corrupt), to take out of the segment digest.
        old_digest: Option<u64>,
        /// Item digest of `object`, to add to the segment digest.
        new_digest: u64,
    },
}

/// Runs `f` on the decoded stored object and plans the write.
///
/// # Errors
/// Whatever `f` returns, or [`Error::Encode`].
pub(crate) fn plan(
    key: &[u8],
    raw: Option<&[u8]>,
    f: &mut dyn FnMut(Prior<'_>) -> Result<Object>,
) -> Result<Outcome> {
    let (stored, replaces_corrupt) = match raw.map(record::decode) {
        None => (None, None),
        Some(Ok(object)) => (Some(object), None),
        Some(Err(reason)) => (None, Some(reason)),
    };
    let prior = match (&stored, &replaces_corrupt) {
        (Some(object), _) => Prior::Stored(object),
        (None, Some(reason)) => Prior::Damaged(reason),
        (None, None) => Prior::Absent,
    };
    let object = f(prior)?;
    let unchanged = match &stored {
        Some(stored) => *stored == object,
        // Absent is the empty object; a corrupt record must be replaced.
        None => replaces_corrupt.is_none() && object.is_empty(),
    };
    if unchanged {
        return Ok(Outcome::Unchanged(object));
    }
    let record = record::encode(&object)?;
    Ok(Outcome::Write {
        old_digest: stored.as_ref().map(|s| item_digest(key, s)),
        new_digest: item_digest(key, &object),
        object,
        record,
        replaces_corrupt,
    })
}

/// Decodes a stored record for a read, attaching the key to any failure.
///
/// # Errors
/// [`Error::Corrupt`] when the record fails its checks.
pub(crate) fn decode_for(key: &[u8], raw: &[u8]) -> Result<Object> {
    record::decode(raw).map_err(|reason| Error::Corrupt {
        key: key.to_vec(),
        reason,
    })
}

/// Decodes a stored metadata value, attaching its name to any failure.
///
/// # Errors
/// [`Error::Corrupt`] when the value fails its checks.
pub(crate) fn unframe_meta(name: &str, raw: &[u8]) -> Result<Vec<u8>> {
    record::unframe(raw)
        .map(<[u8]>::to_vec)
        .map_err(|reason| Error::Corrupt {
            key: name.as_bytes().to_vec(),
            reason,
        })
}

/// Logs a quarantined record; the engine has copied it to its `corrupt`
/// tree and counted it.
pub(crate) fn log_quarantine(key: &[u8], reason: &RecordError) {
    tracing::error!(
        key = %key.escape_ascii(),
        %reason,
        "corrupt record quarantined; the key is rewritten from the incoming data"
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    fn put(value: &Object) -> impl FnMut(Prior<'_>) -> Result<Object> + '_ {
        move |_| Ok(value.clone())
    }

    #[test]
    fn empty_over_absent_is_unchanged_but_corrupt_is_replaced() {
        let empty = Object::new();
        assert!(matches!(
            plan(b"k", None, &mut put(&empty)).unwrap(),
            Outcome::Unchanged(_)
        ));
        match plan(b"k", Some(b"junk"), &mut put(&empty)).unwrap() {
            Outcome::Write {
                replaces_corrupt, ..
            } => assert!(replaces_corrupt.is_some()),
            Outcome::Unchanged(_) => panic!("a corrupt record must be replaced"),
        }
    }

    #[test]
    fn equal_results_are_unchanged_and_closure_errors_pass_through() {
        let stored = record::encode(&Object::new()).unwrap();
        assert!(matches!(
            plan(b"k", Some(&stored), &mut put(&Object::new())).unwrap(),
            Outcome::Unchanged(_)
        ));
        let err = plan(b"k", None, &mut |_| Err(Error::Rejected("no".into()))).unwrap_err();
        assert!(matches!(err, Error::Rejected(r) if r == "no"));
    }

    #[test]
    fn the_closure_tells_an_absent_key_from_a_damaged_record() {
        let stored = Object::new();
        let raw = record::encode(&stored).unwrap();
        let mut seen = Vec::new();
        for raw in [None, Some(raw.as_slice()), Some(b"junk".as_slice())] {
            let _ = plan(b"k", raw, &mut |prior| {
                seen.push(match prior {
                    Prior::Absent => "absent".to_string(),
                    Prior::Stored(o) => format!("stored {}", o.sibling_count()),
                    Prior::Damaged(reason) => format!("damaged: {reason}"),
                });
                Err(Error::Rejected("look only".into()))
            });
        }
        assert_eq!(seen[0], "absent");
        assert_eq!(seen[1], "stored 0");
        assert!(seen[2].starts_with("damaged: "), "{}", seen[2]);
    }
}
