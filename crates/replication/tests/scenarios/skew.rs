//! Clock skew of +-2 h between nodes, with the tombstone grace and the hint
//! age shortened to seconds: ages are measured on one node's clock only, so
//! no tombstone is purged early, no hint expires early, and a causally
//! newer write wins whatever the clocks say.

use std::sync::atomic::Ordering;
use std::time::Duration;

use kv_replication::testkit::{TestCluster, test_settings};
use kv_replication::{ClientWrite, WriteMode};
use tokio_util::sync::CancellationToken;

use crate::support::{eventually, hint_holder, hints, put, replicas, stored};

/// Two hours, ms.
const TWO_HOURS_MS: i64 = 2 * 3600 * 1000;

fn settings(grace: Duration, hint_age: Duration) -> kv_replication::Settings {
    let mut s = test_settings();
    s.anti_entropy.tombstone_grace = grace;
    s.anti_entropy.compaction_age = grace;
    s.handoff.max_age = hint_age;
    s
}

fn delete(key: &[u8], context: Vec<u8>) -> ClientWrite {
    ClientWrite {
        key: key.to_vec(),
        value: None,
        context,
        mode: WriteMode::Context,
        w: Some(3),
    }
}

#[tokio::test(start_paused = true)]
async fn a_tombstone_written_by_a_lagging_clock_waits_its_grace_on_the_purgers_clock() {
    let grace = Duration::from_secs(10);
    let c = TestCluster::with_settings(3, 3, settings(grace, Duration::from_secs(5))).await;
    let key = b"skewed-delete";
    let pref = replicas(&c, key);
    // The purger (first replica) runs 2 h ahead, the coordinator 2 h
    // behind: the tombstone's written_at_ms is 4 h in the purger's past.
    c.node(&pref[0]).clock.set_offset_ms(TWO_HOURS_MS);
    c.node(&pref[1]).clock.set_offset_ms(-TWO_HOURS_MS);
    let coordinator = c.core(&pref[1]).coordinator().clone();
    coordinator
        .write(1, put(key, b"v", vec![], Some(3)))
        .await
        .unwrap();
    let read = coordinator.get(2, key, Some(3)).await.unwrap();
    coordinator
        .write(3, delete(key, read.context))
        .await
        .unwrap();
    let deleted = tokio::time::Instant::now();
    for id in c.ids() {
        c.start_background(&id);
    }
    // Anti-entropy runs every 50 ms: for most of the grace every replica
    // still holds the tombstone.
    while deleted.elapsed() < grace - Duration::from_secs(1) {
        for id in &pref {
            let o = stored(&c, id, key).expect("tombstone purged before its grace");
            assert!(o.values().all(|s| s.is_tombstone()), "{o:?}");
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    // Once the grace has passed on the purger's clock, it is purged
    // everywhere.
    eventually("the tombstone is purged after its grace", || {
        pref.iter().all(|id| stored(&c, id, key).is_none())
    })
    .await;
    assert!(deleted.elapsed() >= grace);
    let purged = c
        .core(&pref[0])
        .anti_entropy()
        .progress()
        .tombstones_purged
        .load(Ordering::Relaxed);
    assert_eq!(purged, 1);
}

#[tokio::test(start_paused = true)]
async fn a_hint_from_a_lagging_coordinator_lives_its_whole_age_on_the_fallback() {
    let hint_age = Duration::from_secs(5);
    let mut c = TestCluster::with_settings(5, 3, settings(Duration::from_secs(10), hint_age)).await;
    let key = b"skewed-hint";
    let pref = replicas(&c, key);
    let (coordinator, down) = (pref[0].clone(), pref[2].clone());
    // The coordinator runs 2 h behind, every other node 2 h ahead.
    for id in c.ids() {
        let offset = if id == coordinator {
            -TWO_HOURS_MS
        } else {
            TWO_HOURS_MS
        };
        c.node(&id).clock.set_offset_ms(offset);
    }
    c.crash(&down).await;
    c.core(&coordinator)
        .coordinator()
        .write(1, put(key, b"v", vec![], Some(2)))
        .await
        .unwrap();
    let fallback = hint_holder(&c, &down).await;
    let made = tokio::time::Instant::now();
    let stop = CancellationToken::new();
    let handoff = c.core(&fallback).handoff().clone();
    // Handoff passes while the owner is down, until just before the hint's
    // age: the hint stays (measured on the fallback's clock from when it
    // stored it, not from the coordinator's clock 4 h behind).
    while made.elapsed() < hint_age - Duration::from_secs(1) {
        handoff.pass(&stop).await;
        assert_eq!(hints(&c, &fallback, &down), vec![key.to_vec()]);
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    assert_eq!(handoff.stats().dropped.load(Ordering::Relaxed), 0);
    // The owner is back within the hint's age: the hint is delivered.
    c.restart(&down).await;
    c.settle().await;
    handoff.pass(&stop).await;
    assert!(hints(&c, &fallback, &down).is_empty());
    let o = stored(&c, &down, key).unwrap();
    assert_eq!(o.live_values().collect::<Vec<_>>(), vec![&b"v"[..]]);
    assert_eq!(handoff.stats().dropped.load(Ordering::Relaxed), 0);
}

#[tokio::test(start_paused = true)]
async fn a_causally_newer_write_wins_over_a_clock_that_runs_ahead() {
    let c = TestCluster::with_settings(
        3,
        3,
        settings(Duration::from_secs(10), Duration::from_secs(5)),
    )
    .await;
    let key = b"skewed-order";
    let pref = replicas(&c, key);
    c.node(&pref[0]).clock.set_offset_ms(TWO_HOURS_MS);
    c.node(&pref[1]).clock.set_offset_ms(-TWO_HOURS_MS);
    let ahead = c.core(&pref[0]).coordinator().clone();
    let behind = c.core(&pref[1]).coordinator().clone();
    ahead
        .write(1, put(key, b"old", vec![], Some(3)))
        .await
        .unwrap();
    let read = behind.get(2, key, Some(3)).await.unwrap();
    // Written 4 h "earlier" by wall clocks, but after reading "old".
    behind
        .write(3, put(key, b"new", read.context, Some(3)))
        .await
        .unwrap();
    for coordinator in [&ahead, &behind] {
        let read = coordinator.get(4, key, Some(3)).await.unwrap();
        assert_eq!(read.values(), vec![b"new".to_vec()]);
    }
    for id in &pref {
        let o = stored(&c, id, key).unwrap();
        assert_eq!(o.live_values().collect::<Vec<_>>(), vec![&b"new"[..]]);
    }
}
