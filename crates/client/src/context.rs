//! Causal contexts as text: the base64url string (no padding) that `kvctl
//! get --json` prints and `kvctl put --context` takes back.
//!
//! The bytes are opaque to clients; decoding checks them anyway (format byte,
//! size bound, clock invariants) so that a mistyped or truncated context is
//! reported here as bad input instead of reaching a node.

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use kv_types::VersionVector;
use kv_types::limits::MAX_CONTEXT_BYTES;

use crate::{Error, Result};

/// The text form of a causal context: base64url without padding. The empty
/// context (nothing read) is the empty string.
pub fn encode_context(context: &[u8]) -> String {
    URL_SAFE_NO_PAD.encode(context)
}

/// Parses a context string made by [`encode_context`] and checks that it is
/// a causal context this store made. Trailing `=` padding is tolerated; the
/// empty string is the empty context (a blind write).
///
/// # Errors
/// [`Error::Invalid`] when the text is not base64url or the bytes are not a
/// well-formed causal context.
pub fn decode_context(text: &str) -> Result<Vec<u8>> {
    let text = text.trim().trim_end_matches('=');
    // Four base64 characters carry three bytes: refuse absurd input before
    // decoding it.
    if text.len() / 4 * 3 > MAX_CONTEXT_BYTES + 3 {
        return Err(invalid(format!(
            "longer than the limit of {MAX_CONTEXT_BYTES} bytes"
        )));
    }
    let bytes = URL_SAFE_NO_PAD
        .decode(text)
        .map_err(|e| invalid(format!("not base64url: {e}")))?;
    check_context(&bytes)?;
    Ok(bytes)
}

/// Checks that `context` bytes are a well-formed causal context (or empty).
///
/// # Errors
/// [`Error::Invalid`] describing the problem.
pub fn check_context(context: &[u8]) -> Result<()> {
    VersionVector::from_context(context)
        .map(|_| ())
        .map_err(|e| invalid(e.to_string()))
}

fn invalid(reason: String) -> Error {
    Error::Invalid {
        message: format!(
            "bad causal context: {reason}; pass the context string printed by `kvctl get --json`"
        ),
    }
}

#[cfg(test)]
mod tests {
    use kv_types::{Actor, NodeId};

    use super::*;

    fn context() -> Vec<u8> {
        let actor = Actor {
            node: NodeId::new("node1").unwrap(),
            incarnation: 0xfeed,
        };
        VersionVector::from_pairs([(actor, 7)])
            .to_context()
            .unwrap()
    }

    #[test]
    fn contexts_round_trip_as_base64url() {
        let bytes = context();
        let text = encode_context(&bytes);
        assert!(!text.contains('=') && !text.contains('+') && !text.contains('/'));
        assert_eq!(decode_context(&text).unwrap(), bytes);
        assert_eq!(decode_context(&format!("{text}==")).unwrap(), bytes);
    }

    #[test]
    fn the_empty_context_is_the_empty_string() {
        assert_eq!(encode_context(&[]), "");
        assert_eq!(decode_context("").unwrap(), Vec::<u8>::new());
    }

    #[test]
    fn garbage_is_invalid_input() {
        for bad in ["not base64!", "AAAA", "Zm9v"] {
            let e = decode_context(bad).unwrap_err();
            assert!(matches!(e, Error::Invalid { .. }), "{bad}: {e}");
            assert_eq!(e.exit_code(), 2);
        }
        let huge = "A".repeat(MAX_CONTEXT_BYTES * 2);
        assert!(decode_context(&huge).is_err());
    }
}
