//! Tombstones: a deleted key's tombstone is purged only once every replica
//! holds it and the grace period has passed, so a replica that was down
//! longer than the grace period does not bring the deleted value back.
//!
//! The rule under test (node/src/antientropy.rs): purge needs every
//! replica's agreement, not only time. If purging went by time alone, the
//! tombstone would be gone before node3 returned with its old value, and the
//! final reads below would find "v1" again.

#![allow(clippy::unwrap_used)]

use std::time::{Duration, Instant};

use kv_tests::{DEADLINE, TestCluster, poll_until};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_down_past_the_grace_period_does_not_resurrect_a_deleted_key() {
    let cluster = TestCluster::builder(3)
        .setting("anti_entropy", "tombstone_grace_secs", "2")
        .setting("anti_entropy", "interval_ms", "20")
        // Anti-entropy visits one partition per interval: 64 partitions
        // bring the key's turn round every 1.3 s instead of 20 s.
        .setting("replication", "partitions", "64")
        // Tombstones outlive hints: with a day's hints the purge would
        // wait a day.
        .setting("handoff", "max_age_secs", "1")
        .setting("handoff", "interval_ms", "100")
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
