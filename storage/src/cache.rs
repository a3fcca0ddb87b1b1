//! The read cache: an LRU of recently read or written objects in front of
//! the engine, bounded in bytes, that counts its hits and misses and the
//! keys read most (design.md, Read cache).
//!
//! It holds exactly what storage holds, never older: every durable write
//! reports its resulting object ([`ReadCache::observe_write`]), and an entry
//! is merged causally (`DvvSet::sync`) with what arrives, so writes that
//! finish out of order still leave the newest object (each stored object
//! descends the one it replaced). Removals invalidate the entry. The cache
//! is only an accelerator: a miss reads the engine.
//!
//! **Hot keys** are counted by key hash with the Space-Saving algorithm
//! (Metwally, Agrawal, El Abbadi, "Efficient Computation of Frequent and
//! Top-k Elements in Data Streams", ICDT 2005): [`HOT_KEY_SLOTS`] counters
//! whatever the number of keys; a key read more often than `1 / slots` of
//! all reads is always among them. The counts are halved every report
//! period ([`ReadCache::decay_hot`]), so the list follows the current load
//! rather than all of history.

use std::sync::Mutex;

use kv_types::{Object, key_hash};
use lru::LruCache;

/// Counters kept for hot keys (bounded memory).
pub const HOT_KEY_SLOTS: usize = 64;

/// Figures of the read cache since the node started.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CacheStats {
    /// Reads answered from the cache.
    pub hits: u64,
    /// Reads that went to the engine.
    pub misses: u64,
    /// Objects cached now.
    pub entries: u64,
    /// Approximate bytes cached now.
    pub bytes: u64,
    /// Capacity in bytes.
    pub capacity_bytes: u64,
}

impl CacheStats {
    /// Hits over all reads (0.0 before the first read).
    pub fn hit_ratio(&self) -> f64 {
        let reads = self.hits + self.misses;
        if reads == 0 {
            0.0
        } else {
            self.hits as f64 / reads as f64
        }
    }
}

struct Inner {
    lru: LruCache<Vec<u8>, (Object, u64)>,
    bytes: u64,
    hits: u64,
    misses: u64,
    /// Space-Saving counters: (key hash, count), at most HOT_KEY_SLOTS.
    hot: Vec<(u64, u64)>,
}

/// An LRU read cache bounded by `capacity_bytes`; see the module
/// documentation.
pub struct ReadCache {
    inner: Mutex<Inner>,
    capacity_bytes: u64,
}

/// Approximate memory of one entry, in bytes.
fn size_of(key: &[u8], object: &Object) -> u64 {
    let values: usize = object
        .values()
        .map(|s| s.data.as_ref().map_or(0, Vec::len) + 16)
        .sum();
    (key.len() + values + object.entries().len() * 48 + 64) as u64
}

