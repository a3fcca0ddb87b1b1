//! [`Affinity`]: which peer last served a key, for the hit dimension's
//! affinity (docs/design.md, "The scoring model": a replica that served
//! the key recently likely holds it in its cache).
//!
//! A direct-mapped table, as a CPU cache is: the key hash picks one slot,
//! a newer key that maps to the same slot takes it. Every routed read
//! notes its answering peer, so this is on the request path; an LRU map
//! cost one hash, a list splice and an eviction per read (1.8% of a
//! coordinator's CPU under RESP GET R=1 with uniform keys, where nearly
//! every read is a new key: docs/benchmarks.md, set 6), the table one
//! index and one compare. What it forgets is what an LRU of the same size
//! would mostly forget too: keys read once among many.

use kv_types::NodeId;

/// Key hash -> the peer that last served it, in `2^bits` slots.
#[derive(Clone, Debug)]
pub struct Affinity {
    slots: Vec<Option<(u64, NodeId)>>,
    mask: u64,
}

impl Affinity {
    /// A table of `2^bits` slots (`bits` at most 24: 16 Mi slots).
    pub fn new(bits: u32) -> Self {
        let len = 1usize << bits.min(24);
        Affinity {
            slots: vec![None; len],
            mask: len as u64 - 1,
        }
    }

    fn slot(&self, key_hash: u64) -> usize {
        // xxh3 hashes are well mixed: the low bits pick the slot. A
        // `u64` masked to at most 24 bits always fits a `usize`.
        usize::try_from(key_hash & self.mask).unwrap_or(0)
    }

    /// Notes that `peer` served the key of hash `key_hash`.
    pub fn note(&mut self, key_hash: u64, peer: &NodeId) {
        let i = self.slot(key_hash);
        if let Some(slot) = self.slots.get_mut(i) {
            match slot {
                Some((h, p)) if *h == key_hash && p == peer => {}
                _ => *slot = Some((key_hash, peer.clone())),
            }
        }
    }

    /// The peer that last served the key of hash `key_hash`, if the table
    /// still remembers it.
    pub fn get(&self, key_hash: u64) -> Option<&NodeId> {
        match self.slots.get(self.slot(key_hash)) {
            Some(Some((h, p))) if *h == key_hash => Some(p),
            _ => None,
        }
    }

    /// Forgets every key.
    pub fn clear(&mut self) {
        self.slots.iter_mut().for_each(|s| *s = None);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(n: &str) -> NodeId {
        NodeId::new(n).unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn remembers_the_last_server_of_a_key_until_a_colliding_key_takes_its_slot() {
        let mut a = Affinity::new(4);
        assert_eq!(a.get(7), None);
        a.note(7, &id("node2"));
        assert_eq!(a.get(7), Some(&id("node2")));
        a.note(7, &id("node3"));
        assert_eq!(a.get(7), Some(&id("node3")));
        // 7 + 16 maps to the same slot: it takes it; 7 is forgotten, and
        // is not mistaken for it.
        a.note(23, &id("node4"));
        assert_eq!(a.get(23), Some(&id("node4")));
        assert_eq!(a.get(7), None);
        // Other slots are untouched.
        a.note(8, &id("node5"));
        assert_eq!(a.get(23), Some(&id("node4")));
        a.clear();
        assert_eq!((a.get(23), a.get(8)), (None, None));
    }
}
