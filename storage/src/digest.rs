//! Anti-entropy digests (design.md, "Replication": Merkle trees of xxh3 of
//! key and causal metadata, kept up to date as writes land).
//!
//! The 64-bit key-hash space is cut into [`SEGMENTS`] equal segments
//! (`segment = key_hash >> 48`). Every engine keeps, in memory, one `u64`
//! per segment: the wrapping sum, over the keys stored in that segment, of
//! [`item_digest`]. A sum (rather than a hash chain) can be kept up to date
//! by each write alone (subtract the old item digest, add the new one) and
//! does not depend on the order in which writes landed, so two replicas
//! holding the same objects have the same digests.
//!
//! A ring partition is a contiguous range of segments
//! ([`partition_segments`]); the node builds its Merkle trees from
//! [`crate::Storage::segment_digests`] and combines levels with
//! [`combine`], so both sides of an exchange compute roots the same way.
//!
//! All hashes are XXH3-64 with seed 0 (twox-hash, reached through
//! [`kv_types::key_hash`], which is exactly that function of its bytes).

use std::ops::Range;

use kv_types::Object;

/// Number of digest segments of the 64-bit key-hash space (2^16); each
/// covers 2^48 consecutive hash values.
pub const SEGMENTS: u32 = 1 << 16;

/// Bits of a key hash below the segment number.
const SEGMENT_SHIFT: u32 = 64 - 16;

/// The segment of a key hash: its top 16 bits.
pub fn segment_of(hash: u64) -> u32 {
    // The shift leaves 16 bits, which always fit.
    (hash >> SEGMENT_SHIFT) as u32
}

/// The key hashes of `segment`, as an inclusive range `(first, last)`
/// (as [`crate::Storage::scan`] takes them). Segments past the last one are
/// clamped to it.
pub fn segment_hashes(segment: u32) -> (u64, u64) {
    let first = u64::from(segment.min(SEGMENTS - 1)) << SEGMENT_SHIFT;
    (first, first | ((1u64 << SEGMENT_SHIFT) - 1))
}

/// The segments of ring partition `partition` of `partitions` equal
/// partitions: `p * SEGMENTS / Q .. (p + 1) * SEGMENTS / Q`. With `Q` a
/// power of two up to [`SEGMENTS`] (the ring's rule), every partition gets
/// `SEGMENTS / Q` whole segments (64 for the default Q = 1024). Empty when
/// `partitions` is 0 or `partition >= partitions`.
pub fn partition_segments(partition: u32, partitions: u32) -> Range<u32> {
    if partition >= partitions {
        return 0..0;
    }
    let bound = |p: u32| (u64::from(p) * u64::from(SEGMENTS) / u64::from(partitions)) as u32;
    bound(partition)..bound(partition + 1)
}

/// The digest of one stored key: XXH3-64 (seed 0) of the key and the
/// object's causal metadata, laid out as
/// `[key len: u32 LE][key]` then, for each entry of the clock in order,
/// `[actor node id len: u8][node id][incarnation: u64 LE][counter: u64 LE]
/// [number of current values: u64 LE]`.
///
/// Values themselves are not hashed: a value is identified by its dot
/// (actor, counter), so two replicas with the same entries and the same
/// number of surviving values per entry hold the same versions. The count
/// of values matters: the same version vector with different surviving
/// siblings gives different digests.
pub fn item_digest(key: &[u8], object: &Object) -> u64 {
    let mut buf = Vec::with_capacity(4 + key.len() + object.entries().len() * 48);
    // Keys are bounded far below 4 GiB at the node's doors; saturate anyway.
    buf.extend_from_slice(&u32::try_from(key.len()).unwrap_or(u32::MAX).to_le_bytes());
    buf.extend_from_slice(key);
    for entry in object.entries() {
        let node = entry.actor().node.as_str().as_bytes();
        // A node id is a DNS label: at most 63 bytes.
        buf.push(u8::try_from(node.len()).unwrap_or(u8::MAX));
        buf.extend_from_slice(node);
        buf.extend_from_slice(&entry.actor().incarnation.to_le_bytes());
        buf.extend_from_slice(&entry.counter().to_le_bytes());
        buf.extend_from_slice(&(entry.values().len() as u64).to_le_bytes());
    }
    xxh3(&buf)
}

