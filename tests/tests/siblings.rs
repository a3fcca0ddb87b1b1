//! Concurrent writes are kept as siblings, never overwritten by a clock,
//! and a write with the read's context resolves them on every replica.

#![allow(clippy::unwrap_used)]

use kv_tests::{DEADLINE, TestCluster, poll_until};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn blind_writes_become_siblings_and_a_write_with_context_resolves_them() {
    let cluster = TestCluster::start(3).await.unwrap();
    // One endpoint: node1 coordinates every request.
    let client = cluster.client(&[1]).await.unwrap();
    let key = b"siblings";

    client.put(key, b"left", &[], None).await.unwrap();
    client.put(key, b"right", &[], None).await.unwrap();
    let read = client.get(key, None).await.unwrap();
    let mut values = read.values.clone();
    values.sort();
    assert_eq!(values, [b"left".to_vec(), b"right".to_vec()], "{read:?}");

    client
        .put(key, b"merged", &read.context, None)
        .await
        .unwrap();
    let resolved = client.get(key, None).await.unwrap();
    assert_eq!(resolved.values, [b"merged".to_vec()], "{resolved:?}");

    // The third replica gets the resolution after the W=2 ack: poll until
    // every replica holds exactly one version, the resolved one.
    let replicas = cluster.replicas_of(&client, key).await.unwrap();
    assert_eq!(replicas.len(), 3, "{replicas:?}");
    poll_until(
        "every replica to hold only the merged value",
        DEADLINE,
        async || {
            for &i in &replicas {
                let stored = cluster
                    .local_get(&client, i, key)
                    .await
                    .map_err(|e| format!("{e:#}"))?;
                let versions: Vec<Option<Vec<u8>>> = stored
                    .iter()
                    .flat_map(|o| o.values())
                    .map(|s| s.data.clone())
                    .collect();
                if versions != [Some(b"merged".to_vec())] {
                    return Err(format!("node{i} stores {versions:?}"));
                }
            }
            Ok(())
        },
    )
    .await
    .unwrap();

    // Every coordinator now reads the one value.
    for i in cluster.members() {
        let reader = cluster.client(&[i]).await.unwrap();
        let read = reader.get(key, None).await.unwrap();
        assert_eq!(read.values, [b"merged".to_vec()], "read through node{i}");
    }
}
