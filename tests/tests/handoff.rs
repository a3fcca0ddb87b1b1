//! Hinted handoff: writes meant for a replica that is down are kept as
//! hints by fallback nodes and delivered to it when it returns; and when a
//! ring change takes the range away from the dead owner first, the hints go
//! to whoever owns the range then instead.
//!
//! Anti-entropy is slowed to one exchange an hour and nothing reads the
//! keys (no read repair), so a hint is the only way the data can travel.

#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;

use futures::{StreamExt, TryStreamExt, stream};
use kv_client::Client;
use kv_tests::{DEADLINE, TestCluster, poll_until};
use tokio::time::Instant;

/// Requests in flight at once.
const IN_FLIGHT: usize = 16;

/// Anti-entropy's maximum interval (ms): at most the exchange every node
/// makes when it starts, so it cannot explain any convergence here.
const NO_ANTI_ENTROPY: &str = "3600000";

fn key(prefix: &str, k: usize) -> Vec<u8> {
    format!("{prefix}-{k:04}").into_bytes()
}

fn value(k: usize) -> Vec<u8> {
    format!("hinted value {k}").into_bytes()
}

/// Writes `count` keys with the default W, round robin over `clients`.
async fn write(clients: &[Client], prefix: &str, count: usize) {
    stream::iter(0..count)
        .map(|k| {
            let client = &clients[k % clients.len()];
            async move { client.put(&key(prefix, k), &value(k), &[], None).await }
        })
        .buffer_unordered(IN_FLIGHT)
        .try_collect::<Vec<_>>()
        .await
        .unwrap();
}

/// The preference list of each of the `count` keys, in key order.
async fn preference(
    cluster: &TestCluster,
    observer: &Client,
    prefix: &str,
    count: usize,
) -> Vec<Vec<usize>> {
    stream::iter(0..count)
        .map(|k| async move { cluster.replicas_of(observer, &key(prefix, k)).await })
        .buffered(IN_FLIGHT)
        .try_collect()
        .await
        .unwrap()
}

/// `(key, value)` of the keys `ks`.
fn entries(prefix: &str, ks: &[usize]) -> Vec<(Vec<u8>, Vec<u8>)> {
    ks.iter().map(|&k| (key(prefix, k), value(k))).collect()
}

