//! The shared test suite: every case runs against both engines, so the
//! memory engine used by other crates' tests behaves exactly like sled.

// Tests may unwrap: a panic here is a failed assertion (clippy.toml only
// covers `#[test]` functions, not the helpers of integration tests).
#![allow(clippy::unwrap_used)]

mod common;
#[path = "suite/digests.rs"]
mod digests;
#[path = "suite/hints.rs"]
mod hints;

use common::{actor, blind, overwrite, value, values};
use kv_storage::{Error, MemoryEngine, SledEngine, SledSettings, Storage};
use kv_types::{NodeId, Object, key_hash};

/// An engine under test plus its test hooks (and whatever keeps it alive).
trait Harness: Sync {
    type Engine: Storage;
    fn engine(&self) -> &Self::Engine;
    fn corrupt(&self, key: &[u8]);
    fn corrupt_hint(&self, owner: &NodeId, key: &[u8]);
    fn quarantined(&self, key: &[u8]) -> Option<Vec<u8>>;
}

impl Harness for MemoryEngine {
    type Engine = MemoryEngine;
    fn engine(&self) -> &MemoryEngine {
        self
    }
    fn corrupt(&self, key: &[u8]) {
        assert!(self.corrupt_for_test(key));
    }
    fn corrupt_hint(&self, owner: &NodeId, key: &[u8]) {
        assert!(self.corrupt_hint_for_test(owner, key));
    }
    fn quarantined(&self, key: &[u8]) -> Option<Vec<u8>> {
        MemoryEngine::quarantined(self, key)
    }
}

/// A sled engine in a temporary directory (removed when dropped).
struct Sled {
    engine: SledEngine,
    _dir: tempfile::TempDir,
}

impl Harness for Sled {
    type Engine = SledEngine;
    fn engine(&self) -> &SledEngine {
        &self.engine
    }
    fn corrupt(&self, key: &[u8]) {
        assert!(self.engine.corrupt_for_test(key).unwrap());
    }
    fn corrupt_hint(&self, owner: &NodeId, key: &[u8]) {
        assert!(self.engine.corrupt_hint_for_test(owner, key).unwrap());
    }
    fn quarantined(&self, key: &[u8]) -> Option<Vec<u8>> {
        self.engine.quarantined(key).unwrap()
    }
}

fn memory() -> MemoryEngine {
    MemoryEngine::new()
}

fn sled() -> Sled {
    let dir = tempfile::tempdir().unwrap();
    let engine = SledEngine::open(dir.path().join("db"), SledSettings::default()).unwrap();
    Sled { engine, _dir: dir }
}

/// The cases, generic over the engine.
mod cases {
    use super::*;

    pub fn round_trip(h: &impl Harness) {
        let s = h.engine();
        assert_eq!(s.get(b"k").unwrap(), None);
        let obj = blind(1, b"v");
        assert_eq!(s.merge(b"k", &obj).unwrap(), obj);
        assert_eq!(s.get(b"k").unwrap(), Some(obj.clone()));
        assert_eq!(s.get(b"other").unwrap(), None);
        assert_eq!(s.stats().keys, 1);
        // The empty key and binary keys are keys like any other.
        s.merge(b"", &obj).unwrap();
        s.merge(&[0, 255, 10], &obj).unwrap();
        assert_eq!(s.get(b"").unwrap(), Some(obj.clone()));
        assert_eq!(s.get(&[0, 255, 10]).unwrap(), Some(obj));
        assert_eq!(s.stats().keys, 3);
        s.flush().unwrap();
    }

