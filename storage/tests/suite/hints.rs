//! Hint cases of the shared suite: put and merge, iteration by owner,
//! conditional removal, the count, corrupt hints.

use kv_storage::{Error, Hint, Storage};
use kv_types::{NodeId, Object};

use super::Harness;
use crate::common::{blind, overwrite, values};

fn node(id: &str) -> NodeId {
    NodeId::new(id).unwrap()
}

fn collect(iter: kv_storage::HintIter<'_>) -> Vec<Hint> {
    iter.map(Result::unwrap).collect()
}

pub fn hints_merge_and_keep_their_creation_time(h: &impl Harness) {
    let s = h.engine();
    let owner = node("node2");
    let (a, b) = (blind(1, b"a"), blind(3, b"b"));
    assert_eq!(s.hint_count(), 0);
    s.put_hint(&owner, b"k", &a, 100).unwrap();
    assert_eq!(s.hint_count(), 1);
    let want = Hint {
        owner: owner.clone(),
        key: b"k".to_vec(),
        object: a.clone(),
        created_at_ms: 100,
    };
    assert_eq!(collect(s.hints()), vec![want]);
    // A concurrent write for the same owner and key merges into the hint.
    s.put_hint(&owner, b"k", &b, 200).unwrap();
    let hint = collect(s.hints_for(&owner)).remove(0);
    assert_eq!(hint.object, a.sync(&b));
    assert_eq!(values(&hint.object), vec![b"a".to_vec(), b"b".to_vec()]);
    assert_eq!((hint.created_at_ms, s.hint_count()), (100, 1));
    // What the hint already holds writes nothing; an empty object over no
    // hint stores nothing.
    let writes = s.stats().writes;
    s.put_hint(&owner, b"k", &a, 300).unwrap();
    s.put_hint(&owner, b"empty", &Object::new(), 300).unwrap();
    assert_eq!((s.stats().writes, s.hint_count()), (writes, 1));
    // Hints never mix with the node's own objects.
    assert_eq!(s.get(b"k").unwrap(), None);
    assert_eq!(s.scan(0, u64::MAX).count(), 0);
    assert_eq!(s.stats().keys, 0);
    assert!(s.key_digests(0, u64::MAX).unwrap().is_empty());
    assert!(
        s.segment_digests(0, kv_storage::SEGMENTS)
            .iter()
            .all(|d| *d == 0)
    );
    // ... nor objects with hints.
    s.merge(b"k", &blind(4, b"own")).unwrap();
    assert_eq!(collect(s.hints()).len(), 1);
}

pub fn hints_are_grouped_by_owner(h: &impl Harness) {
    let s = h.engine();
    // "node1" is a byte prefix of "node10": the key layout keeps them apart.
    let owners = [node("node1"), node("node10"), node("b")];
    for i in 0..30usize {
        let owner = &owners[i % owners.len()];
        let key = format!("key-{i}");
        s.put_hint(owner, key.as_bytes(), &blind(i, key.as_bytes()), i as u64)
            .unwrap();
    }
    assert_eq!(s.hint_count(), 30);
    let all = collect(s.hints());
    assert_eq!(all.len(), 30);
    // Grouped: the owner changes exactly owners.len() - 1 times.
    let changes = all.windows(2).filter(|w| w[0].owner != w[1].owner).count();
    assert_eq!(changes, owners.len() - 1);
    for owner in &owners {
        let mine = collect(s.hints_for(owner));
        assert_eq!(mine.len(), 10, "{owner}");
        assert!(mine.iter().all(|h| h.owner == *owner));
        // In ring (key hash) order within an owner.
        let hashes: Vec<u64> = mine.iter().map(|h| kv_types::key_hash(&h.key)).collect();
        assert!(hashes.windows(2).all(|w| w[0] <= w[1]));
        for hint in &mine {
            assert_eq!(values(&hint.object), vec![hint.key.clone()]);
        }
    }
    assert_eq!(s.hints_for(&node("node3")).count(), 0);
}

