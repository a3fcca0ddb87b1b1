//! The HTTP admin endpoint: `/metrics` in Prometheus text with the named
//! series, `/status` as JSON, `/health`; and the front-door addresses in
//! `kvctl status --json`.

#![allow(clippy::unwrap_used)]

use kv_tests::{DEADLINE, TestCluster, poll_until};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_status_and_health_are_served() {
    let cluster = TestCluster::start(3).await.unwrap();
    let client = cluster.client(&[1]).await.unwrap();
    client.put(b"m", b"v", &[], None).await.unwrap();
    client.get(b"m", None).await.unwrap();
    client.get(b"absent", None).await.unwrap();
    client.close().await;

    // The client sends each request to a replica of its key it picks
    // (issue 11), so the requests are counted on whichever node
    // coordinated them: the counters are summed over the cluster.
    let mut texts = Vec::new();
    for node in 1..=3 {
        let metrics = cluster.admin_get(node, "/metrics").await.unwrap();
        assert_eq!(metrics.status, 200);
        texts.push(metrics.body);
    }
    for (series, expected) in [
        (
            "kv_requests_total{door=\"quic\",op=\"put\",outcome=\"ok\"}",
            1,
        ),
        (
            "kv_requests_total{door=\"quic\",op=\"get\",outcome=\"ok\"}",
            1,
        ),
        (
            "kv_requests_total{door=\"quic\",op=\"get\",outcome=\"not_found\"}",
            1,
        ),
        (
            "kv_request_duration_seconds_count{door=\"quic\",op=\"get\",outcome=\"ok\"}",
            1,
        ),
    ] {
        let total: u64 = texts.iter().map(|t| counter(t, series)).sum();
        assert_eq!(
            total, expected,
            "{series} summed over the cluster:\n{texts:#?}"
        );
    }
    assert!(
        texts.iter().any(|t| t.contains(
            "kv_request_duration_seconds_bucket{door=\"quic\",op=\"put\",outcome=\"ok\",le=\"0.005\"}"
        )),
        "no put duration histogram on any node"
    );
    let text = texts.swap_remove(0);
    for series in [
        "kv_router_score{peer=\"node2\",op=\"get\"}",
        "kv_router_excluded{peer=\"node3\"} 0",
        "kv_hints_pending 0",
        "kv_hints_dropped_total 0",
        "kv_anti_entropy_exchanges_total",
        "kv_anti_entropy_partitions_total",
        "kv_anti_entropy_failures_total 0",
        "kv_cache_hit_ratio",
        "# TYPE kv_cache_hits_total counter",
        "# HELP kv_cache_misses_total",
        "kv_requests_in_flight{kind=\"client\"}",
        "kv_requests_in_flight_limit{kind=\"peer\"} 2048",
        "kv_storage_bytes_on_disk",
        "kv_nodes_alive 3",
        "# TYPE kv_request_duration_seconds histogram",
        "# HELP kv_hints_pending",
    ] {
        assert!(text.contains(series), "no {series:?} in:\n{text}");
    }

    let status = cluster.admin_get(2, "/status").await.unwrap();
    assert_eq!(status.status, 200);
    let json: serde_json::Value = serde_json::from_str(&status.body).unwrap();
    assert_eq!(json["node"], "node2");
    assert!(json["ring_version"].as_u64().is_some(), "{json}");
    let nodes = json["nodes"].as_array().unwrap();
    assert_eq!(nodes.len(), 3, "{json}");
    assert!(json["scores"].as_array().unwrap().len() >= 6, "{json}");

    let health = cluster.admin_get(3, "/health").await.unwrap();
    assert_eq!(health.status, 200, "{health:?}");
    assert!(health.body.contains("\"status\":\"ok\""), "{health:?}");
    let missing = cluster.admin_get(3, "/nope").await.unwrap();
    assert_eq!(missing.status, 404);

    // Every node's RESP and admin address reaches every node through gossip.
    let expected: Vec<(String, String, String)> = cluster
        .members()
        .into_iter()
        .map(|i| {
            (
                format!("node{i}"),
                cluster.resp_addr(i).unwrap(),
                cluster.admin_addr(i).unwrap(),
            )
        })
        .collect();
    poll_until(
        "kvctl status to show every front door",
        DEADLINE,
        async || {
            let out = cluster
                .kvctl_on(&[3], &["status", "--json"])
                .await
                .map_err(|e| e.to_string())?;
            let json = out.json().map_err(|e| e.to_string())?;
            for (id, resp, admin) in &expected {
                let node = json["nodes"]
                    .as_array()
                    .and_then(|n| n.iter().find(|n| n["id"] == id.as_str()))
                    .ok_or(format!("{id} missing: {out}"))?;
                if node["resp"] != resp.as_str() || node["admin"] != admin.as_str() {
                    return Err(format!("{id}: {node}"));
                }
            }
            Ok(())
        },
    )
    .await
    .unwrap();
}

/// The value of one counter series in a Prometheus text answer (0 when
/// the series is absent).
fn counter(text: &str, series: &str) -> u64 {
    text.lines()
        .find_map(|line| line.strip_prefix(series)?.trim().parse().ok())
        .unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_admin_connections_cannot_exhaust_the_node() {
    let cluster = TestCluster::start(1).await.unwrap();
    let addr = cluster.admin_addr(1).unwrap();
    // Far more idle connections than the endpoint keeps (64): the rest
    // are closed at accept instead of holding file descriptors.
    let mut idle = Vec::new();
    for _ in 0..300 {
        idle.push(tokio::net::TcpStream::connect(&addr).await.unwrap());
    }
    // Within half the header deadline (10 s), so that only the cap can
    // explain it.
    let mut open: Vec<bool> = vec![true; idle.len()];
    poll_until(
        "the endpoint to close the connections beyond its cap",
        std::time::Duration::from_secs(5),
        async || {
            for (stream, open) in idle.iter_mut().zip(open.iter_mut()) {
                if !*open {
                    continue;
                }
                let mut byte = [0u8; 1];
                let read = tokio::time::timeout(
                    std::time::Duration::from_millis(1),
                    tokio::io::AsyncReadExt::read(stream, &mut byte),
                )
                .await;
                if matches!(read, Ok(Ok(0)) | Ok(Err(_))) {
                    *open = false;
                }
            }
            let closed = open.iter().filter(|o| !**o).count();
            if closed >= 200 {
                Ok(())
            } else {
                Err(format!("only {closed} of 300 idle connections closed"))
            }
        },
    )
    .await
    .unwrap();
    // The node still serves keys meanwhile.
    let client = cluster.client(&[1]).await.unwrap();
    client.put(b"k", b"v", &[], Some(1)).await.unwrap();
    // The idle ones that were kept are cut off after the header deadline
    // (10 s), and the endpoint answers again.
    poll_until(
        "the admin endpoint to answer again",
        DEADLINE,
        async || match cluster.admin_get(1, "/health").await {
            Ok(answer) if answer.status == 200 => Ok(()),
            Ok(answer) => Err(format!("status {}", answer.status)),
            Err(e) => Err(format!("{e:#}")),
        },
    )
    .await
    .unwrap();
    drop(idle);
}
