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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_certificate_cannot_drain_and_another_cluster_id_never_joins() {
    let mut cluster = TestCluster::start(3).await.unwrap();
    // A client certificate asking to drain a node: refused, nothing moves.
    let drain = cluster
        .kvctl(&["--identity", "client", "drain", "node2", "--no-wait"])
        .await
        .unwrap();
    assert_eq!(drain.code, 5, "{drain}");
    assert!(drain.stderr.contains("admin certificate"), "{drain}");
    println!(
        "client certificate asking to drain: {}",
        drain.stderr.trim()
    );
    let report = cluster.status(1).await.unwrap();
    let node2 = report.nodes.iter().find(|n| n.id == "node2").unwrap();
    assert_eq!(node2.status, "UP", "{report:?}");

    // A node with a certificate of this very CA, seeded with the cluster,
    // but configured with another cluster id: gossip refuses it.
    let certs = cluster.certs_dir().to_path_buf();
    kv_tls::add_node(&certs, &NodeId::new("node4").unwrap()).unwrap();
    let stranger = cluster
        .start_extra_node_with("node4", &certs, ("", "cluster_id", "\"another-cluster\""))
        .await
        .unwrap();
    let start = tokio::time::Instant::now();
    let mut rounds = 0;
    while start.elapsed() < OBSERVATION {
        for i in cluster.members() {
            let report = cluster.status(i).await.unwrap();
            let ids: Vec<&str> = report.nodes.iter().map(|n| n.id.as_str()).collect();
            assert_eq!(ids, ["node1", "node2", "node3"], "node{i}");
        }
        rounds += 1;
        tokio::time::sleep(Duration::from_millis(GOSSIP_INTERVAL_MS)).await;
    }
    assert!(rounds >= 5, "only {rounds} observations in {OBSERVATION:?}");
    let own = cluster.status(stranger).await.unwrap();
    let ids: Vec<&str> = own.nodes.iter().map(|n| n.id.as_str()).collect();
    assert_eq!(ids, ["node4"], "{own:?}");

    // A node certificate whose name is not the id the node claims: node5
    // started with node4's certificate (same CA) refuses to start.
    let impostor = tempfile::tempdir().unwrap();
    for (from, to) in [
        ("ca.pem", "ca.pem"),
        ("node4.pem", "node5.pem"),
        ("node4.key", "node5.key"),
    ] {
        std::fs::copy(certs.join(from), impostor.path().join(to)).unwrap();
    }
    let err = cluster
        .start_extra_node("node5", impostor.path())
        .await
        .unwrap_err();
    let text = format!("{err:#}");
    assert!(text.contains("not a node certificate for node5"), "{text}");
    println!("node5 with node4's certificate: refused at startup");
}