/// Combines digests into one (a Merkle tree level): XXH3-64 (seed 0) of the
/// digests as consecutive 8-byte little-endian words. Order matters.
pub fn combine(digests: &[u64]) -> u64 {
    let bytes: Vec<u8> = digests.iter().flat_map(|d| d.to_le_bytes()).collect();
    xxh3(&bytes)
}

/// XXH3-64 with seed 0: the key hash is exactly that function of its input.
fn xxh3(bytes: &[u8]) -> u64 {
    kv_types::key_hash(bytes)
}

#[cfg(test)]
mod tests {
    use kv_types::{Actor, NodeId, Sibling, VersionVector};

    use super::*;

    fn actor(i: u8) -> Actor {
        Actor {
            node: NodeId::new(format!("node{i}")).unwrap(),
            incarnation: 7,
        }
    }

    fn value(data: &[u8]) -> Sibling {
        Sibling {
            data: Some(data.to_vec()),
            written_at_ms: 0,
        }
    }

    #[test]
    fn same_version_vector_with_different_survivors_differs() {
        // Two concurrent writes by two actors: both survive as siblings.
        let a = Object::new().update(&VersionVector::new(), &actor(1), value(b"a"));
        let b = Object::new().update(&VersionVector::new(), &actor(2), value(b"b"));
        let both = a.sync(&b);
        // Actor 2's second write saw only actor 2's version: actor 1's
        // sibling survives beside it.
        let partial = both.update(&b.join(), &actor(2), value(b"c"));
        // A write that saw everything leaves one sibling under the same
        // version vector.
        let full = both.update(&both.join(), &actor(2), value(b"c"));
        assert_eq!(partial.join(), full.join(), "same version vector");
        assert_eq!((partial.sibling_count(), full.sibling_count()), (2, 1));
        assert_ne!(item_digest(b"k", &partial), item_digest(b"k", &full));
        // The digest covers the key, the history, and not the value bytes
        // nor their timestamps.
        assert_ne!(item_digest(b"k", &full), item_digest(b"j", &full));
        assert_ne!(item_digest(b"k", &a), item_digest(b"k", &both));
        let other_bytes = both.update(&both.join(), &actor(2), value(b"other"));
        assert_eq!(item_digest(b"k", &full), item_digest(b"k", &other_bytes));
        // Order of arrival does not matter: sync is commutative.
        assert_eq!(
            item_digest(b"k", &a.sync(&b)),
            item_digest(b"k", &b.sync(&a))
        );
    }

    #[test]
    fn segments_and_partitions_tile_the_hash_space() {
        assert_eq!(segment_of(0), 0);
        assert_eq!(segment_of(u64::MAX), SEGMENTS - 1);
        assert_eq!(segment_hashes(0), (0, (1 << 48) - 1));
        assert_eq!(segment_hashes(SEGMENTS - 1).1, u64::MAX);
        let (first, last) = segment_hashes(1234);
        assert_eq!((segment_of(first), segment_of(last)), (1234, 1234));
        assert_eq!(segment_of(last + 1), 1235);
        assert_eq!(partition_segments(0, 1024), 0..64);
        assert_eq!(partition_segments(1023, 1024), SEGMENTS - 64..SEGMENTS);
        assert_eq!(partition_segments(0, 1), 0..SEGMENTS);
        assert_eq!(partition_segments(3, 3), 0..0);
        // The segments of a partition hold exactly the partition's hashes.
        let q = 8u64;
        let width = u64::MAX / q + 1;
        for p in 0..q {
            let s = partition_segments(p as u32, q as u32);
            assert_eq!(segment_hashes(s.start).0, p * width);
            assert_eq!(segment_hashes(s.end - 1).1, p * width + (width - 1));
        }
    }

    #[test]
    fn combine_is_xxh3_of_the_little_endian_words() {
        assert_eq!(combine(&[]), kv_types::key_hash(b""));
        let mut bytes = 1u64.to_le_bytes().to_vec();
        bytes.extend_from_slice(&2u64.to_le_bytes());
        assert_eq!(combine(&[1, 2]), kv_types::key_hash(&bytes));
        assert_ne!(combine(&[1, 2]), combine(&[2, 1]));
    }
}
