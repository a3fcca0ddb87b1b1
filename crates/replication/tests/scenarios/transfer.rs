//! The transfer state machine: a JOINING node pulls its partitions and
//! becomes UP; a DRAINING node becomes LEFT once every node pulled what it
//! gained.

use std::sync::Arc;

use kv_replication::testkit::{TestCluster, id, test_settings};
use kv_replication::{Core, Settings};
use kv_types::NodeStatus;
use tokio_util::sync::CancellationToken;

use crate::support::{eventually, local_write, put, replicas, stored};

#[tokio::test(start_paused = true)]
async fn a_joining_node_becomes_up_and_a_draining_node_left() {
    let mut c = TestCluster::start(3, 3).await;
    let keys: Vec<Vec<u8>> = (0..60).map(|i| format!("t-{i}").into_bytes()).collect();
    let coordinator = c.core(&id(1)).clone();
    for (i, key) in keys.iter().enumerate() {
        coordinator
            .coordinator()
            .write(i as u64, put(key, b"v", vec![], Some(3)))
            .await
            .unwrap();
    }
    let stop = CancellationToken::new();

    // node4 joins: it is a pending owner of some partitions, holds nothing
    // yet, and is UP only once it pulled them all.
    let joiner = c.add(id(4), "zone-a", true).await;
    c.settle().await;
    assert_eq!(joiner.cluster().status(), NodeStatus::Joining);
    let pending = joiner.cluster().placement().pending_for(&id(4));
    assert!(!pending.is_empty());
    assert_eq!(joiner.transfer().status().pending, pending.len() as u64);
    joiner.transfer().round(&stop).await;
    assert_eq!(joiner.cluster().status(), NodeStatus::Up);
    assert_eq!(joiner.transfer().status().pending, 0);
    c.settle().await;
    let placement = joiner.cluster().placement();
    assert!(!placement.is_moving());
    for key in &keys {
        let owners = replicas(&c, key);
        assert_eq!(
            owners.contains(&id(4)),
            stored(&c, &id(4), key).is_some(),
            "{}",
            String::from_utf8_lossy(key)
        );
    }

    // node1 drains: the others pull what they gain, then node1 is LEFT.
    let leaving = c.core(&id(1)).clone();
    let plan = leaving.drain(false).await.unwrap();
    assert!(plan.started && plan.partitions > 0);
    assert_eq!(leaving.cluster().status(), NodeStatus::Draining);
    c.settle().await;
    // Not LEFT while others still have partitions to pull.
    leaving.transfer().round(&stop).await;
    assert_eq!(leaving.cluster().status(), NodeStatus::Draining);
    for n in [id(2), id(3), id(4)] {
        c.core(&n).transfer().round(&stop).await;
        assert_eq!(c.core(&n).transfer().status().pending, 0, "{n}");
    }
    leaving.transfer().round(&stop).await;
    assert_eq!(leaving.cluster().status(), NodeStatus::Left);
    c.settle().await;
    // Everyone knows it is out for good (a `kvctl remove` of it has
    // nothing left to do); the members are not.
    for n in [id(1), id(2), id(3), id(4)] {
        assert!(c.core(&n).cluster().has_left(&id(1)), "{n}");
        assert!(!c.core(&n).cluster().has_left(&id(2)), "{n}");
    }
    for key in &keys {
        let owners = replicas(&c, key);
        assert!(!owners.contains(&id(1)));
        for owner in &owners {
            assert!(stored(&c, owner, key).is_some(), "{owner}");
        }
    }
}

/// Three nodes holding `count` keys `PREFIX-i` (written with W = 3), and
/// node4 joining them, settled: the cluster, the joiner and the keys whose
/// partitions are pending for it.
async fn joining(
    settings: Settings,
    prefix: &str,
    count: usize,
) -> (TestCluster, Arc<Core>, Vec<Vec<u8>>) {
    let mut c = TestCluster::with_settings(3, 3, settings).await;
    let keys: Vec<Vec<u8>> = (0..count)
        .map(|i| format!("{prefix}-{i}").into_bytes())
        .collect();
    let coordinator = c.core(&id(1)).clone();
    for (i, key) in keys.iter().enumerate() {
        coordinator
            .coordinator()
            .write(i as u64, put(key, b"v1", vec![], Some(3)))
            .await
            .unwrap();
    }
    let joiner = c.add(id(4), "zone-a", true).await;
    c.settle().await;
    let placement = joiner.cluster().placement();
    let pending = placement.pending_for(&id(4));
    let moving = keys
        .into_iter()
        .filter(|k| pending.contains(&placement.key_replicas(k).0))
        .collect();
    (c, joiner, moving)
}