/// Hints node `index` still holds according to its last "hinted handoff
/// pass" log line (`left=N`), or `None` if it never delivered a hint. The
/// count is not on the wire; the log is the operator's window on it.
fn hints_left(cluster: &TestCluster, index: usize) -> Option<u64> {
    let log = cluster.log_text(index).unwrap();
    let line = log
        .lines()
        .rev()
        .find(|l| l.contains("hinted handoff pass"))?;
    let left = line
        .split_whitespace()
        .find_map(|w| w.strip_prefix("left="))?;
    left.parse().ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hints_for_a_dead_replica_reach_it_when_it_returns() {
    const KEYS: usize = 200;
    let cluster = TestCluster::builder(5)
        .setting("anti_entropy", "interval_ms", NO_ANTI_ENTROPY)
        .start()
        .await
        .unwrap();
    let victim = 5;
    let survivors: Vec<usize> = cluster
        .members()
        .into_iter()
        .filter(|&i| i != victim)
        .collect();
    let mut clients = Vec::new();
    for &i in &survivors {
        clients.push(cluster.client(&[i]).await.unwrap());
    }
    cluster.kill(victim).unwrap();
    cluster.wait_dead(victim).await.unwrap();

    // Every write is acknowledged while the victim is down: whatever it
    // holds of them later was handed to it.
    write(&clients, "handoff", KEYS).await;
    let observer = cluster.client(&survivors).await.unwrap();
    let lists = preference(&cluster, &observer, "handoff", KEYS).await;
    let owned: Vec<usize> = (0..KEYS).filter(|&k| lists[k].contains(&victim)).collect();
    assert!(
        !owned.is_empty(),
        "no key has node{victim} as a replica: the test proves nothing"
    );
    let expected = entries("handoff", &owned);

    let restarted = Instant::now();
    cluster.start_node(victim).await.unwrap();
    // What it holds on its first answer (usually nothing: the fallbacks
    // deliver once gossip tells them it is back).
    let direct = cluster.client(&[victim]).await.unwrap();
    let at_restart = cluster
        .missing_on(&direct, victim, &expected)
        .await
        .unwrap();
    // Failure here: hints were never delivered (or lost), so the returning
    // replica misses writes acknowledged while it was down.
    cluster
        .wait_holding(&direct, victim, &expected, DEADLINE)
        .await
        .unwrap();
    let delivered = restarted.elapsed();
    println!(
        "handoff: node{victim} missed {} of its {} keys at restart and held them all {:.1} s after it was started",
        at_restart.len(),
        owned.len(),
        delivered.as_secs_f64()
    );

    // No hint is left behind once delivered. Failure: a fallback kept (and
    // would redeliver forever) hints that were acknowledged.
    poll_until("every fallback to hold no hint", DEADLINE, async || {
        let left: BTreeMap<usize, Option<u64>> = survivors
            .iter()
            .map(|&i| (i, hints_left(&cluster, i)))
            .collect();
        let delivering = left.values().filter(|l| l.is_some()).count();
        if delivering > 0 && left.values().all(|l| l.unwrap_or(0) == 0) {
            Ok(())
        } else {
            Err(format!(
                "hints left per node (None: no delivery logged): {left:?}"
            ))
        }
    })
    .await
    .unwrap();
}

/// The owner of a hint is still dead when a new node joins and takes over
/// part of its range: the hints for that part go to the range's owners
/// then (the new node included), never wait for the old owner; hints for
/// the part it keeps wait for it.
///
/// A dead node cannot be removed from the ring (`kvctl drain` is asked of
/// the node itself), so a join is the ring change that removes it from
/// some preference lists. To tell hint delivery from the new node's
/// partition pull, the other two replicas of the chosen keys lose their
/// disks after the writes: then the hints are the only copies left.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hints_follow_their_range_to_its_new_owners_after_a_ring_change() {
    const KEYS: usize = 1000;
    let mut cluster = TestCluster::builder(5)
        .setting("anti_entropy", "interval_ms", NO_ANTI_ENTROPY)
        .start()
        .await
        .unwrap();
    let owner = 5;
    let others: Vec<usize> = (1..=4).collect();
    let mut clients = Vec::new();
    for &i in &others {
        clients.push(cluster.client(&[i]).await.unwrap());
    }
    cluster.kill(owner).unwrap();
    cluster.wait_dead(owner).await.unwrap();
    write(&clients, "retarget", KEYS).await;
    let observer = cluster.client(&others).await.unwrap();
    let before = preference(&cluster, &observer, "retarget", KEYS).await;

    // The keys of the dead owner's most common replica set {owner, a, b}:
    // their hints sit on the two other nodes.
    let mut by_pair: BTreeMap<Vec<usize>, Vec<usize>> = BTreeMap::new();
    for (k, list) in before.iter().enumerate() {
        if list.contains(&owner) {
            let mut pair: Vec<usize> = list.iter().copied().filter(|&i| i != owner).collect();
            pair.sort_unstable();
            by_pair.entry(pair).or_default().push(k);
        }
    }
    let (pair, chosen) = by_pair.into_iter().max_by_key(|(_, ks)| ks.len()).unwrap();
    // The writes' last copies (the hints) may still be in flight: a
    // graceful stop finishes a node's background replication first.
    for &i in &pair {
        cluster.stop(i).await.unwrap();
        cluster.wait_dead(i).await.unwrap();
    }
    for &i in &pair {
        cluster.wipe_data(i).unwrap();
        cluster.start_node(i).await.unwrap();
    }
    for &i in &pair {
        cluster.wait_alive(i).await.unwrap();
    }
    drop(observer);
    let observer = cluster.client(&others).await.unwrap();
    // Control: no live node stores the chosen keys now; only hints do.
    let expected = entries("retarget", &chosen);
    for &i in &others {
        let missing = cluster.missing_on(&observer, i, &expected).await.unwrap();
        assert_eq!(
            missing.len(),
            expected.len(),
            "node{i} stores chosen keys although only hints should hold them"
        );
    }

    // A node joins in the dead owner's zone and takes over part of it.
    let status = cluster.status(1).await.unwrap();
    let owner_id = cluster.id(owner).unwrap();
    let zone = status
        .nodes
        .iter()
        .find(|n| n.id == owner_id.as_str())
        .map(|n| n.zone.clone())
        .unwrap();
    let joiner = cluster.add_joining_node(&zone).unwrap();
    cluster.start_node(joiner).await.unwrap();
    cluster
        .wait_node_status(joiner, "UP", 2 * DEADLINE)
        .await
        .unwrap();
    let joined = Instant::now();
    let observer = cluster.client(&[1, 2, 3, 4, joiner]).await.unwrap();
    let after: Vec<(usize, Vec<usize>)> = stream::iter(chosen.clone())
        .map(|k| {
            let (cluster, observer) = (&cluster, &observer);
            async move {
                let list = cluster
                    .replicas_of(observer, &key("retarget", k))
                    .await
                    .unwrap();
                (k, list)
            }
        })
        .buffered(IN_FLIGHT)
        .collect()
        .await;
    let (moved, kept): (Vec<_>, Vec<_>) = after
        .into_iter()
        .partition(|(_, list)| !list.contains(&owner));
    assert!(
        !moved.is_empty(),
        "the join took none of node{owner}'s {} chosen keys: the test proves nothing",
        chosen.len()
    );

    // Failure: hints for a range their owner no longer has were kept for
    // it (or dropped) instead of going to the range's owners now.
    let mut by_node: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
    for (k, list) in &moved {
        for &i in list {
            by_node.entry(i).or_default().push(*k);
        }
    }
    for (&i, ks) in &by_node {
        cluster
            .wait_holding(&observer, i, &entries("retarget", ks), DEADLINE)
            .await
            .unwrap();
    }
    println!(
        "handoff: {} of {} hinted keys changed owners with node{joiner}'s join; \
         their hints reached every new owner within {:.1} s of it being UP everywhere",
        moved.len(),
        chosen.len(),
        joined.elapsed().as_secs_f64()
    );

    // Failure: a hint whose owner still owns the range went elsewhere.
    let kept: Vec<usize> = kept.into_iter().map(|(k, _)| k).collect();
    let kept = entries("retarget", &kept);
    for i in [1, 2, 3, 4, joiner] {
        let missing = cluster.missing_on(&observer, i, &kept).await.unwrap();
        assert_eq!(
            missing.len(),
            kept.len(),
            "node{i} stores keys whose hints must wait for node{owner}"
        );
    }
}
