//! Anti-entropy digest cases of the shared suite: digests follow every
//! write path, match a full scan, do not depend on write order, and a
//! change to one key changes exactly its segment.

use std::collections::HashMap;
use std::sync::OnceLock;

use kv_storage::digest::{partition_segments, segment_of};
use kv_storage::{Error, MemoryEngine, SEGMENTS, Storage, combine, item_digest};
use kv_types::{Object, key_hash};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};

use super::Harness;
use crate::common::{blind, overwrite};

/// Every segment digest of `s`.
fn all(s: &impl Storage) -> Vec<u64> {
    s.segment_digests(0, SEGMENTS)
}

/// The digests recomputed from a full scan (corrupt records contribute
/// nothing), and the readable objects.
fn recomputed(s: &impl Storage) -> (Vec<u64>, Vec<(Vec<u8>, Object)>) {
    let mut digests = vec![0u64; SEGMENTS as usize];
    let mut objects = Vec::new();
    for row in s.scan(0, u64::MAX) {
        match row {
            Ok((key, object)) => {
                let cell = &mut digests[segment_of(key_hash(&key)) as usize];
                *cell = cell.wrapping_add(item_digest(&key, &object));
                objects.push((key, object));
            }
            Err(Error::Corrupt { .. }) => {}
            Err(e) => panic!("scan failed: {e}"),
        }
    }
    (digests, objects)
}

/// Indexes of the segments where `a` and `b` differ.
fn differing(a: &[u64], b: &[u64]) -> Vec<u32> {
    (0..SEGMENTS)
        .filter(|&i| a[i as usize] != b[i as usize])
        .collect()
}

/// The key pool of the property test: a few keys, two of which share a
/// segment (so that sums within a segment are exercised).
fn pool() -> &'static [Vec<u8>] {
    static POOL: OnceLock<Vec<Vec<u8>>> = OnceLock::new();
    POOL.get_or_init(|| {
        let mut seen: HashMap<u32, Vec<u8>> = HashMap::new();
        let mut keys: Vec<Vec<u8>> = (0..6).map(|i| format!("key-{i}").into_bytes()).collect();
        for i in 0.. {
            let key = format!("pair-{i}").into_bytes();
            if let Some(first) = seen.insert(segment_of(key_hash(&key)), key.clone()) {
                keys.extend([first, key]);
                break;
            }
        }
        keys
    })
}

pub fn digests_follow_every_write_path(h: &impl Harness) {
    let s = h.engine();
    assert!(all(s).iter().all(|d| *d == 0));
    assert_eq!(s.segment_digests(SEGMENTS - 6, 100).len(), 6);
    assert!(s.segment_digests(SEGMENTS, 1).is_empty());
    let key = b"k";
    let segment = segment_of(key_hash(key)) as usize;
    let put = s.merge(key, &blind(1, b"v")).unwrap();
    assert_eq!(all(s)[segment], item_digest(key, &put));
    assert_eq!(
        s.key_digests(0, u64::MAX).unwrap(),
        vec![(key.to_vec(), item_digest(key, &put))]
    );
    let before = all(s);
    let deleted = s
        .update(key, &mut |stored| Ok(overwrite(stored.unwrap(), 2, None)))
        .unwrap();
    let after = all(s);
    assert_eq!(differing(&before, &after), vec![segment as u32]);
    assert_eq!(after[segment], item_digest(key, &deleted));
    assert!(s.remove_if(key, &deleted).unwrap());
    assert!(all(s).iter().all(|d| *d == 0));
    // A partition's root is the combination of its segments' digests.
    s.merge(key, &put).unwrap();
    let partition = (key_hash(key) >> 54) as u32; // Q = 1024
    let range = partition_segments(partition, 1024);
    assert!(range.contains(&(segment as u32)));
    let leaves = s.segment_digests(range.start, range.end - range.start);
    assert_eq!(leaves.len(), 64);
    assert_ne!(combine(&leaves), combine(&[0; 64]));
}

pub fn damaged_records_leave_the_digests(h: &impl Harness) {
    let s = h.engine();
    let (a, b) = (&pool()[6], &pool()[7]); // Same segment.
    let segment = segment_of(key_hash(a));
    let obj_b = s.merge(b, &blind(2, b"b")).unwrap();
    s.merge(a, &blind(1, b"a")).unwrap();
    h.corrupt(a);
    // Drilling in lists only the readable key, and the segment digest is
    // recomputed without the damaged one, so an exchange will repair it.
    let (from, to) = kv_storage::digest::segment_hashes(segment);
    let listed = s.key_digests(from, to).unwrap();
    assert_eq!(listed, vec![(b.clone(), item_digest(b, &obj_b))]);
    assert_eq!(s.segment_digests(segment, 1), vec![item_digest(b, &obj_b)]);
    // The repair (a merge over the damaged record) restores it.
    let repaired = s.merge(a, &blind(3, b"again")).unwrap();
    let want = item_digest(a, &repaired).wrapping_add(item_digest(b, &obj_b));
    assert_eq!(s.segment_digests(segment, 1), vec![want]);
    assert_eq!(all(s), recomputed(s).0);
    // A get that meets damage also takes it out of the digest.
    h.corrupt(b);
    assert!(s.get(b).is_err());
    assert_eq!(
        s.segment_digests(segment, 1),
        vec![item_digest(a, &repaired)]
    );
}

