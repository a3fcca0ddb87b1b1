//! The key hash: 64-bit xxh3 (XXH3_64bits) with seed 0, fixed forever.
//!
//! It places keys on the ring (design.md, Ring) and orders records on disk so
//! that one partition is one contiguous range. Changing it would move every
//! key of every existing cluster: never change it.

use twox_hash::XxHash3_64;

/// Hash of a key: `XXH3_64bits(key)` with seed 0.
pub fn key_hash(key: &[u8]) -> u64 {
    XxHash3_64::oneshot(key)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_the_reference_xxh3_vectors() {
        // XXH3_64bits("") with seed 0, from the xxHash reference test vectors.
        assert_eq!(key_hash(b""), 0x2D06_8005_38D3_94C2);
        assert_ne!(key_hash(b"a"), key_hash(b"b"));
    }
}