    pub fn merge_keeps_concurrent_siblings_and_drops_superseded(h: &impl Harness) {
        let s = h.engine();
        let (a, b) = (blind(1, b"a"), blind(2, b"b"));
        s.merge(b"k", &a).unwrap();
        let both = s.merge(b"k", &b).unwrap();
        assert_eq!(values(&both), vec![b"a".to_vec(), b"b".to_vec()]);
        // A write that saw both supersedes both.
        let resolved = overwrite(&both, 3, Some(b"c"));
        assert_eq!(
            values(&s.merge(b"k", &resolved).unwrap()),
            vec![b"c".to_vec()]
        );
        // Stale versions arriving late change nothing, and write nothing.
        let writes = s.stats().writes;
        assert_eq!(s.merge(b"k", &a).unwrap(), resolved);
        assert_eq!(s.merge(b"k", &both).unwrap(), resolved);
        assert_eq!(s.stats().writes, writes);
        assert_eq!(s.get(b"k").unwrap(), Some(resolved));
        // Merging nothing into nothing stores nothing.
        assert_eq!(s.merge(b"none", &Object::new()).unwrap(), Object::new());
        assert_eq!(s.get(b"none").unwrap(), None);
    }

    pub fn updates_are_atomic(h: &impl Harness) {
        const THREADS: usize = 8;
        const EACH: usize = 200;
        let s = h.engine();
        std::thread::scope(|scope| {
            for t in 0..THREADS {
                scope.spawn(move || {
                    for i in 0..EACH {
                        let data = format!("{t}-{i}");
                        s.update(b"counter", &mut |stored| {
                            let stored = stored.cloned().unwrap_or_default();
                            Ok(overwrite(&stored, t, Some(data.as_bytes())))
                        })
                        .unwrap();
                    }
                });
            }
        });
        let obj = s.get(b"counter").unwrap().unwrap();
        assert_eq!(obj.sibling_count(), 1, "every update saw every other one");
        let events: u64 = obj.join().entries().iter().map(|(_, n)| n).sum();
        assert_eq!(events, (THREADS * EACH) as u64, "no update was lost");
    }

    pub fn rejected_updates_write_nothing(h: &impl Harness) {
        let s = h.engine();
        let obj = blind(1, b"v");
        s.merge(b"k", &obj).unwrap();
        let err = s
            .update(b"k", &mut |_| {
                Err(Error::Rejected("too many siblings".into()))
            })
            .unwrap_err();
        assert!(
            matches!(&err, Error::Rejected(r) if r == "too many siblings"),
            "{err}"
        );
        assert_eq!(s.get(b"k").unwrap(), Some(obj));
        assert!(
            s.update(b"new", &mut |_| Err(Error::Rejected("no".into())))
                .is_err()
        );
        assert_eq!(s.get(b"new").unwrap(), None);
    }

    pub fn deletes_write_tombstones(h: &impl Harness) {
        let s = h.engine();
        let put = s.merge(b"k", &blind(1, b"v")).unwrap();
        let deleted = s
            .update(b"k", &mut |stored| Ok(overwrite(stored.unwrap(), 2, None)))
            .unwrap();
        assert!(deleted.is_deleted());
        let stored = s.get(b"k").unwrap().unwrap();
        assert!(stored.is_deleted());
        assert!(stored.join().descends(&put.join()));
        // A concurrent write that never saw the delete survives it.
        let concurrent = blind(3, b"w");
        let merged = s.merge(b"k", &concurrent).unwrap();
        assert!(!merged.is_deleted());
        assert_eq!(values(&merged), vec![b"w".to_vec()]);
    }

