//! Target of the persisted ring (`kv_router::persist`).

use kv_router::Ring;
use kv_router::persist::{self, FORMAT, MAGIC};

/// Rings rebuilt by a target have at most this many partitions and
/// members: building is a min-cost assignment whose cost grows with both,
/// and the decoder, not the claim algorithm's speed, is what is fuzzed
/// (the ring's own tests and proptests cover building).
const MAX_BUILT_PARTITIONS: u32 = 4096;
const MAX_BUILT_MEMBERS: usize = 64;

/// A persisted ring as a node reads it at startup. With a first byte of
/// 0, the rest is the body and the header (magic, format 1, crc32) is made
/// here, so the fuzzer reaches the body's decoder.
pub fn ring(data: &[u8]) {
    match data.split_first() {
        Some((0, body)) => {
            let mut framed = Vec::from(MAGIC);
            framed.extend_from_slice(&FORMAT.to_le_bytes());
            framed.extend_from_slice(&crc32fast::hash(body).to_le_bytes());
            framed.extend_from_slice(body);
            rebuild(&framed);
        }
        _ => rebuild(data),
    }
}

/// Decodes a persisted ring and, when it is small enough, rebuilds it
/// and checks that what it writes reads back to the same ring.
pub(crate) fn rebuild(bytes: &[u8]) {
    let Ok(snapshot) = persist::decode(bytes) else {
        return;
    };
    if snapshot.config.partitions > MAX_BUILT_PARTITIONS
        || snapshot.members.len() > MAX_BUILT_MEMBERS
    {
        return;
    }
    let Ok(ring) = Ring::from_bytes(bytes) else {
        return;
    };
    let written = ring.to_bytes();
    let back = Ring::from_bytes(&written).expect("a ring reads back what it wrote");
    assert_eq!(back.version(), ring.version());
    assert_eq!(back.to_bytes(), written);
    let again = persist::decode(&written).expect("a written ring decodes");
    assert_eq!(again.version, ring.version());
    assert_eq!(again.config, snapshot.config);
}
