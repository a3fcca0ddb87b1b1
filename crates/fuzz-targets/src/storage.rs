//! Targets of stored data: object records, hint records and their keys,
//! and the causal context (`VersionVector`) and object (`DvvSet`) codecs.

use kv_storage::Hint;
use kv_storage::record::{self, FORMAT_HINT_V1, FORMAT_V1};
use kv_types::{Object, VersionVector, codec};

use crate::round_trip;

/// `[format][payload][crc32]` with the crc computed here.
fn checksummed(format: u8, payload: &[u8]) -> Vec<u8> {
    let mut out = vec![format];
    out.extend_from_slice(payload);
    let crc = crc32fast::hash(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

/// A stored object record (`kv_storage::record::decode`). With a first
/// byte of 0, the rest is the payload and the frame (format 1, crc32) is
/// made here.
pub fn record(data: &[u8]) {
    let framed;
    let bytes = match data.split_first() {
        Some((0, payload)) => {
            framed = checksummed(FORMAT_V1, payload);
            &framed[..]
        }
        _ => data,
    };
    let Ok(object) = record::decode(bytes) else {
        return;
    };
    let written = record::encode(&object).expect("a decoded object encodes");
    let back = record::decode(&written).expect("a written record decodes");
    assert_eq!(back, object);
    assert_eq!(record::encode(&back).expect("encodes"), written);
    object_laws(&object);
}

/// A stored hint: `[key length: u8][on-disk key][record]` as the hint
/// tree holds it (`Hint::from_row`). With a first byte of 0 the record's
/// frame (format 2, crc32) is made here from the rest of the input.
pub fn hint(data: &[u8]) {
    let Some((&fix, rest)) = data.split_first() else {
        return;
    };
    let Some((&len, rest)) = rest.split_first() else {
        return;
    };
    let Some((disk_key, raw)) = rest.split_at_checked(usize::from(len)) else {
        return;
    };
    let framed;
    let raw = if fix == 0 {
        framed = checksummed(FORMAT_HINT_V1, raw);
        &framed[..]
    } else {
        raw
    };
    let _ = record::decode_hint(raw);
    let Ok(hint) = Hint::from_row(disk_key, raw) else {
        return;
    };
    let (key, value) = hint.to_row().expect("a decoded hint encodes");
    let back = Hint::from_row(&key, &value).expect("a written hint decodes");
    assert_eq!(back, hint);
    assert_eq!(back.to_row().expect("encodes"), (key, value));
    object_laws(&hint.object);
}

/// A client's causal context (`VersionVector::from_context`, first byte
/// even) or an object as replicas exchange it (a `DvvSet` in the codec,
/// validated; first byte odd).
pub fn context(data: &[u8]) {
    match data.split_first() {
        Some((b, rest)) if b % 2 == 0 => {
            let Ok(vv) = VersionVector::from_context(rest) else {
                return;
            };
            let bytes = vv.to_context().expect("a decoded context encodes");
            let back = VersionVector::from_context(&bytes).expect("a written context decodes");
            assert_eq!(back, vv);
            assert!(vv.descends(&vv) && vv.merge(&vv) == vv);
        }
        Some((_, rest)) => {
            let Ok(object) = codec::decode::<Object>(rest) else {
                return;
            };
            if object.validate().is_ok() {
                let back = round_trip::check(&object);
                assert_eq!(back, object);
                object_laws(&object);
            }
        }
        None => {}
    }
}

/// What must hold of any valid object: merging it with itself changes
/// nothing, and its history is a valid context.
fn object_laws(object: &Object) {
    assert_eq!(object.sync(object), *object, "sync is not idempotent");
    let history = object.join();
    assert!(history.validate().is_ok());
    let context = history.to_context().expect("a history encodes");
    assert_eq!(
        VersionVector::from_context(&context).ok().as_ref(),
        Some(&history).filter(|_| context.len() <= kv_types::limits::MAX_CONTEXT_BYTES)
    );
}
