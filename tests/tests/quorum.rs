//! Honest failures: without a quorum of live replicas, reads and writes
//! answer "unavailable" (exit 3) and store nothing, never success.

#![allow(clippy::unwrap_used)]

use kv_tests::TestCluster;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_two_of_three_nodes_down_get_and_put_are_unavailable() {
    let cluster = TestCluster::start(3).await.unwrap();
    // W=3: node1 holds the value before its peers are killed, whichever
    // node coordinated (with W=2 its copy could still be on the way).
    let put = cluster
        .kvctl(&["put", "--w", "3", "quorum-key", "before"])
        .await
        .unwrap();
    assert_eq!(put.code, 0, "{put}");

    for victim in [2, 3] {
        cluster.kill(victim).unwrap();
    }
    for victim in [2, 3] {
        cluster.wait_dead(victim).await.unwrap();
    }

    let get = cluster
        .kvctl_on(&[1], &["get", "quorum-key"])
        .await
        .unwrap();
    assert_eq!(get.code, 3, "{get}");
    assert!(get.stderr.contains("unavailable"), "{get}");
    assert!(!get.stdout.contains("before"), "{get}");

    let put = cluster
        .kvctl_on(&[1], &["put", "quorum-key", "after"])
        .await
        .unwrap();
    assert_eq!(put.code, 3, "{put}");
    assert!(put.stderr.contains("unavailable"), "{put}");

    // "Unavailable" promises that nothing was stored: the survivor still
    // holds only the first value.
    let client = cluster.client(&[1]).await.unwrap();
    let stored = cluster
        .local_get(&client, 1, b"quorum-key")
        .await
        .unwrap()
        .unwrap();
    let values: Vec<&[u8]> = stored.live_values().collect();
    assert_eq!(values, [&b"before"[..]]);
}
