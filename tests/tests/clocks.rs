//! Causal metadata stays bounded: a key written through every coordinator
//! across ten node incarnations (data directories wiped, nodes restarted)
//! ends with a clock of live actors only, its siblings collapsed, and no
//! write lost to the compaction.
//!
//! Each wipe gives a node a new incarnation, hence a new clock actor; the
//! old actor's entry stays in the key's clock until anti-entropy compacts
//! it (node/src/antientropy.rs: every replica agrees, the key's newest write
//! is older than hints live). Without compaction the clock below ends with
//! about a dozen entries (seen: 12); the bound asserted is N = 3 (one per
//! live node).

#![allow(clippy::unwrap_used)]

use std::time::Instant;

use kv_tests::{DEADLINE, TestCluster, poll_until};

/// Entries a compacted clock may keep: one per live replica (N = 3).
const BOUND: usize = 3;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_clock_stays_bounded_across_ten_incarnations() {
    let cluster = TestCluster::builder(3)
        .short_hints(1)
        .fast_anti_entropy()
        .start()
        .await
        .unwrap();
    let key = b"bounded";
    let mut last = String::new();
    for round in 0..10 {
        // A write through every node (each coordinates: N = 3 of 3 nodes),
        // each with the context of a read, so each supersedes the last.
        for i in [1, 2, 3] {
            let client = cluster.client(&[i]).await.unwrap();
            let read = client.get(key, None).await.unwrap();
            let value = format!("round{round}-node{i}");
            client
                .put(key, value.as_bytes(), &read.context, None)
                .await
                .unwrap();
            last = value;
            client.close().await;
        }
        // One node loses its data directory: a new incarnation.
        let wiped = round % 3 + 1;
        cluster.stop(wiped).await.unwrap();
        cluster.wipe_data(wiped).unwrap();
        cluster.start_node(wiped).await.unwrap();
        cluster.wait_alive(wiped).await.unwrap();
        // The wiped node starts from a ring of itself: it coordinates the
        // next round only once gossip gave it the cluster's ring.
        cluster.wait_converged().await.unwrap();
    }
    let client = cluster.client(&[1, 2, 3]).await.unwrap();
    // The last round wiped node1, which holds nothing until anti-entropy
    // refills it: the figure comes from node2, which took the last writes
    // directly.
    match cluster.local_get(&client, 2, key).await.unwrap() {
        Some(grown) => println!(
            "clock entries after ten incarnations: {}",
            grown.entries().len()
        ),
        None => println!("node2 holds nothing yet after ten incarnations"),
    }

    let started = Instant::now();
    poll_until(
        "every replica's clock within the bound",
        // Compaction waits for a refilled replica and for the partition's
        // turn in the anti-entropy schedule (one partition per interval).
        DEADLINE * 3,
        async || {
            let mut first = None;
            for i in [1, 2, 3] {
                let Some(object) = cluster
                    .local_get(&client, i, key)
                    .await
                    .map_err(|e| format!("{e:#}"))?
                else {
                    return Err(format!("node{i} holds nothing yet"));
                };
                if object.entries().len() > BOUND {
                    return Err(format!("node{i}: {} clock entries", object.entries().len()));
                }
                if *first.get_or_insert_with(|| object.clone()) != object {
                    return Err("replicas differ".into());
                }
            }
            Ok(())
        },
    )
    .await
    .unwrap();
    println!(
        "compacted to at most {BOUND} entries {:.1} s after the last write",
        started.elapsed().as_secs_f64()
    );

    // Nothing lost, siblings collapsed: the last acknowledged write is the
    // one value, on every replica and through a quorum read.
    let read = client.get(key, Some(3)).await.unwrap();
    assert_eq!(read.values, vec![last.as_bytes().to_vec()]);
    for i in [1, 2, 3] {
        let object = cluster.local_get(&client, i, key).await.unwrap().unwrap();
        let values: Vec<&[u8]> = object.live_values().collect();
        assert_eq!(values, vec![last.as_bytes()], "node{i}");
    }
}
