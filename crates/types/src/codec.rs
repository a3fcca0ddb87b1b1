//! The one codec of the project: bincode 2 through serde, with one pinned
//! configuration and a size bound on every decode.
//!
//! Wire frames, stored records and causal contexts all go through these two
//! functions, so that replacing bincode (unmaintained upstream; postcard or
//! wincode are candidates) is a change to this file only. The configuration
//! is bincode's `standard()` (little endian, variable-length integers): it is
//! part of the on-disk and on-wire format and must never change without a new
//! format version byte where it is used.

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::{Error, Result};

/// Upper bound on the bytes one `decode` call accepts (64 MiB); callers apply
/// their own, tighter bounds before calling.
pub const MAX_DECODE_BYTES: usize = 64 << 20;

fn config() -> impl bincode::config::Config {
    bincode::config::standard().with_limit::<MAX_DECODE_BYTES>()
}

/// Encodes `value` to bytes.
///
/// # Errors
/// [`Error::Encode`] if serde refuses the value or it exceeds
/// [`MAX_DECODE_BYTES`].
pub fn encode<T: Serialize>(value: &T) -> Result<Vec<u8>> {
    bincode::serde::encode_to_vec(value, config()).map_err(|e| Error::Encode(e.to_string()))
}

/// Decodes exactly one `T` from `bytes`; trailing bytes are an error.
///
/// # Errors
/// [`Error::Decode`] on truncated, oversized or malformed input.
pub fn decode<T: DeserializeOwned>(bytes: &[u8]) -> Result<T> {
    if bytes.len() > MAX_DECODE_BYTES {
        return Err(Error::Decode(format!(
            "{} bytes exceed the decode bound of {MAX_DECODE_BYTES}",
            bytes.len()
        )));
    }
    let (value, used) = bincode::serde::decode_from_slice(bytes, config())
        .map_err(|e| Error::Decode(e.to_string()))?;
    if used != bytes.len() {
        return Err(Error::Decode(format!(
            "{} trailing bytes after the value",
            bytes.len() - used
        )));
    }
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_trailing_bytes() {
        let v = (7u64, String::from("x"), vec![1u8, 2, 3]);
        let bytes = encode(&v).unwrap();
        assert_eq!(decode::<(u64, String, Vec<u8>)>(&bytes).unwrap(), v);
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(decode::<(u64, String, Vec<u8>)>(&longer).is_err());
        assert!(decode::<(u64, String, Vec<u8>)>(&bytes[..bytes.len() - 1]).is_err());
    }

    #[test]
    fn a_huge_length_prefix_is_refused_without_allocating() {
        // A Vec<u8> claiming 2^40 elements: varint 0xFD + u64 little endian.
        let mut bytes = vec![0xFD];
        bytes.extend_from_slice(&(1u64 << 40).to_le_bytes());
        assert!(decode::<Vec<u8>>(&bytes).is_err());
    }
}
