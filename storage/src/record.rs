//! The on-disk record format (design.md, Storage) and its checks.
//!
//! A stored object is `[format byte = 1][codec::encode(object)][crc32]`,
//! where the crc32 (crc32fast, IEEE polynomial) covers every preceding byte
//! and is stored as 4 bytes little endian. Metadata values use the same
//! frame around their raw bytes. Every record read from disk goes through
//! [`decode`]: a record that fails any check is reported, never served.
//!
//! A hint (a write kept for another node, design.md, Replication) is
//! `[format byte = 2][codec::encode((created_at_ms: u64, object))][crc32]`
//! ([`encode_hint`], [`decode_hint`]): the same frame with its own format
//! byte, so a hint can never be read as an object nor an object as a hint.
//!
//! The format byte is the only way to change the encoding: a new layout gets
//! a new byte and `decode` keeps reading the old one.

use kv_types::{Object, codec};

use crate::{Error, Result};

/// Format byte of object records (and metadata frames) written by this
/// version.
pub const FORMAT_V1: u8 = 1;

/// Format byte of hint records written by this version.
pub const FORMAT_HINT_V1: u8 = 2;

/// Bytes of a frame that are not payload: the format byte and the crc32.
pub const FRAME_OVERHEAD: usize = 1 + CRC_BYTES;

const CRC_BYTES: usize = 4;

/// Why stored bytes were refused. Carried by [`Error::Corrupt`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RecordError {
    /// Fewer bytes than a frame's fixed part ([`FRAME_OVERHEAD`] bytes).
    #[error("record of {len} bytes is shorter than its {FRAME_OVERHEAD}-byte frame")]
    TooShort {
        /// Length of the stored value, in bytes.
        len: usize,
    },
    /// The format byte is not one this version knows (written by a newer
    /// version, or damaged).
    #[error("unknown record format {0}")]
    UnknownFormat(u8),
    /// The crc32 stored in the record does not match its bytes.
    #[error("checksum mismatch: stored {stored:#010x}, computed {computed:#010x}")]
    Checksum {
        /// The crc32 found in the record's last 4 bytes.
        stored: u32,
        /// The crc32 of the record's other bytes.
        computed: u32,
    },
    /// The checksum matched but the payload does not decode as an object.
    #[error("payload does not decode: {0}")]
    Decode(String),
    /// The object decoded but breaks the clock invariants.
    #[error("object is invalid: {0}")]
    Invalid(String),
    /// The on-disk key's hash prefix does not match the hash of its user
    /// key (or the on-disk key is shorter than its 8-byte prefix; for a
    /// hint, its owner prefix is not a valid node id).
    #[error("on-disk key does not carry the hash of its key")]
    Misplaced,
}

/// Encodes `object` as a version-1 record.
///
/// # Errors
/// [`Error::Encode`] if the codec refuses the object (a bug, or an object
/// over [`kv_types::codec::MAX_DECODE_BYTES`]).
pub fn encode(object: &Object) -> Result<Vec<u8>> {
    let payload = codec::encode(object).map_err(Error::Encode)?;
    Ok(frame(&payload))
}

/// Decodes and checks a stored record: length, format byte, crc32, codec,
/// then the object's invariants (`validate`), in that order.
///
/// # Errors
/// The first check that fails, as a [`RecordError`].
pub fn decode(bytes: &[u8]) -> std::result::Result<Object, RecordError> {
    let payload = unframe(bytes)?;
    let object: Object = codec::decode(payload).map_err(|e| RecordError::Decode(e.to_string()))?;
    valid(object)
}

/// Encodes a hint record: when the hint was created (milliseconds since the
/// Unix epoch, the node's clock) and the object kept for its owner.
///
/// # Errors
/// [`Error::Encode`] as [`encode`].
pub fn encode_hint(created_at_ms: u64, object: &Object) -> Result<Vec<u8>> {
    let payload = codec::encode(&(created_at_ms, object)).map_err(Error::Encode)?;
    Ok(frame_as(FORMAT_HINT_V1, &payload))
}

/// Decodes and checks a hint record made by [`encode_hint`]: returns
/// `(created_at_ms, object)`. The same checks as [`decode`].
///
/// # Errors
/// The first check that fails, as a [`RecordError`].
pub fn decode_hint(bytes: &[u8]) -> std::result::Result<(u64, Object), RecordError> {
    let payload = unframe_as(FORMAT_HINT_V1, bytes)?;
    let (created_at_ms, object): (u64, Object) =
        codec::decode(payload).map_err(|e| RecordError::Decode(e.to_string()))?;
    Ok((created_at_ms, valid(object)?))
}

fn valid(object: Object) -> std::result::Result<Object, RecordError> {
    object
        .validate()
        .map_err(|e| RecordError::Invalid(e.to_string()))?;
    Ok(object)
}

/// Wraps raw bytes (a metadata value) in a checksummed version-1 frame.
pub fn frame(payload: &[u8]) -> Vec<u8> {
    frame_as(FORMAT_V1, payload)
}

