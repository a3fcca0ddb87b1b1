//! Tombstones: a deleted key's tombstone is purged only once every replica
//! holds it and the grace period has passed, so a replica that was down
//! longer than the grace period does not bring the deleted value back.
//!
//! The rule under test (node/src/antientropy.rs): purge needs every
//! replica's agreement, not only time. If purging went by time alone, the
//! tombstone would be gone before node3 returned with its old value, and the
//! final reads below would find "v1" again.
//!
//! And a tombstone outlives the hints of what it superseded: a fallback
//! that was down with a hint of the deleted value delivers it after the
//! grace period, and the value must meet the tombstone, not come back.

#![allow(clippy::unwrap_used)]

use std::time::{Duration, Instant};

use kv_tests::{DEADLINE, TestCluster, poll_until};
use kv_types::Object;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_down_past_the_grace_period_does_not_resurrect_a_deleted_key() {
    let cluster = TestCluster::builder(3)
        .setting("anti_entropy", "tombstone_grace_secs", "2")
        .fast_anti_entropy()
        .short_hints(1)
        .start()
        .await
        .unwrap();
    let key = "ghost";
    let put = cluster
        .kvctl(&["put", key, "v1", "--w", "3"])
        .await
        .unwrap();
    assert_eq!(put.code, 0, "{put}");
    let client = cluster.client(&[1, 2]).await.unwrap();

    // node3 goes down holding v1; the delete reaches node1 and node2 only
    // (3 nodes: there is no fallback to hold a hint for node3).
    cluster.kill(3).unwrap();
    cluster.wait_dead(3).await.unwrap();
    let delete = cluster.kvctl_on(&[1], &["delete", key]).await.unwrap();
    assert_eq!(delete.code, 0, "{delete}");

    // Observation window (not synchronisation): well past the 2 s grace
    // period, the tombstone must stay, since node3 has not got it.
    let window = Instant::now() + Duration::from_secs(6);
    while Instant::now() < window {
        for i in [1, 2] {
            let stored = cluster.local_get(&client, i, key.as_bytes()).await.unwrap();
            let object = stored.unwrap_or_else(|| {
                panic!("node{i} purged the tombstone while node3 was down without it")
            });
            assert!(object.is_deleted(), "node{i} holds {object:?}");
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }

    // node3 returns with v1. Anti-entropy gives it the tombstone (which
    // supersedes v1), then every replica agrees and the key is purged.
    cluster.start_node(3).await.unwrap();
    cluster.wait_alive(3).await.unwrap();
    let client = cluster.client(&[1, 2, 3]).await.unwrap();
    let started = Instant::now();
    // The purge waits for the partition's turn in the anti-entropy
    // schedule (one partition per interval) once every replica holds it.
    poll_until(
        "the key purged on every replica",
        DEADLINE * 3,
        async || {
            for i in [1, 2, 3] {
                if let Some(object) = cluster
                    .local_get(&client, i, key.as_bytes())
                    .await
                    .map_err(|e| format!("{e:#}"))?
                {
                    if !object.is_deleted() {
                        return Err(format!("node{i} holds a live value again: {object:?}"));
                    }
                    return Err(format!("node{i} still holds the tombstone"));
                }
            }
            Ok(())
        },
    )
    .await
    .unwrap();
    println!(
        "tombstone purged on all 3 replicas {:.1} s after node3 returned",
        started.elapsed().as_secs_f64()
    );

    // Nothing came back: every node answers "not found".
    for i in [1, 2, 3] {
        let get = cluster.kvctl_on(&[i], &["get", key]).await.unwrap();
        assert_eq!(get.code, 1, "get through node{i}: {get}");
        assert!(!get.stdout.contains("v1"), "get through node{i}: {get}");
    }
}

/// The hint lifetime of the test below: `handoff.max_age_secs`.
const HINT_MAX_AGE_SECS: u64 = 30;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_late_hint_does_not_resurrect_a_deleted_key() {
    // A 1 s grace period, but hints live 30 s: the purge must wait for
    // the hints (node/src/antientropy.rs), or the hint below, delivered
    // after a purge, would bring v1 back.
    let cluster = TestCluster::builder(4)
        .setting("anti_entropy", "tombstone_grace_secs", "1")
        .fast_anti_entropy()
        .short_hints(HINT_MAX_AGE_SECS)
        .start()
        .await
        .unwrap();
    let key = b"lazarus";
    let observer = cluster.client(&cluster.members()).await.unwrap();
    let replicas = cluster.replicas_of(&observer, key).await.unwrap();
    let [owner, b, c] = replicas[..] else {
        panic!("expected 3 replicas, got {replicas:?}");
    };
    let fallback = cluster
        .members()
        .into_iter()
        .find(|i| !replicas.contains(i))
        .unwrap();

    // v1 is written while `owner` is down: with W=3 the fallback's hint
    // for it is one of the three acknowledged copies.
    cluster.kill(owner).unwrap();
    cluster.wait_dead(owner).await.unwrap();
    let client = cluster.client(&[b, c]).await.unwrap();
    client.put(key, b"v1", &[], Some(3)).await.unwrap();
    let hinted = Instant::now();

    // The fallback goes down holding the hint; the owner returns, and the
    // delete (whose context saw v1) reaches all three replicas.
    cluster.kill(fallback).unwrap();
    cluster.wait_dead(fallback).await.unwrap();
    cluster.start_node(owner).await.unwrap();
    cluster.wait_alive(owner).await.unwrap();
    let read = client.get(key, Some(2)).await.unwrap();
    assert_eq!(read.values, vec![b"v1".to_vec()]);
    client.delete(key, &read.context, Some(3)).await.unwrap();

    // Observation window (not synchronisation): well past the 1 s grace
    // and several anti-entropy rounds (64 partitions x 20 ms), the
    // replicas keep the tombstone, since a hint of v1 is still alive.
    let replica_client = cluster.client(&[owner, b, c]).await.unwrap();
    let window = Instant::now() + Duration::from_secs(5);
    while Instant::now() < window {
        for i in [owner, b, c] {
            let stored = cluster
                .local_get(&replica_client, i, key)
                .await
                .unwrap()
                .unwrap_or_else(|| {
                    panic!("node{i} purged the tombstone while a hint of v1 still lives")
                });
            assert!(stored.is_deleted(), "node{i} holds {stored:?}");
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }

    // The fallback returns and delivers its hint of v1 to the owner.
    cluster.start_node(fallback).await.unwrap();
    cluster.wait_alive(fallback).await.unwrap();
    poll_until("the fallback to deliver its hint", DEADLINE, async || {
        let metrics = cluster
            .admin_get(fallback, "/metrics")
            .await
            .map_err(|e| format!("{e:#}"))?
            .body;
        if metrics.contains("kv_hints_dropped_total 1") {
            // Not a product failure: the machine took longer than the
            // hint's maximum age to get here, and the test proves nothing.
            panic!(
                "the hint was dropped as too old ({:.0} s after it was written, max {HINT_MAX_AGE_SECS} s)",
                hinted.elapsed().as_secs_f64()
            );
        }
        if metrics.contains("kv_hints_delivered_total 1") {
            Ok(())
        } else {
            Err("not delivered yet".into())
        }
    })
    .await
    .unwrap();

    // Nothing came back: v1 met the tombstone that superseded it.
    for i in [owner, b, c] {
        let stored = cluster.local_get(&replica_client, i, key).await.unwrap();
        assert!(
            stored.as_ref().is_none_or(Object::is_deleted),
            "node{i} holds v1 again: {stored:?}"
        );
    }
    let read = replica_client.get(key, Some(3)).await.unwrap();
    assert!(read.values.is_empty(), "v1 is back: {read:?}");
    println!(
        "late hint: delivered {:.1} s after v1 was written; the tombstone was still there",
        hinted.elapsed().as_secs_f64()
    );
}