/// A joiner pulls each partition in full from one holder only, and from
/// the others just the segments whose digests differ: a newer version
/// held by one non-source holder, and a key only it holds, still reach it.
#[tokio::test(start_paused = true)]
async fn a_joiner_pulls_each_partition_once_and_the_differences_from_the_other_holders() {
    let (c, joiner, moving) = joining(test_settings(), "o", 300).await;
    let stop = CancellationToken::new();
    let placement = joiner.cluster().placement();
    let pending = placement.pending_for(&id(4));
    assert!(moving.len() >= 20, "{} keys move", moving.len());

    // For a few moving keys, a holder the joiner does not pull in full
    // (not the one the target ring displaces) alone takes a newer write;
    // and it alone holds a key nobody else has.
    let mut expected = Vec::new();
    for key in moving.iter().take(5) {
        let (p, replicas) = placement.key_replicas(key);
        let target = placement.target.preference_list(p);
        let other = replicas
            .current
            .iter()
            .find(|h| target.contains(h))
            .unwrap()
            .clone();
        let seen = stored(&c, &other, key).unwrap();
        let newer = local_write(c.core(&other), key, b"v2", &seen).await;
        expected.push(((*key).clone(), newer));
    }
    let lone = (0..)
        .map(|i| format!("lone-{i}").into_bytes())
        .find(|k| pending.contains(&placement.key_replicas(k).0))
        .unwrap();
    let (p, replicas) = placement.key_replicas(&lone);
    let target = placement.target.preference_list(p);
    let other = replicas
        .current
        .iter()
        .find(|h| target.contains(h))
        .unwrap()
        .clone();
    let only = local_write(c.core(&other), &lone, b"alone", &kv_types::Object::new()).await;
    expected.push((lone, only));

    joiner.transfer().round(&stop).await;
    assert_eq!(joiner.cluster().status(), NodeStatus::Up);
    for (key, object) in &expected {
        assert_eq!(
            stored(&c, &id(4), key).as_ref(),
            Some(object),
            "{}",
            String::from_utf8_lossy(key)
        );
    }
    for key in &moving {
        assert!(stored(&c, &id(4), key).is_some());
    }
    // Each moving key once from its source, plus the few segments that
    // differed (each a handful of keys): not once per holder (3x).
    let received = joiner.transfer().objects_received();
    assert!(received >= moving.len() as u64, "{received}");
    assert!(
        received < moving.len() as u64 * 3 / 2,
        "{received} objects for {} keys",
        moving.len()
    );
    // A changed key's segment differs from the holder that changed it,
    // and then (the joiner holding the newer version) from the third one.
    let reconciled = joiner.transfer().segments_reconciled();
    assert!(
        (1..=2 * expected.len() as u64).contains(&reconciled),
        "{reconciled} segments"
    );
}

/// Reads of a moving partition back-fill its pending owner, at most
/// `back_fills_per_sec` a second from one coordinator; the rest are
/// skipped (the pull brings those keys) and counted.
#[tokio::test(start_paused = true)]
async fn read_back_fills_stay_within_their_rate() {
    let mut settings = test_settings();
    settings.transfer.back_fills_per_sec = 10;
    let (c, joiner, moving) = joining(settings, "b", 200).await;
    let coordinator = c.core(&id(1)).clone();
    assert!(moving.len() >= 40, "{} keys move", moving.len());

    // A burst of reads in no time: one second's worth goes out.
    for (i, key) in moving.iter().enumerate() {
        coordinator
            .coordinator()
            .read(1000 + i as u64, key, None, false)
            .await
            .unwrap();
    }
    let (sent, skipped) = coordinator.coordinator().back_fills();
    assert_eq!(sent, 10);
    assert_eq!(skipped, moving.len() as u64 - 10);
    let filled = || {
        moving
            .iter()
            .filter(|k| stored(&c, &id(4), k).is_some())
            .count()
    };
    eventually("ten keys back-filled", || filled() >= 10).await;
    assert_eq!(filled(), 10);

    // Two seconds later: ten more (the bucket banks at most one second).
    tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    for (i, key) in moving.iter().enumerate() {
        coordinator
            .coordinator()
            .read(2000 + i as u64, key, None, false)
            .await
            .unwrap();
    }
    assert_eq!(coordinator.coordinator().back_fills().0, 20);
    // The pull still brings every key.
    joiner.transfer().round(&CancellationToken::new()).await;
    for key in &moving {
        assert!(stored(&c, &id(4), key).is_some());
    }
}

/// A partition whose comparison with a holder failed is retried with the
/// comparison only: its full pull from the source is not repeated.
#[tokio::test(start_paused = true)]
async fn a_failed_comparison_does_not_repeat_the_full_pull() {
    let (c, joiner, moving) = joining(test_settings(), "r", 300).await;
    let stop = CancellationToken::new();
    let placement = joiner.cluster().placement();
    // Every moving key, by whether node2 is the holder its partition is
    // pulled from in full (the one the target ring displaces).
    let (from_node2, others): (Vec<&Vec<u8>>, Vec<&Vec<u8>>) = moving.iter().partition(|k| {
        let p = placement.key_replicas(k).0;
        !placement.target.preference_list(p).contains(&id(2))
    });
    assert!(!from_node2.is_empty() && !others.is_empty());

    // node2 unreachable from the joiner: its partitions fail; the others
    // are pulled in full from their source but cannot be compared with
    // node2, so they are not done either.
    c.network.cut(&id(4), &id(2));
    joiner.transfer().round(&stop).await;
    assert_eq!(joiner.cluster().status(), NodeStatus::Joining);
    assert_eq!(joiner.transfer().objects_received(), others.len() as u64);

    // Healed: node2's partitions are pulled; the others only compared.
    c.network.heal();
    joiner.transfer().round(&stop).await;
    assert_eq!(joiner.cluster().status(), NodeStatus::Up);
    assert_eq!(
        joiner.transfer().objects_received(),
        (others.len() + from_node2.len()) as u64
    );
}
