//! One anti-entropy exchange: a partition's digests are compared, the keys
//! that differ are merged causally and written wherever they are news.

use std::sync::atomic::Ordering;

use kv_replication::testkit::TestCluster;
use kv_types::Object;

use crate::support::{local_write, replicas, stored};

#[tokio::test(start_paused = true)]
async fn an_exchange_makes_two_replicas_of_a_partition_agree() {
    let c = TestCluster::start(3, 3).await;
    let pref = replicas(&c, b"ae-anchor");
    let (a, b) = (c.core(&pref[0]).clone(), c.core(&pref[1]).clone());
    let placement = a.cluster().placement();
    let p = placement.target.key_partition(b"ae-anchor");
    let keys: Vec<Vec<u8>> = (0..100_000)
        .map(|i| format!("ae-{i}").into_bytes())
        .filter(|k| placement.target.key_partition(k) == p)
        .take(6)
        .collect();
    // Five keys only on a; one only on b; one in both, newer on b.
    for key in &keys[..5] {
        local_write(&a, key, b"on-a", &Object::new()).await;
    }
    let only_b = local_write(&b, &keys[5], b"on-b", &Object::new()).await;
    let shared = b"ae-anchor";
    let old = local_write(&a, shared, b"old", &Object::new()).await;
    b.replica().replicate(shared, &old).await.unwrap();
    let newer = local_write(&b, shared, b"new", &old).await;

    a.anti_entropy().exchange(p, &pref[1]).await;
    let progress = a.anti_entropy().progress();
    assert_eq!(progress.keys_repaired.load(Ordering::Relaxed), 7);
    assert_eq!(progress.failures.load(Ordering::Relaxed), 0);
    for key in keys.iter().map(Vec::as_slice).chain([&shared[..]]) {
        let (on_a, on_b) = (stored(&c, &pref[0], key), stored(&c, &pref[1], key));
        assert!(on_a.is_some(), "{}", String::from_utf8_lossy(key));
        assert_eq!(on_a, on_b, "{}", String::from_utf8_lossy(key));
        // The third replica was not part of this exchange.
        assert!(stored(&c, &pref[2], key).is_none());
    }
    assert_eq!(stored(&c, &pref[0], &keys[5]), Some(only_b));
    assert_eq!(stored(&c, &pref[0], shared), Some(newer));

    // Agreement: a second exchange finds nothing to repair.
    let differing = progress.segments_differing.load(Ordering::Relaxed);
    a.anti_entropy().exchange(p, &pref[1]).await;
    assert_eq!(progress.keys_repaired.load(Ordering::Relaxed), 7);
    assert_eq!(
        progress.segments_differing.load(Ordering::Relaxed),
        differing
    );
    assert_eq!(progress.exchanges.load(Ordering::Relaxed), 2);
}
