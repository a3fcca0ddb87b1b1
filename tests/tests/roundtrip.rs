//! Every node coordinates: a value written through any node is read back
//! through every node, with kv-client and with kvctl.

#![allow(clippy::unwrap_used)]

use kv_tests::TestCluster;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_put_through_any_node_is_read_through_every_node() {
    let cluster = TestCluster::start(5).await.unwrap();
    let members = cluster.members();
    let mut clients = Vec::new();
    for &i in &members {
        clients.push(cluster.client(&[i]).await.unwrap());
    }
    // Each node coordinates one write...
    for (client, &i) in clients.iter().zip(&members) {
        let key = format!("roundtrip-{i}");
        let value = format!("written through node{i}");
        client
            .put(key.as_bytes(), value.as_bytes(), &[], None)
            .await
            .unwrap();
    }
    // ...and every node coordinates a read of every write.
    for (client, &reader) in clients.iter().zip(&members) {
        for &writer in &members {
            let key = format!("roundtrip-{writer}");
            let read = client.get(key.as_bytes(), None).await.unwrap();
            let expected = format!("written through node{writer}").into_bytes();
            assert_eq!(
                read.values,
                vec![expected],
                "{key} read through node{reader}"
            );
            assert!(!read.deleted);
        }
    }
    for client in &clients {
        client.close().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kvctl_puts_and_gets_through_every_node() {
    let cluster = TestCluster::start(3).await.unwrap();
    let put = cluster
        .kvctl_on(&[2], &["put", "greeting", "hello"])
        .await
        .unwrap();
    assert_eq!(put.code, 0, "{put}");
    assert_eq!(put.stdout, "OK\n", "{put}");
    for i in cluster.members() {
        let get = cluster.kvctl_on(&[i], &["get", "greeting"]).await.unwrap();
        assert_eq!(get.code, 0, "node{i}: {get}");
        assert_eq!(get.stdout, "hello\n", "node{i}: {get}");
    }
}