impl ReadCache {
    /// A cache of at most `capacity_bytes` (0 disables caching; hits and
    /// misses are still counted).
    pub fn new(capacity_bytes: u64) -> Self {
        ReadCache {
            inner: Mutex::new(Inner {
                lru: LruCache::unbounded(),
                bytes: 0,
                hits: 0,
                misses: 0,
                hot: Vec::with_capacity(HOT_KEY_SLOTS),
            }),
            capacity_bytes,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The cached object of `key`, counting a hit or a miss and the access.
    pub fn lookup(&self, key: &[u8]) -> Option<Object> {
        let mut inner = self.lock();
        count_hot(&mut inner.hot, key_hash(key));
        match inner.lru.get(key) {
            Some((object, _)) => {
                let object = object.clone();
                inner.hits += 1;
                Some(object)
            }
            None => {
                inner.misses += 1;
                None
            }
        }
    }

    /// Records what the engine returned for a read that missed.
    pub fn fill(&self, key: &[u8], object: &Object) {
        self.observe_write(key, object);
    }

    /// Records the object now stored for `key` after a durable write.
    pub fn observe_write(&self, key: &[u8], object: &Object) {
        if self.capacity_bytes == 0 {
            return;
        }
        let mut inner = self.lock();
        let merged = match inner.lru.pop(key) {
            Some((cached, size)) => {
                inner.bytes -= size;
                cached.sync(object)
            }
            None => object.clone(),
        };
        let size = size_of(key, &merged);
        if size > self.capacity_bytes {
            return;
        }
        inner.bytes += size;
        inner.lru.put(key.to_vec(), (merged, size));
        while inner.bytes > self.capacity_bytes {
            match inner.lru.pop_lru() {
                Some((_, (_, s))) => inner.bytes -= s,
                None => break,
            }
        }
    }

    /// Forgets `key` (its record was removed or replaced outside a merge).
    pub fn invalidate(&self, key: &[u8]) {
        let mut inner = self.lock();
        if let Some((_, size)) = inner.lru.pop(key) {
            inner.bytes -= size;
        }
    }

    /// Current figures.
    pub fn stats(&self) -> CacheStats {
        let inner = self.lock();
        CacheStats {
            hits: inner.hits,
            misses: inner.misses,
            entries: inner.lru.len() as u64,
            bytes: inner.bytes,
            capacity_bytes: self.capacity_bytes,
        }
    }

    /// Halves every hot-key count (dropping those that reach 0): called
    /// once per report period, so old reads fade.
    pub fn decay_hot(&self) {
        let mut inner = self.lock();
        for slot in &mut inner.hot {
            slot.1 /= 2;
        }
        inner.hot.retain(|(_, c)| *c > 0);
    }

    /// The `k` most read key hashes with their (over-)estimated counts,
    /// most read first.
    pub fn hot_keys(&self, k: usize) -> Vec<(u64, u64)> {
        let mut hot = self.lock().hot.clone();
        hot.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        hot.truncate(k);
        hot
    }
}

/// One Space-Saving step: count `hash`, replacing the least counted slot
/// when all slots are taken (the newcomer inherits its count + 1).
fn count_hot(hot: &mut Vec<(u64, u64)>, hash: u64) {
    if let Some(slot) = hot.iter_mut().find(|(h, _)| *h == hash) {
        slot.1 += 1;
        return;
    }
    if hot.len() < HOT_KEY_SLOTS {
        hot.push((hash, 1));
        return;
    }
    if let Some(min) = hot.iter_mut().min_by_key(|(_, c)| *c) {
        *min = (hash, min.1 + 1);
    }
}

#[cfg(test)]
mod tests {
    use kv_types::{Actor, NodeId, Sibling};

    use super::*;

    fn write(prev: &Object, value: &[u8]) -> Object {
        let actor = Actor {
            node: NodeId::new("node1").unwrap(),
            incarnation: 1,
        };
        prev.update(
            &prev.join(),
            &actor,
            Sibling {
                data: Some(value.to_vec()),
                written_at_ms: 0,
            },
        )
    }

    #[test]
    fn hits_misses_and_out_of_order_writes_keep_the_newest() {
        let cache = ReadCache::new(1 << 20);
        assert!(cache.lookup(b"k").is_none());
        let v1 = write(&Object::new(), b"1");
        let v2 = write(&v1, b"2");
        // The write of v2 is reported before the (older) write of v1.
        cache.observe_write(b"k", &v2);
        cache.observe_write(b"k", &v1);
        assert_eq!(cache.lookup(b"k"), Some(v2));
        let s = cache.stats();
        assert_eq!((s.hits, s.misses, s.entries), (1, 1, 1));
        assert!((s.hit_ratio() - 0.5).abs() < 1e-9);
        cache.invalidate(b"k");
        assert!(cache.lookup(b"k").is_none());
    }

    #[test]
    fn the_byte_bound_evicts_least_recently_used() {
        let one = write(&Object::new(), &[0u8; 1000]);
        let cache = ReadCache::new(size_of(b"k00", &one) * 3);
        for i in 0..10 {
            cache.observe_write(format!("k{i:02}").as_bytes(), &one);
        }
        let s = cache.stats();
        assert_eq!(s.entries, 3);
        assert!(s.bytes <= s.capacity_bytes);
        assert!(cache.lookup(b"k09").is_some());
        assert!(cache.lookup(b"k00").is_none());
    }

    #[test]
    fn a_frequent_key_is_always_among_the_hot_keys() {
        let cache = ReadCache::new(0);
        for i in 0..5000u32 {
            cache.lookup(format!("cold-{i}").as_bytes());
            if i % 10 == 0 {
                cache.lookup(b"hot");
            }
        }
        let hot = cache.hot_keys(5);
        assert_eq!(hot[0].0, key_hash(b"hot"), "{hot:?}");
        // Disabled caching still counts reads.
        assert_eq!(cache.stats().misses, 5500);
    }

    #[test]
    fn decayed_counts_let_the_current_load_take_over() {
        let cache = ReadCache::new(0);
        for _ in 0..1000 {
            cache.lookup(b"yesterday");
        }
        for _ in 0..12 {
            cache.decay_hot();
        }
        for _ in 0..10 {
            cache.lookup(b"today");
        }
        assert_eq!(cache.hot_keys(1)[0].0, key_hash(b"today"));
        for _ in 0..20 {
            cache.decay_hot();
        }
        assert!(cache.hot_keys(5).is_empty());
    }
}