fn frame_as(format: u8, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(payload.len() + FRAME_OVERHEAD);
    out.push(format);
    out.extend_from_slice(payload);
    let crc = crc32fast::hash(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

/// Checks a frame made by [`frame`] and returns its payload.
///
/// # Errors
/// [`RecordError::TooShort`], [`RecordError::UnknownFormat`] or
/// [`RecordError::Checksum`].
pub fn unframe(bytes: &[u8]) -> std::result::Result<&[u8], RecordError> {
    unframe_as(FORMAT_V1, bytes)
}

fn unframe_as(format: u8, bytes: &[u8]) -> std::result::Result<&[u8], RecordError> {
    if bytes.len() < FRAME_OVERHEAD {
        return Err(RecordError::TooShort { len: bytes.len() });
    }
    if bytes[0] != format {
        return Err(RecordError::UnknownFormat(bytes[0]));
    }
    let (body, crc) = bytes.split_at(bytes.len() - CRC_BYTES);
    let stored = u32::from_le_bytes([crc[0], crc[1], crc[2], crc[3]]);
    let computed = crc32fast::hash(body);
    if stored != computed {
        return Err(RecordError::Checksum { stored, computed });
    }
    Ok(&body[1..])
}

#[cfg(test)]
mod tests {
    use kv_types::{Actor, NodeId, Sibling, VersionVector};
    use proptest::prelude::*;

    use super::*;

    fn actor(i: u8) -> Actor {
        Actor {
            node: NodeId::new(format!("node{i}")).unwrap(),
            incarnation: u64::from(i) * 7,
        }
    }

    /// Builds an object by applying blind or contextual writes from a few
    /// actors, so that it has several entries and siblings.
    fn object_from(ops: &[(u8, bool, Option<Vec<u8>>)]) -> Object {
        let mut obj = Object::new();
        for (i, (who, with_context, data)) in ops.iter().enumerate() {
            let ctx = if *with_context {
                obj.join()
            } else {
                VersionVector::new()
            };
            let sibling = Sibling {
                data: data.clone(),
                written_at_ms: i as u64,
            };
            obj = obj.update(&ctx, &actor(*who), sibling);
        }
        obj
    }

    fn sample() -> Object {
        object_from(&[
            (1, false, Some(b"one".to_vec())),
            (2, false, Some(b"two".to_vec())),
            (1, true, None),
        ])
    }

    #[test]
    fn layout_is_format_payload_crc() {
        let obj = sample();
        let bytes = encode(&obj).unwrap();
        assert_eq!(bytes[0], FORMAT_V1);
        assert_eq!(&bytes[1..bytes.len() - 4], codec::encode(&obj).unwrap());
        let crc = crc32fast::hash(&bytes[..bytes.len() - 4]);
        assert_eq!(&bytes[bytes.len() - 4..], crc.to_le_bytes());
        assert_eq!(decode(&bytes).unwrap(), obj);
    }

    #[test]
    fn short_unknown_and_damaged_records_are_refused() {
        assert_eq!(decode(&[]), Err(RecordError::TooShort { len: 0 }));
        assert_eq!(decode(&[1, 2, 3, 4]), Err(RecordError::TooShort { len: 4 }));
        let mut bytes = encode(&sample()).unwrap();
        bytes[0] = 9;
        assert_eq!(decode(&bytes), Err(RecordError::UnknownFormat(9)));
        let mut bytes = encode(&sample()).unwrap();
        bytes[3] ^= 0x10;
        assert!(matches!(decode(&bytes), Err(RecordError::Checksum { .. })));
        let mut bytes = encode(&sample()).unwrap();
        bytes.truncate(bytes.len() - 1);
        assert!(decode(&bytes).is_err());
    }

    #[test]
    fn a_valid_frame_with_garbage_inside_is_refused() {
        assert!(matches!(
            decode(&frame(&[0xFF, 0xFF, 0xFF])),
            Err(RecordError::Decode(_))
        ));
        // One entry with a zero counter: decodes, but breaks the invariants.
        let zero_counter = codec::encode(&vec![(actor(1), 0u64, Vec::<Sibling>::new())]).unwrap();
        assert!(matches!(
            decode(&frame(&zero_counter)),
            Err(RecordError::Invalid(_))
        ));
    }

    #[test]
    fn hints_round_trip_and_never_pass_for_objects() {
        let obj = sample();
        let bytes = encode_hint(1_700_000_000_123, &obj).unwrap();
        assert_eq!(bytes[0], FORMAT_HINT_V1);
        assert_eq!(
            decode_hint(&bytes).unwrap(),
            (1_700_000_000_123, obj.clone())
        );
        assert_eq!(
            decode(&bytes),
            Err(RecordError::UnknownFormat(FORMAT_HINT_V1))
        );
        let object_bytes = encode(&obj).unwrap();
        assert_eq!(
            decode_hint(&object_bytes),
            Err(RecordError::UnknownFormat(FORMAT_V1))
        );
        let mut damaged = bytes;
        damaged[3] ^= 0x10;
        assert!(matches!(
            decode_hint(&damaged),
            Err(RecordError::Checksum { .. })
        ));
    }

    #[test]
    fn frames_round_trip_empty_and_raw_payloads() {
        assert_eq!(unframe(&frame(b"")).unwrap(), b"");
        assert_eq!(unframe(&frame(b"ring v3")).unwrap(), b"ring v3");
        assert_eq!(
            decode(&encode(&Object::new()).unwrap()).unwrap(),
            Object::new()
        );
    }

    fn ops() -> impl Strategy<Value = Vec<(u8, bool, Option<Vec<u8>>)>> {
        prop::collection::vec(
            (
                0u8..4,
                any::<bool>(),
                prop::option::of(prop::collection::vec(any::<u8>(), 0..16)),
            ),
            0..8,
        )
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        #[test]
        fn records_round_trip(ops in ops()) {
            let obj = object_from(&ops);
            prop_assert_eq!(decode(&encode(&obj).unwrap()).unwrap(), obj);
        }

        #[test]
        fn every_single_bit_flip_is_detected(ops in ops()) {
            let bytes = encode(&object_from(&ops)).unwrap();
            for bit in 0..bytes.len() * 8 {
                let mut damaged = bytes.clone();
                damaged[bit / 8] ^= 1 << (bit % 8);
                prop_assert!(decode(&damaged).is_err(), "flip of bit {} went unnoticed", bit);
            }
        }
    }
}