/// One step of the property test.
#[derive(Debug, Clone)]
enum Op {
    /// A blind write by actor `.1` merged in (a replica's incoming write).
    Merge(usize, usize, Vec<u8>),
    /// A write (value or delete) by actor `.1` that saw the stored object.
    Update(usize, usize, Option<Vec<u8>>),
    /// Remove the key if it still holds what was just read.
    RemoveCurrent(usize),
    /// Remove the key only if it holds a version it does not hold.
    RemoveStale(usize),
    /// Damage the stored record and let a read find it.
    Corrupt(usize),
}

fn op() -> impl Strategy<Value = Op> {
    let key = 0..pool().len();
    let data = prop::collection::vec(any::<u8>(), 0..4);
    prop_oneof![
        3 => (key.clone(), 0usize..3, data.clone()).prop_map(|(k, a, d)| Op::Merge(k, a, d)),
        3 => (key.clone(), 0usize..3, prop::option::of(data)).prop_map(|(k, a, d)| Op::Update(k, a, d)),
        1 => key.clone().prop_map(Op::RemoveCurrent),
        1 => key.clone().prop_map(Op::RemoveStale),
        1 => key.prop_map(Op::Corrupt),
    ]
}

fn apply(h: &impl Harness, op: &Op) {
    let s = h.engine();
    match op {
        Op::Merge(k, a, d) => {
            s.merge(&pool()[*k], &blind(*a, d)).unwrap();
        }
        Op::Update(k, a, d) => {
            s.update(&pool()[*k], &mut |stored| {
                Ok(overwrite(
                    &stored.cloned().unwrap_or_default(),
                    *a,
                    d.as_deref(),
                ))
            })
            .unwrap();
        }
        Op::RemoveCurrent(k) => {
            if let Ok(Some(current)) = s.get(&pool()[*k]) {
                assert!(s.remove_if(&pool()[*k], &current).unwrap());
            }
        }
        Op::RemoveStale(k) => match s.remove_if(&pool()[*k], &blind(9, b"never")) {
            Ok(removed) => assert!(!removed),
            Err(e) => assert!(matches!(e, Error::Corrupt { .. }), "{e}"),
        },
        Op::Corrupt(k) => {
            if matches!(s.get(&pool()[*k]), Ok(Some(_))) {
                h.corrupt(&pool()[*k]);
                assert!(s.get(&pool()[*k]).is_err());
            }
        }
    }
}

/// The digest properties, over random sequences of writes; `make` builds a
/// fresh engine of the kind under test.
pub fn digests_match_a_full_scan_in_any_order<H: Harness>(make: fn() -> H) {
    let config = Config {
        cases: 24,
        failure_persistence: None,
        ..Config::default()
    };
    let ops = prop::collection::vec(op(), 1..24);
    TestRunner::new(config)
        .run(&ops, |ops| {
            let h = make();
            for op in &ops {
                apply(&h, op);
            }
            let s = h.engine();
            let (want, objects) = recomputed(s);
            prop_assert_eq!(differing(&all(s), &want), Vec::<u32>::new());
            let listed: Vec<(Vec<u8>, u64)> = objects
                .iter()
                .map(|(k, o)| (k.clone(), item_digest(k, o)))
                .collect();
            prop_assert_eq!(s.key_digests(0, u64::MAX).unwrap(), listed);
            // Same objects, written in the opposite order, into another
            // engine of the same kind and into a memory engine.
            let other = make();
            let memory = MemoryEngine::new();
            for (k, o) in objects.iter().rev() {
                other.engine().merge(k, o).unwrap();
                memory.merge(k, o).unwrap();
            }
            prop_assert_eq!(differing(&all(other.engine()), &want), Vec::<u32>::new());
            prop_assert_eq!(differing(&all(&memory), &want), Vec::<u32>::new());
            // A change to one key changes exactly its segment.
            let key = &pool()[ops.len() % pool().len()];
            let before = all(s);
            s.merge(key, &blind(7, b"change")).unwrap();
            prop_assert_eq!(differing(&before, &all(s)), vec![segment_of(key_hash(key))]);
            Ok(())
        })
        .unwrap();
}

pub fn digests_survive_concurrent_writers(h: &impl Harness) {
    const THREADS: usize = 4;
    const EACH: usize = 40;
    let s = h.engine();
    std::thread::scope(|scope| {
        for t in 0..THREADS {
            scope.spawn(move || {
                for i in 0..EACH {
                    // Every thread writes every pool key, the same-segment
                    // pair included, and removes some of them again.
                    let key = &pool()[(i + t) % pool().len()];
                    let obj = s
                        .update(key, &mut |stored| {
                            Ok(overwrite(
                                &stored.cloned().unwrap_or_default(),
                                t,
                                Some(b"v"),
                            ))
                        })
                        .unwrap();
                    if i % 7 == 0 {
                        s.remove_if(key, &obj).unwrap();
                    }
                }
            });
        }
    });
    assert_eq!(differing(&all(s), &recomputed(s).0), Vec::<u32>::new());
}
