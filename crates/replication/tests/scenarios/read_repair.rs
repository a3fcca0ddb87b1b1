//! Read repair: a quorum read sends the merged object to the replicas that
//! answered with something older, and to nobody else.

use kv_replication::testkit::TestCluster;
use kv_storage::Storage;
use kv_types::Object;

use crate::support::{eventually, local_write, replicas, stored};

#[tokio::test(start_paused = true)]
async fn a_read_repairs_the_stale_replicas_it_asked_and_only_them() {
    let c = TestCluster::start(3, 3).await;
    let key = b"repair";
    let pref = replicas(&c, key);
    let (a, b) = (c.core(&pref[0]).clone(), c.core(&pref[1]).clone());
    // a holds v2, which supersedes v1; b holds v1; the third nothing.
    let v1 = local_write(&a, key, b"v1", &Object::new()).await;
    b.replica().replicate(key, &v1).await.unwrap();
    let v2 = local_write(&a, key, b"v2", &v1).await;

    let before = c.network.delivered();
    let read = a.coordinator().get(1, key, Some(2)).await.unwrap();
    assert_eq!(read.values(), vec![b"v2".to_vec()]);
    assert_eq!(read.object, v2);
    eventually("b repaired", || {
        stored(&c, &pref[1], key) == Some(v2.clone())
    })
    .await;
    // One read of b and one repair of b went over the network; the third
    // replica was not asked, so it is not repaired either.
    assert_eq!(c.network.delivered() - before, 2);
    assert!(stored(&c, &pref[2], key).is_none());

    // Both answers agree now: nothing to repair.
    let before = c.network.delivered();
    a.coordinator().get(2, key, Some(2)).await.unwrap();
    tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    assert_eq!(c.network.delivered() - before, 1);
}

/// A replica whose record fails its checksum answers `Corrupt`: the read
/// asks the next replica instead (the damaged one counts nothing toward
/// R) and rewrites the damaged record with what it read. No background
/// service runs here (no anti-entropy, no scrub): the read alone repairs.
#[tokio::test(start_paused = true)]
async fn a_read_repairs_a_replica_that_answered_corrupt() {
    let c = TestCluster::start(3, 3).await;
    let key = b"damaged";
    let pref = replicas(&c, key);
    let a = c.core(&pref[0]).clone();
    let v1 = local_write(&a, key, b"v1", &Object::new()).await;
    for id in &pref[1..] {
        c.core(id).replica().replicate(key, &v1).await.unwrap();
    }
    // The coordinator's own record is damaged (on disk, not in its read
    // cache, as after a restart): it is asked first.
    assert!(c.node(&pref[0]).storage.corrupt_for_test(key));
    a.replica().cache().invalidate(key);
    assert!(c.node(&pref[0]).storage.get(key).is_err());
    let quarantined_before = c.node(&pref[0]).storage.stats().corrupt_quarantined;

    let read = a.coordinator().get(1, key, Some(2)).await.unwrap();
    assert_eq!(read.values(), vec![b"v1".to_vec()]);
    eventually("the damaged replica repaired", || {
        c.node(&pref[0]).storage.get(key).ok().flatten() == Some(v1.clone())
    })
    .await;
    let storage = &c.node(&pref[0]).storage;
    assert_eq!(storage.stats().corrupt_quarantined, quarantined_before + 1);
    assert!(storage.quarantined(key).is_some(), "damaged bytes kept");
}

/// A read that fails (R=3 with one replica damaged) still repairs the
/// damaged one with what the others answered, so the next R=3 read
/// succeeds.
#[tokio::test(start_paused = true)]
async fn a_failed_read_still_repairs_the_corrupt_replica() {
    let c = TestCluster::start(3, 3).await;
    let key = b"damaged-all";
    let pref = replicas(&c, key);
    let a = c.core(&pref[0]).clone();
    let v1 = local_write(&a, key, b"v1", &Object::new()).await;
    for id in &pref[1..] {
        c.core(id).replica().replicate(key, &v1).await.unwrap();
    }
    assert!(c.node(&pref[2]).storage.corrupt_for_test(key));
    c.core(&pref[2]).replica().cache().invalidate(key);

    let err = a.coordinator().get(1, key, Some(3)).await.unwrap_err();
    assert!(err.to_string().contains("corrupt"), "{err}");
    eventually("the damaged replica repaired", || {
        stored_ok(&c, &pref[2], key) == Some(v1.clone())
    })
    .await;
    let read = a.coordinator().get(2, key, Some(3)).await.unwrap();
    assert_eq!(read.values(), vec![b"v1".to_vec()]);
}

fn stored_ok(c: &TestCluster, id: &kv_types::NodeId, key: &[u8]) -> Option<Object> {
    c.node(id).storage.get(key).ok().flatten()
}