    pub fn corrupt_records_are_reported_then_quarantined(h: &impl Harness) {
        let s = h.engine();
        s.merge(b"k", &blind(1, b"v")).unwrap();
        h.corrupt(b"k");
        match s.get(b"k") {
            Err(Error::Corrupt { key, .. }) => assert_eq!(key, b"k"),
            other => panic!("expected a corrupt record, got {other:?}"),
        }
        assert_eq!(s.stats().corrupt_quarantined, 0);
        // A merge treats the damaged record as absent and repairs the key.
        let repair = blind(2, b"repaired");
        assert_eq!(s.merge(b"k", &repair).unwrap(), repair);
        assert_eq!(s.get(b"k").unwrap(), Some(repair));
        assert!(h.quarantined(b"k").is_some());
        let stats = s.stats();
        assert_eq!((stats.corrupt_quarantined, stats.keys), (1, 1));
        // Same for update: the closure sees `None`.
        h.corrupt(b"k");
        s.update(b"k", &mut |stored| {
            assert!(stored.is_none());
            Ok(blind(3, b"again"))
        })
        .unwrap();
        assert_eq!(s.stats().corrupt_quarantined, 2);
        // remove_if reports rather than guesses.
        h.corrupt(b"k");
        assert!(matches!(
            s.remove_if(b"k", &Object::new()),
            Err(Error::Corrupt { .. })
        ));
    }

    pub fn scans_return_exactly_the_range_in_hash_order(h: &impl Harness) {
        let s = h.engine();
        let keys: Vec<Vec<u8>> = (0..150).map(|i| format!("key-{i}").into_bytes()).collect();
        for (i, k) in keys.iter().enumerate() {
            s.merge(k, &blind(i % 3, k)).unwrap();
        }
        let scan = |from: u64, to: u64| -> Vec<Vec<u8>> {
            s.scan(from, to)
                .map(|row| {
                    let (k, obj) = row.unwrap();
                    assert_eq!(values(&obj), vec![k.clone()]);
                    k
                })
                .collect()
        };
        let mut by_hash = keys.clone();
        by_hash.sort_by_key(|k| (key_hash(k), k.clone()));
        assert_eq!(scan(0, u64::MAX), by_hash);
        // Partitions of the hash space: each returns exactly its keys.
        let q = 8u64;
        let width = u64::MAX / q + 1;
        let mut all = Vec::new();
        for p in 0..q {
            let (from, to) = (p * width, p * width + (width - 1));
            let got = scan(from, to);
            let want: Vec<Vec<u8>> = by_hash
                .iter()
                .filter(|k| (from..=to).contains(&key_hash(k)))
                .cloned()
                .collect();
            assert_eq!(got, want, "partition {p}");
            all.extend(got);
        }
        assert_eq!(all, by_hash);
        // Single-hash and empty ranges.
        let h0 = key_hash(&keys[0]);
        assert_eq!(scan(h0, h0), vec![keys[0].clone()]);
        assert!(scan(5, 4).is_empty());
        // A corrupt record is reported in place; the scan goes on.
        h.corrupt(&keys[7]);
        let rows: Vec<_> = s.scan(0, u64::MAX).collect();
        assert_eq!(rows.len(), keys.len());
        let bad: Vec<_> = rows.iter().filter(|r| r.is_err()).collect();
        assert_eq!(bad.len(), 1);
        assert!(matches!(bad[0], Err(Error::Corrupt { key, .. }) if *key == keys[7]));
    }

    pub fn remove_if_removes_only_the_expected_version(h: &impl Harness) {
        let s = h.engine();
        let old = s.merge(b"k", &blind(1, b"v1")).unwrap();
        let new = s
            .update(b"k", &mut |stored| Ok(overwrite(stored.unwrap(), 1, None)))
            .unwrap();
        assert!(
            !s.remove_if(b"k", &old).unwrap(),
            "a stale version is not removed"
        );
        assert_eq!(s.get(b"k").unwrap(), Some(new.clone()));
        assert!(s.remove_if(b"k", &new).unwrap());
        assert_eq!(s.get(b"k").unwrap(), None);
        assert!(!s.remove_if(b"k", &new).unwrap(), "already gone");
        assert_eq!(s.stats().keys, 0);
    }

