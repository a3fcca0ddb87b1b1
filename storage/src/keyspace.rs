//! Where a user key lives on disk: `key_hash(key)` as 8 big-endian bytes,
//! then the key itself.
//!
//! Prefixing the hash sorts records in ring order, so one ring partition (a
//! contiguous range of the 64-bit hash space) is one contiguous range of
//! on-disk keys: a partition scan for anti-entropy or hand-off is a range
//! scan, not a full table scan. Both engines use this layout.

use std::ops::Bound;

use kv_types::key_hash;

/// Bytes of the hash prefix.
const PREFIX: usize = 8;

/// The on-disk key of `key`.
pub(crate) fn disk_key(key: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(PREFIX + key.len());
    out.extend_from_slice(&key_hash(key).to_be_bytes());
    out.extend_from_slice(key);
    out
}

/// Splits an on-disk key into the user key, checking that the prefix is the
/// key's hash. `None` when the on-disk key is too short or misplaced.
pub(crate) fn user_key(disk_key: &[u8]) -> Option<&[u8]> {
    split(disk_key).map(|(_, key)| key)
}

/// Splits an on-disk key into the key's hash and the user key, checking
/// that the prefix is the key's hash. `None` when too short or misplaced.
pub(crate) fn split(disk_key: &[u8]) -> Option<(u64, &[u8])> {
    let (prefix, key) = disk_key.split_first_chunk::<PREFIX>()?;
    let hash = key_hash(key);
    (*prefix == hash.to_be_bytes()).then_some((hash, key))
}

/// Bounds of a range of on-disk keys: start, end.
pub(crate) type DiskRange = (Bound<Vec<u8>>, Bound<Vec<u8>>);

/// On-disk key bounds of the records whose hash lies in
/// `from_hash..=to_hash_inclusive`; `None` when the range is empty
/// (`from_hash > to_hash_inclusive`: ring ranges never wrap here).
pub(crate) fn hash_range(from_hash: u64, to_hash_inclusive: u64) -> Option<DiskRange> {
    if from_hash > to_hash_inclusive {
        return None;
    }
    let start = Bound::Included(from_hash.to_be_bytes().to_vec());
    let end = match to_hash_inclusive.checked_add(1) {
        Some(next) => Bound::Excluded(next.to_be_bytes().to_vec()),
        None => Bound::Unbounded,
    };
    Some((start, end))
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

    #[test]
    fn disk_keys_round_trip_and_sort_by_hash() {
        let keys: Vec<Vec<u8>> = (0..200).map(|i| format!("key-{i}").into_bytes()).collect();
        let disk: BTreeSet<Vec<u8>> = keys.iter().map(|k| disk_key(k)).collect();
        let hashes: Vec<u64> = disk
            .iter()
            .map(|d| key_hash(user_key(d).unwrap()))
            .collect();
        assert!(hashes.windows(2).all(|w| w[0] <= w[1]));
        assert_eq!(user_key(&disk_key(b"")), Some(&b""[..]));
    }

    #[test]
    fn misplaced_or_short_keys_are_refused() {
        assert_eq!(user_key(b"short"), None);
        let mut d = disk_key(b"abc");
        d[0] ^= 1;
        assert_eq!(user_key(&d), None);
    }

    #[test]
    fn ranges_cover_exactly_the_hashes_asked_for() {
        let contains = |(s, e): &DiskRange, k: &[u8]| {
            use std::ops::RangeBounds;
            (s.clone(), e.clone()).contains(&k.to_vec())
        };
        let key = b"x";
        let h = key_hash(key);
        let d = disk_key(key);
        assert!(contains(&hash_range(h, h).unwrap(), &d));
        assert!(contains(&hash_range(0, u64::MAX).unwrap(), &d));
        if h > 0 {
            assert!(!contains(&hash_range(0, h - 1).unwrap(), &d));
        }
        if h < u64::MAX {
            assert!(!contains(&hash_range(h + 1, u64::MAX).unwrap(), &d));
        }
        assert!(hash_range(5, 4).is_none());
    }
}
