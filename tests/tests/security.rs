//! Mutual TLS keeps strangers out: a client or a node whose certificate
//! comes from another CA is refused, and such a node never becomes a member.

#![allow(clippy::unwrap_used)]

use std::time::Duration;

use kv_tests::{DEADLINE, GOSSIP_INTERVAL_MS, TestCluster, poll_until};
use kv_types::NodeId;

/// How long the cluster is watched for the stranger: 20 gossip rounds, in
/// which a node with a valid certificate joins many times over. This is an
/// observation window (the claim is that nothing happens), not a wait for
/// something to happen.
const OBSERVATION: Duration = Duration::from_millis(20 * GOSSIP_INTERVAL_MS);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_from_another_ca_is_refused() {
    let cluster = TestCluster::start(3).await.unwrap();
    let foreign = tempfile::tempdir().unwrap();
    let certs = foreign.path().join("certs");
    kv_tls::init(&certs, &[NodeId::new("node1").unwrap()]).unwrap();

    for args in [
        &["get", "secret"][..],
        &["put", "secret", "forged"],
        &["status"],
    ] {
        let out = cluster.kvctl_with_certs(&[1], &certs, args).await.unwrap();
        assert_eq!(out.code, 5, "{args:?}: {out}");
        assert!(out.stderr.contains("refused"), "{args:?}: {out}");
        assert!(out.stderr.contains("certificate"), "{args:?}: {out}");
    }
    // The refused put stored nothing.
    let get = cluster.kvctl(&["get", "secret"]).await.unwrap();
    assert_eq!(get.code, 1, "{get}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_from_another_ca_never_becomes_a_member() {
    let mut cluster = TestCluster::start(3).await.unwrap();
    let foreign = tempfile::tempdir().unwrap();
    let certs = foreign.path().join("certs");
    kv_tls::init(&certs, &[NodeId::new("node4").unwrap()]).unwrap();
    // Same cluster id, seeds pointing at the cluster: only TLS keeps it out.
    let stranger = cluster.start_extra_node("node4", &certs).await.unwrap();

    let start = tokio::time::Instant::now();
    let mut rounds = 0;
    while start.elapsed() < OBSERVATION {
        for i in cluster.members() {
            let report = cluster.status(i).await.unwrap();
            let ids: Vec<&str> = report.nodes.iter().map(|n| n.id.as_str()).collect();
            assert!(
                !ids.contains(&"node4"),
                "node{i} lists the stranger: {ids:?}"
            );
            assert_eq!(ids, ["node1", "node2", "node3"], "node{i}");
        }
        rounds += 1;
        tokio::time::sleep(Duration::from_millis(GOSSIP_INTERVAL_MS)).await;
    }
    assert!(rounds >= 5, "only {rounds} observations in {OBSERVATION:?}");

    // The stranger is up (so it did try) and knows only itself.
    let own = cluster.status(stranger).await.unwrap();
    let ids: Vec<&str> = own.nodes.iter().map(|n| n.id.as_str()).collect();
    assert_eq!(ids, ["node4"], "{own:?}");

    // Control: the same observation does see a node the CA signed join, so
    // the silence above is TLS at work, not a blind test.
    let own_certs = cluster.certs_dir().to_path_buf();
    kv_tls::add_node(&own_certs, &NodeId::new("node5").unwrap()).unwrap();
    let newcomer = cluster.start_extra_node("node5", &own_certs).await.unwrap();
    poll_until("node1 to list node5 alive", DEADLINE, async || {
        let report = cluster.status(1).await.map_err(|e| e.to_string())?;
        let ids: Vec<&str> = report
            .nodes
            .iter()
            .filter(|n| n.alive)
            .map(|n| n.id.as_str())
            .collect();
        if ids.contains(&"node5") {
            Ok(())
        } else {
            Err(format!("alive: {ids:?}"))
        }
    })
    .await
    .unwrap();
    let own = cluster.status(newcomer).await.unwrap();
    assert!(own.nodes.iter().any(|n| n.id == "node1"), "{own:?}");
}
