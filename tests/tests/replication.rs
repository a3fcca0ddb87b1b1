//! Placement: every key is stored on exactly the N nodes of its preference
//! list, and stays readable at R=2 when one of them is killed.

#![allow(clippy::unwrap_used)]

use std::collections::BTreeSet;

use futures::{StreamExt, TryStreamExt, stream};
use kv_tests::{DEADLINE, TestCluster, poll_until};

/// Keys written.
const KEYS: usize = 1000;

/// Requests in flight at once: enough to keep two cores busy.
const IN_FLIGHT: usize = 16;

fn key(k: usize) -> Vec<u8> {
    format!("placement-{k:04}").into_bytes()
}

fn value(k: usize) -> Vec<u8> {
    format!("value of key {k}").into_bytes()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_live_on_exactly_their_preference_list_and_survive_a_kill() {
    let cluster = TestCluster::start(5).await.unwrap();
    let members = cluster.members();
    let mut clients = Vec::new();
    for &i in &members {
        clients.push(cluster.client(&[i]).await.unwrap());
    }

    // Writes go round robin over the coordinators.
    stream::iter(0..KEYS)
        .map(|k| {
            let client = &clients[k % clients.len()];
            async move { client.put(&key(k), &value(k), &[], None).await }
        })
        .buffer_unordered(IN_FLIGHT)
        .try_collect::<Vec<_>>()
        .await
        .unwrap();

    let observer = cluster.client(&members).await.unwrap();
    let preference: Vec<Vec<usize>> = stream::iter(0..KEYS)
        .map(|k| {
            let (cluster, observer) = (&cluster, &observer);
            async move { cluster.replicas_of(observer, &key(k)).await }
        })
        .buffered(IN_FLIGHT)
        .try_collect()
        .await
        .unwrap();
    for (k, replicas) in preference.iter().enumerate() {
        assert_eq!(replicas.len(), 3, "key {k}: preference list {replicas:?}");
    }

    // W=2 answers before the third copy lands: poll until every replica
    // holds its key. A copy outside the preference list is never allowed.
    let mut pending: BTreeSet<usize> = (0..KEYS).collect();
    poll_until("every key on its three replicas", DEADLINE, async || {
        let checks = stream::iter(pending.clone())
            .map(|k| {
                let (cluster, observer, members) = (&cluster, &observer, &members);
                let replicas = &preference[k];
                async move {
                    let mut holders = Vec::new();
                    for &i in members {
                        let stored = match cluster.local_get(observer, i, &key(k)).await {
                            Ok(stored) => stored,
                            Err(e) => return (k, Err(format!("{e:#}"))),
                        };
                        if let Some(object) = stored {
                            let values: Vec<&[u8]> = object.live_values().collect();
                            assert_eq!(values, [&value(k)[..]], "key {k} on node{i}");
                            holders.push(i);
                        }
                    }
                    for &i in &holders {
                        assert!(
                            replicas.contains(&i),
                            "key {k} is stored on node{i}, outside its preference list {replicas:?}"
                        );
                    }
                    if holders.len() == replicas.len() {
                        (k, Ok(()))
                    } else {
                        (k, Err(format!("key {k} is on {holders:?} of {replicas:?}")))
                    }
                }
            })
            .buffer_unordered(IN_FLIGHT)
            .collect::<Vec<_>>()
            .await;
        let mut example = None;
        for (k, check) in checks {
            match check {
                Ok(()) => {
                    pending.remove(&k);
                }
                Err(e) => example = Some(e),
            }
        }
        match example {
            None => Ok(()),
            Some(e) => Err(format!("{} keys not complete, e.g. {e}", pending.len())),
        }
    })
    .await
    .unwrap();

    // One node dies; every key still has two live replicas for R=2.
    let victim = 2;
    cluster.kill(victim).unwrap();
    cluster.wait_dead(victim).await.unwrap();
    let survivors: Vec<_> = members
        .iter()
        .zip(&clients)
        .filter(|(i, _)| **i != victim)
        .map(|(_, c)| c)
        .collect();
    stream::iter(0..KEYS)
        .map(|k| {
            let client = survivors[k % survivors.len()];
            async move {
                let read = client.get(&key(k), None).await.unwrap();
                assert_eq!(
                    read.values,
                    vec![value(k)],
                    "key {k} after node{victim} died"
                );
            }
        })
        .buffer_unordered(IN_FLIGHT)
        .collect::<Vec<()>>()
        .await;
    assert!(
        preference.iter().any(|r| r.contains(&victim)),
        "the killed node held no key: the reads above proved nothing"
    );
}