pub fn hints_are_removed_only_as_delivered(h: &impl Harness) {
    let s = h.engine();
    let (owner, other) = (node("node2"), node("node3"));
    let first = blind(1, b"v1");
    s.put_hint(&owner, b"k", &first, 1).unwrap();
    s.put_hint(&other, b"k", &first, 1).unwrap();
    // Delivered, but a newer write was hinted meanwhile: the hint stays.
    let newer = overwrite(&first, 1, Some(b"v2"));
    s.put_hint(&owner, b"k", &newer, 2).unwrap();
    assert!(!s.remove_hint_if(&owner, b"k", &first).unwrap());
    assert_eq!(s.hint_count(), 2);
    let held = collect(s.hints_for(&owner)).remove(0);
    assert_eq!((held.object.clone(), held.created_at_ms), (newer, 1));
    // The next round delivers what is held: now it goes.
    assert!(s.remove_hint_if(&owner, b"k", &held.object).unwrap());
    assert!(!s.remove_hint_if(&owner, b"k", &held.object).unwrap());
    assert_eq!(s.hint_count(), 1);
    assert!(s.hints_for(&owner).next().is_none());
    // Another owner's hint for the same key is untouched.
    assert_eq!(collect(s.hints_for(&other))[0].object, first);
    assert!(!s.remove_hint_if(&other, b"absent", &first).unwrap());
    assert!(s.remove_hint_if(&other, b"k", &first).unwrap());
    assert_eq!(s.hint_count(), 0);
}

pub fn corrupt_hints_are_reported_and_never_delivered(h: &impl Harness) {
    let s = h.engine();
    let owner = node("node2");
    s.put_hint(&owner, b"bad", &blind(1, b"x"), 1).unwrap();
    s.put_hint(&owner, b"good", &blind(1, b"y"), 1).unwrap();
    h.corrupt_hint(&owner, b"bad");
    let rows: Vec<_> = s.hints_for(&owner).collect();
    assert_eq!(rows.len(), 2);
    let good: Vec<_> = rows.iter().filter_map(|r| r.as_ref().ok()).collect();
    assert_eq!(good.len(), 1);
    assert_eq!(good[0].key, b"good");
    assert!(
        rows.iter()
            .any(|r| matches!(r, Err(Error::Corrupt { key, .. }) if key == b"bad"))
    );
    assert_eq!(s.hints().filter(Result::is_err).count(), 1);
    assert_eq!(s.hint_count(), 2, "still stored, still counted");
    assert!(matches!(
        s.remove_hint_if(&owner, b"bad", &blind(1, b"x")),
        Err(Error::Corrupt { .. })
    ));
    // A new write for the owner replaces the unreadable hint.
    let fresh = blind(2, b"z");
    s.put_hint(&owner, b"bad", &fresh, 50).unwrap();
    let hints = collect(s.hints_for(&owner));
    let replaced = hints.iter().find(|h| h.key == b"bad").unwrap();
    assert_eq!((&replaced.object, replaced.created_at_ms), (&fresh, 50));
    assert_eq!(s.hint_count(), 2);
}

pub fn concurrent_hints_for_one_key_all_merge(h: &impl Harness) {
    const THREADS: usize = 4;
    const EACH: usize = 25;
    let s = h.engine();
    let owner = node("node2");
    std::thread::scope(|scope| {
        for t in 0..THREADS {
            let owner = &owner;
            scope.spawn(move || {
                for i in 0..EACH {
                    let write = blind(t * EACH + i, b"w");
                    s.put_hint(owner, b"k", &write, 1).unwrap();
                }
            });
        }
    });
    let hints = collect(s.hints());
    assert_eq!((hints.len(), s.hint_count()), (1, 1));
    assert_eq!(
        hints[0].object.sibling_count(),
        THREADS * EACH,
        "no hinted write was lost"
    );
}
