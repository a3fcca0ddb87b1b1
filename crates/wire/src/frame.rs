//! Frames: versioned, length-prefixed, bounded envelopes of one message.

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::{Error, Result};

/// Version byte of every frame; bumped on an incompatible message change
/// (4: `StoreHint` carries the hint's age, `age_ms`, where 3 carried a
/// creation time in the same place; a mixed cluster must refuse, not
/// misread, each other's hints).
pub const PROTOCOL_VERSION: u8 = 4;

/// Largest payload accepted, in bytes (32 MiB): enough for a reply holding
/// the maximum number of siblings of maximum size
/// (16 x 1 MiB, `kv_types::limits`), with room to spare.
pub const MAX_FRAME_BYTES: usize = 32 << 20;

/// Largest client [`crate::Request`] payload, in bytes: one maximal key,
/// value and causal context (`kv_types::limits`) and 64 KiB for the rest
/// of the message. A node reads no more than this from a stream opened by a
/// client or admin certificate (about 1.1 MiB; only node certificates may
/// send frames up to [`MAX_FRAME_BYTES`]).
pub const MAX_REQUEST_BYTES: usize = kv_types::limits::MAX_VALUE_BYTES
    + kv_types::limits::MAX_KEY_BYTES
    + kv_types::limits::MAX_CONTEXT_BYTES
    + 64 * 1024;

/// Bytes of the frame header: version, kind, payload length.
pub const HEADER_BYTES: usize = 6;

/// What a frame carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum FrameKind {
    /// A client's [`crate::Request`].
    Request = 1,
    /// A node's [`crate::ClientReply`] to a client.
    Response = 2,
    /// An opaque gossip message (chitchat's own encoding).
    Gossip = 3,
    /// A node's [`crate::PeerCall`] to another node.
    PeerRequest = 4,
    /// A replica's [`crate::PeerReply`].
    PeerResponse = 5,
}

impl FrameKind {
    fn from_byte(b: u8) -> Result<Self> {
        match b {
            1 => Ok(FrameKind::Request),
            2 => Ok(FrameKind::Response),
            3 => Ok(FrameKind::Gossip),
            4 => Ok(FrameKind::PeerRequest),
            5 => Ok(FrameKind::PeerResponse),
            other => Err(Error::Kind(other)),
        }
    }
}

/// Wraps an already encoded payload in a frame.
///
/// # Errors
/// [`Error::TooLarge`] if the payload exceeds [`MAX_FRAME_BYTES`].
pub fn wrap(kind: FrameKind, payload: &[u8]) -> Result<Vec<u8>> {
    if payload.len() > MAX_FRAME_BYTES {
        return Err(Error::TooLarge {
            len: payload.len(),
            max: MAX_FRAME_BYTES,
        });
    }
    let mut out = Vec::with_capacity(HEADER_BYTES + payload.len());
    out.push(PROTOCOL_VERSION);
    out.push(kind as u8);
    // Cannot truncate: bounded by MAX_FRAME_BYTES above.
    out.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    out.extend_from_slice(payload);
    Ok(out)
}

/// Encodes `message` with the project codec and frames it.
///
/// # Errors
/// [`Error::Invalid`] if encoding fails, [`Error::TooLarge`] if too big.
pub fn encode<T: Serialize>(kind: FrameKind, message: &T) -> Result<Vec<u8>> {
    wrap(kind, &kv_types::codec::encode(message)?)
}

/// Parses a frame header and returns its kind and payload length; the
/// length is checked against [`MAX_FRAME_BYTES`] so a reader can refuse
/// before allocating.
///
/// # Errors
/// Unsupported version, unknown kind, or an oversized length.
pub fn parse_header(header: &[u8; HEADER_BYTES]) -> Result<(FrameKind, usize)> {
    if header[0] != PROTOCOL_VERSION {
        return Err(Error::Version {
            got: header[0],
            supported: PROTOCOL_VERSION,
        });
    }
    let kind = FrameKind::from_byte(header[1])?;
    let len = u32::from_le_bytes([header[2], header[3], header[4], header[5]]) as usize;
    if len > MAX_FRAME_BYTES {
        return Err(Error::TooLarge {
            len,
            max: MAX_FRAME_BYTES,
        });
    }
    Ok((kind, len))
}

/// Splits one complete frame (header and exactly its payload) into its kind
/// and payload.
///
/// # Errors
/// Header errors, or a length that does not match the bytes present.
pub fn unwrap(bytes: &[u8]) -> Result<(FrameKind, &[u8])> {
    let Some(header) = bytes.first_chunk::<HEADER_BYTES>() else {
        return Err(Error::Truncated(format!(
            "{} bytes, header needs {HEADER_BYTES}",
            bytes.len()
        )));
    };
    let (kind, len) = parse_header(header)?;
    let payload = &bytes[HEADER_BYTES..];
    if payload.len() != len {
        return Err(Error::Truncated(format!(
            "header announces {len} payload bytes, {} present",
            payload.len()
        )));
    }
    Ok((kind, payload))
}

/// Decodes one complete frame of the `expected` kind into a `T`.
///
/// # Errors
/// Any frame error, a different kind, or a payload that does not decode.
pub fn decode<T: DeserializeOwned>(expected: FrameKind, bytes: &[u8]) -> Result<T> {
    let (kind, payload) = unwrap(bytes)?;
    if kind != expected {
        return Err(Error::UnexpectedKind {
            expected,
            got: kind,
        });
    }
    Ok(kv_types::codec::decode(payload)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_round_trip_and_check_their_header() {
        let f = encode(FrameKind::Request, &"hello".to_string()).unwrap();
        assert_eq!(decode::<String>(FrameKind::Request, &f).unwrap(), "hello");
        assert!(matches!(
            decode::<String>(FrameKind::Response, &f),
            Err(Error::UnexpectedKind { .. })
        ));
        let mut bad_version = f.clone();
        bad_version[0] = 99;
        assert!(matches!(
            unwrap(&bad_version),
            Err(Error::Version { got: 99, .. })
        ));
        let mut bad_kind = f.clone();
        bad_kind[1] = 42;
        assert_eq!(unwrap(&bad_kind), Err(Error::Kind(42)));
        assert!(matches!(
            unwrap(&f[..f.len() - 1]),
            Err(Error::Truncated(_))
        ));
        assert!(matches!(unwrap(&f[..3]), Err(Error::Truncated(_))));
    }

    #[test]
    fn oversized_lengths_are_refused_from_the_header() {
        let mut header = [PROTOCOL_VERSION, FrameKind::Request as u8, 0, 0, 0, 0];
        header[2..].copy_from_slice(&((MAX_FRAME_BYTES + 1) as u32).to_le_bytes());
        assert!(matches!(parse_header(&header), Err(Error::TooLarge { .. })));
        header[2..].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(matches!(parse_header(&header), Err(Error::TooLarge { .. })));
    }
}
