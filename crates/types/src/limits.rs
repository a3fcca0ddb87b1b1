//! Size bounds on everything a client can send, checked at every door.
//!
//! The bounds are deliberately conservative: Riak advises objects under
//! 1 MiB and caps siblings at 100 with a warning at 25; we keep the same
//! value bound and a lower sibling cap (see [`DEFAULT_MAX_SIBLINGS`]).

use crate::{Error, Result};

/// Longest key accepted, in bytes.
pub const MAX_KEY_BYTES: usize = 1024;

/// Longest value accepted, in bytes (1 MiB).
pub const MAX_VALUE_BYTES: usize = 1 << 20;

/// Default cap on the number of siblings of one key; a write that would
/// exceed it is refused with an explicit error (never a silent drop).
pub const DEFAULT_MAX_SIBLINGS: usize = 16;

/// Longest encoded causal context accepted from a client, in bytes.
pub const MAX_CONTEXT_BYTES: usize = 16 * 1024;

/// Checks a key: non-empty and at most [`MAX_KEY_BYTES`] bytes. Keys are
/// arbitrary bytes otherwise.
///
/// # Errors
/// [`Error::InvalidKey`] when the key is empty or too long.
pub fn check_key(key: &[u8]) -> Result<()> {
    if key.is_empty() {
        return Err(Error::InvalidKey {
            reason: "key is empty".into(),
        });
    }
    if key.len() > MAX_KEY_BYTES {
        return Err(Error::InvalidKey {
            reason: format!(
                "key of {} bytes exceeds the limit of {MAX_KEY_BYTES} bytes",
                key.len()
            ),
        });
    }
    Ok(())
}

/// Checks a value: at most [`MAX_VALUE_BYTES`] bytes (empty values are fine).
///
/// # Errors
/// [`Error::ValueTooLarge`] when the value is too long.
pub fn check_value(value: &[u8]) -> Result<()> {
    if value.len() > MAX_VALUE_BYTES {
        return Err(Error::ValueTooLarge {
            len: value.len(),
            max: MAX_VALUE_BYTES,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_bounded() {
        assert!(check_key(b"").is_err());
        assert!(check_key(b"a").is_ok());
        assert!(check_key(&vec![b'k'; MAX_KEY_BYTES]).is_ok());
        assert!(check_key(&vec![b'k'; MAX_KEY_BYTES + 1]).is_err());
    }

    #[test]
    fn values_are_bounded() {
        assert!(check_value(b"").is_ok());
        assert!(check_value(&vec![0; MAX_VALUE_BYTES]).is_ok());
        assert_eq!(
            check_value(&vec![0; MAX_VALUE_BYTES + 1]),
            Err(Error::ValueTooLarge {
                len: MAX_VALUE_BYTES + 1,
                max: MAX_VALUE_BYTES
            })
        );
    }
}
