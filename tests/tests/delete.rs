//! Deletes: a deleted key reads as not found, and every replica keeps a
//! tombstone (no live value) rather than forgetting the key.

#![allow(clippy::unwrap_used)]

use kv_tests::{DEADLINE, TestCluster, poll_until};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_key_is_not_found_and_every_replica_holds_tombstones() {
    let cluster = TestCluster::start(3).await.unwrap();
    let key = "doomed";

    let put = cluster.kvctl(&["put", key, "short-lived"]).await.unwrap();
    assert_eq!(put.code, 0, "{put}");
    let get = cluster.kvctl(&["get", key]).await.unwrap();
    assert_eq!(
        (get.code, get.stdout.as_str()),
        (0, "short-lived\n"),
        "{get}"
    );

    let delete = cluster.kvctl(&["delete", key]).await.unwrap();
    assert_eq!(delete.code, 0, "{delete}");
    for i in cluster.members() {
        let get = cluster.kvctl_on(&[i], &["get", key]).await.unwrap();
        assert_eq!(get.code, 1, "get through node{i}: {get}");
        assert!(
            get.stderr.contains("not found"),
            "get through node{i}: {get}"
        );
        assert!(
            !get.stdout.contains("short-lived"),
            "get through node{i}: {get}"
        );
    }

    let client = cluster.client(&cluster.members()).await.unwrap();
    let replicas = cluster.replicas_of(&client, key.as_bytes()).await.unwrap();
    assert_eq!(replicas.len(), 3, "{replicas:?}");
    poll_until(
        "every replica to hold only tombstones",
        DEADLINE,
        async || {
            for &i in &replicas {
                let stored = cluster
                    .local_get(&client, i, key.as_bytes())
                    .await
                    .map_err(|e| format!("{e:#}"))?;
                let Some(object) = stored else {
                    return Err(format!("node{i} stores nothing: the tombstone is missing"));
                };
                if object.is_empty() || !object.values().all(|s| s.is_tombstone()) {
                    return Err(format!("node{i} stores {object:?}"));
                }
            }
            Ok(())
        },
    )
    .await
    .unwrap();
}
