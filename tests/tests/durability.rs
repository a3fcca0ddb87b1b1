//! Acknowledged writes survive a crash: a node SIGKILLed right after its
//! last ack serves every write it acknowledged once restarted on its data.

#![allow(clippy::unwrap_used)]

use futures::{StreamExt, TryStreamExt, stream};
use kv_tests::TestCluster;

/// Keys written.
const KEYS: usize = 300;

/// Writes in flight at once.
const IN_FLIGHT: usize = 16;

fn key(k: usize) -> Vec<u8> {
    format!("durable-{k:03}").into_bytes()
}

fn value(k: usize) -> Vec<u8> {
    format!("acknowledged value {k}").into_bytes()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_node_restarts_with_every_write_it_acknowledged() {
    let cluster = TestCluster::start(3).await.unwrap();
    let members = cluster.members();
    let mut clients = Vec::new();
    for &i in &members {
        clients.push(cluster.client(&[i]).await.unwrap());
    }
    // W=3: every replica, the victim included, acked each write durably.
    stream::iter(0..KEYS)
        .map(|k| {
            let client = &clients[k % clients.len()];
            async move { client.put(&key(k), &value(k), &[], Some(3)).await }
        })
        .buffer_unordered(IN_FLIGHT)
        .try_collect::<Vec<_>>()
        .await
        .unwrap();
    let victim = 3;
    cluster.kill(victim).unwrap();

    // Preference lists from a survivor, while the victim is down.
    let survivor = cluster.client(&[1]).await.unwrap();
    let mut owned = Vec::new();
    for k in 0..KEYS {
        if cluster
            .replicas_of(&survivor, &key(k))
            .await
            .unwrap()
            .contains(&victim)
        {
            owned.push(k);
        }
    }
    // With N=3 on three nodes every key is the victim's.
    assert_eq!(owned.len(), KEYS, "keys replicated on node{victim}");

    // Nothing reads through the cluster before the check, so no read
    // repair can put back what the victim lost: it must come from its disk.
    cluster.start_node(victim).await.unwrap();
    let direct = cluster.client(&[victim]).await.unwrap();
    let missing: Vec<usize> = stream::iter(owned)
        .map(|k| {
            let (cluster, direct) = (&cluster, &direct);
            async move {
                let stored = cluster.local_get(direct, victim, &key(k)).await.unwrap();
                let held = stored.is_some_and(|o| o.live_values().any(|v| v == value(k)));
                (!held).then_some(k)
            }
        })
        .buffer_unordered(IN_FLIGHT)
        .filter_map(|k| async move { k })
        .collect()
        .await;
    assert!(
        missing.is_empty(),
        "node{victim} lost {} acknowledged writes after SIGKILL, e.g. keys {:?}",
        missing.len(),
        &missing[..missing.len().min(10)]
    );
}
