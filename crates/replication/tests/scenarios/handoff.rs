//! Hinted handoff: hints go to the key's owners as they are now, so a ring
//! change re-targets them, and a target that is down gets a new hint kept
//! on the same node.

use std::sync::atomic::Ordering;

use kv_replication::testkit::TestCluster;
use tokio_util::sync::CancellationToken;

use crate::support::{hint_holder, hints, put, replicas, stored};

#[tokio::test(start_paused = true)]
async fn hints_are_delivered_to_the_owners_after_a_ring_change() {
    let mut c = TestCluster::start(5, 3).await;
    let key = b"handoff";
    let pref = replicas(&c, key);
    let (a, down) = (c.core(&pref[0]).clone(), pref[1].clone());
    c.crash(&down).await;
    a.coordinator()
        .write(1, put(key, b"v", vec![], Some(3)))
        .await
        .unwrap();
    let fallback = c
        .ids()
        .into_iter()
        .find(|n| !hints(&c, n, &down).is_empty())
        .unwrap();

    // The owner is down for good: an admin removes it, and the key gets a
    // new replica. One of the new owners goes down too.
    assert!(!a.cluster().has_left(&down));
    a.cluster().remove(&down).await.unwrap();
    c.settle().await;
    assert!(a.cluster().has_left(&down));
    let after = replicas(&c, key);
    assert!(!after.contains(&down));
    assert!(after.iter().any(|n| !pref.contains(n)));
    let unreachable = after
        .iter()
        .find(|n| **n != pref[0] && **n != fallback)
        .unwrap()
        .clone();
    c.crash(&unreachable).await;

    let stop = CancellationToken::new();
    let handoff = c.core(&fallback).handoff().clone();
    handoff.pass(&stop).await;
    // Delivered to the live owners, kept as a hint for the one that is
    // down; the hint for the removed node is gone.
    assert!(hints(&c, &fallback, &down).is_empty());
    assert_eq!(hints(&c, &fallback, &unreachable), vec![key.to_vec()]);
    for owner in after.iter().filter(|n| **n != unreachable) {
        let o = stored(&c, owner, key).unwrap();
        assert_eq!(
            o.live_values().collect::<Vec<_>>(),
            vec![&b"v"[..]],
            "{owner}"
        );
    }
    assert_eq!(handoff.stats().delivered.load(Ordering::Relaxed), 1);

    // Once that owner is back, the new hint is delivered too.
    c.restart(&unreachable).await;
    c.settle().await;
    handoff.pass(&stop).await;
    assert!(hints(&c, &fallback, &unreachable).is_empty());
    assert!(stored(&c, &unreachable, key).is_some());
    assert_eq!(handoff.stats().delivered.load(Ordering::Relaxed), 2);
}

#[tokio::test(start_paused = true)]
async fn a_hint_waits_while_its_owner_is_down_and_goes_once_it_is_back() {
    let mut c = TestCluster::start(5, 3).await;
    let key = b"handoff-wait";
    let pref = replicas(&c, key);
    let (a, down) = (c.core(&pref[0]).clone(), pref[2].clone());
    c.crash(&down).await;
    a.coordinator()
        .write(1, put(key, b"v", vec![], Some(2)))
        .await
        .unwrap();
    // W=2 is met by the two live replicas; the third copy, a hint, is made
    // in the background.
    let fallback = hint_holder(&c, &down).await;
    let stop = CancellationToken::new();
    let handoff = c.core(&fallback).handoff().clone();
    handoff.pass(&stop).await;
    assert_eq!(hints(&c, &fallback, &down), vec![key.to_vec()]);
    c.restart(&down).await;
    c.settle().await;
    handoff.pass(&stop).await;
    assert!(hints(&c, &fallback, &down).is_empty());
    let o = stored(&c, &down, key).unwrap();
    assert_eq!(o.live_values().collect::<Vec<_>>(), vec![&b"v"[..]]);
}

#[tokio::test(start_paused = true)]
async fn hints_for_a_node_whose_disk_is_full_back_off_and_go_once_space_is_back() {
    let mut c = TestCluster::start(5, 3).await;
    let key = b"handoff-full";
    let pref = replicas(&c, key);
    let (a, full) = (c.core(&pref[0]).clone(), pref[2].clone());
    c.crash(&full).await;
    a.coordinator()
        .write(1, put(key, b"v", vec![], Some(2)))
        .await
        .unwrap();
    let fallback = hint_holder(&c, &full).await;
    c.restart(&full).await;
    c.settle().await;
    c.node(&full).storage.set_disk_full_for_test(true);

    // The first delivery is refused: the hint stays.
    let stop = CancellationToken::new();
    let handoff = c.core(&fallback).handoff().clone();
    let calls = c.network.delivered();
    handoff.pass(&stop).await;
    assert_eq!(hints(&c, &fallback, &full), vec![key.to_vec()]);
    assert_eq!(c.network.delivered(), calls + 1, "one delivery tried");
    // Backing off: the next passes send nothing to it.
    handoff.pass(&stop).await;
    handoff.pass(&stop).await;
    assert_eq!(
        c.network.delivered(),
        calls + 1,
        "no call while backing off"
    );
    assert!(stored(&c, &full, key).is_none());

    // Space is back; after the back-off the hint goes.
    c.node(&full).storage.set_disk_full_for_test(false);
    tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    handoff.pass(&stop).await;
    assert!(hints(&c, &fallback, &full).is_empty());
    let o = stored(&c, &full, key).unwrap();
    assert_eq!(o.live_values().collect::<Vec<_>>(), vec![&b"v"[..]]);
}

/// Seeds 9916, 7306 and 9437 of the simulation: a coordinator whose wall
/// clock ran 2 h behind dated the hint it left on a fallback, the fallback
/// found it older than `[handoff] max_age` (1 h) and dropped it at its
/// next pass; with the write's other copy on a disk that was then
/// replaced, an acknowledged write was lost. A fresh hint is now dated by
/// the fallback's own clock.
#[tokio::test(start_paused = true)]
async fn a_hint_from_a_coordinator_whose_clock_is_behind_is_not_dropped_as_old() {
    let mut c = TestCluster::start(5, 3).await;
    let key = b"handoff-skewed";
    let pref = replicas(&c, key);
    let (coordinator, down) = (pref[0].clone(), pref[2].clone());
    c.node(&coordinator).clock.set_offset_ms(-7_200_000);
    c.crash(&down).await;
    c.core(&coordinator)
        .coordinator()
        .write(1, put(key, b"v", vec![], Some(2)))
        .await
        .unwrap();
    let fallback = hint_holder(&c, &down).await;
    let stop = CancellationToken::new();
    let handoff = c.core(&fallback).handoff().clone();
    handoff.pass(&stop).await;
    assert_eq!(
        hints(&c, &fallback, &down),
        vec![key.to_vec()],
        "the hint waits for its owner"
    );
    assert_eq!(handoff.stats().dropped.load(Ordering::Relaxed), 0);
    c.restart(&down).await;
    c.settle().await;
    handoff.pass(&stop).await;
    assert!(hints(&c, &fallback, &down).is_empty());
    let o = stored(&c, &down, key).unwrap();
    assert_eq!(o.live_values().collect::<Vec<_>>(), vec![&b"v"[..]]);
}