    pub fn metadata_round_trips(h: &impl Harness) {
        let s = h.engine();
        assert_eq!(s.get_meta("incarnation").unwrap(), None);
        s.put_meta("incarnation", &42u64.to_le_bytes()).unwrap();
        s.put_meta("ring", b"").unwrap();
        assert_eq!(
            s.get_meta("incarnation").unwrap(),
            Some(42u64.to_le_bytes().to_vec())
        );
        assert_eq!(s.get_meta("ring").unwrap(), Some(Vec::new()));
        s.put_meta("ring", b"v2").unwrap();
        assert_eq!(s.get_meta("ring").unwrap(), Some(b"v2".to_vec()));
        // Metadata and objects live apart.
        assert_eq!(s.get(b"ring").unwrap(), None);
        assert_eq!(s.stats().keys, 0);
    }

    pub fn values_survive_large_and_many_siblings(h: &impl Harness) {
        let s = h.engine();
        let big = vec![7u8; 256 * 1024];
        let obj = Object::new().update(&Default::default(), &actor(1), value(&big));
        s.merge(b"big", &obj).unwrap();
        assert_eq!(s.get(b"big").unwrap(), Some(obj));
        for i in 0..10 {
            s.merge(b"many", &blind(i, b"x")).unwrap();
        }
        assert_eq!(s.get(b"many").unwrap().unwrap().sibling_count(), 10);
    }
}

macro_rules! suite {
    ($engine:ident, $make:expr) => {
        mod $engine {
            use super::*;

            #[test]
            fn round_trip() {
                cases::round_trip(&$make());
            }
            #[test]
            fn merge_keeps_concurrent_siblings_and_drops_superseded() {
                cases::merge_keeps_concurrent_siblings_and_drops_superseded(&$make());
            }
            #[test]
            fn updates_are_atomic() {
                cases::updates_are_atomic(&$make());
            }
            #[test]
            fn rejected_updates_write_nothing() {
                cases::rejected_updates_write_nothing(&$make());
            }
            #[test]
            fn deletes_write_tombstones() {
                cases::deletes_write_tombstones(&$make());
            }
            #[test]
            fn corrupt_records_are_reported_then_quarantined() {
                cases::corrupt_records_are_reported_then_quarantined(&$make());
            }
            #[test]
            fn scans_return_exactly_the_range_in_hash_order() {
                cases::scans_return_exactly_the_range_in_hash_order(&$make());
            }
            #[test]
            fn remove_if_removes_only_the_expected_version() {
                cases::remove_if_removes_only_the_expected_version(&$make());
            }
            #[test]
            fn metadata_round_trips() {
                cases::metadata_round_trips(&$make());
            }
            #[test]
            fn values_survive_large_and_many_siblings() {
                cases::values_survive_large_and_many_siblings(&$make());
            }
            #[test]
            fn hints_merge_and_keep_their_creation_time() {
                hints::hints_merge_and_keep_their_creation_time(&$make());
            }
            #[test]
            fn hints_are_grouped_by_owner() {
                hints::hints_are_grouped_by_owner(&$make());
            }
            #[test]
            fn hints_are_removed_only_as_delivered() {
                hints::hints_are_removed_only_as_delivered(&$make());
            }
            #[test]
            fn corrupt_hints_are_reported_and_never_delivered() {
                hints::corrupt_hints_are_reported_and_never_delivered(&$make());
            }
            #[test]
            fn concurrent_hints_for_one_key_all_merge() {
                hints::concurrent_hints_for_one_key_all_merge(&$make());
            }
            #[test]
            fn digests_survive_concurrent_writers() {
                digests::digests_survive_concurrent_writers(&$make());
            }
            #[test]
            fn digests_follow_every_write_path() {
                digests::digests_follow_every_write_path(&$make());
            }
            #[test]
            fn damaged_records_leave_the_digests() {
                digests::damaged_records_leave_the_digests(&$make());
            }
            #[test]
            fn digests_match_a_full_scan_in_any_order() {
                digests::digests_match_a_full_scan_in_any_order($make);
            }
        }
    };
}

suite!(memory_engine, memory);
suite!(sled_engine, sled);
