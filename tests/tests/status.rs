//! The README flow: `kvctl status --json` shows a killed node dead and,
//! once it is started again on its data, alive; `status --node` asks one
//! node only.

#![allow(clippy::unwrap_used)]

use kv_tests::{DEADLINE, KvctlOutput, TestCluster, poll_until};

/// `alive` of node `id` in a `kvctl status --json` output.
fn alive(out: &KvctlOutput, id: &str) -> Option<bool> {
    let json = out.json().ok()?;
    let nodes = json.get("nodes")?.as_array()?;
    let node = nodes
        .iter()
        .find(|n| n.get("id").and_then(|v| v.as_str()) == Some(id))?;
    node.get("alive")?.as_bool()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_shows_a_killed_node_dead_and_a_restarted_one_alive() {
    let cluster = TestCluster::start(3).await.unwrap();
    let before = cluster.kvctl(&["status", "--json"]).await.unwrap();
    assert_eq!(before.code, 0, "{before}");
    assert_eq!(alive(&before, "node3"), Some(true), "{before}");

    cluster.kill(3).unwrap();
    cluster.wait_dead(3).await.unwrap();
    let dead = cluster.kvctl_on(&[1], &["status", "--json"]).await.unwrap();
    assert_eq!(dead.code, 0, "{dead}");
    assert_eq!(alive(&dead, "node3"), Some(false), "{dead}");
    // --node asks that node and no other: a dead one is unavailable
    // (exit 3) however many others answer, a live one answers itself.
    let asked = cluster
        .kvctl(&["status", "--node", "node3", "--json"])
        .await
        .unwrap();
    assert_eq!(asked.code, 3, "{asked}");
    let asked = cluster
        .kvctl(&["status", "--node", "node2", "--json"])
        .await
        .unwrap();
    assert_eq!(asked.code, 0, "{asked}");
    assert_eq!(asked.json().unwrap()["node"], "node2", "{asked}");

    cluster.start_node(3).await.unwrap();
    poll_until(
        "kvctl status to show node3 alive again",
        DEADLINE,
        async || {
            let out = cluster
                .kvctl_on(&[1], &["status", "--json"])
                .await
                .map_err(|e| e.to_string())?;
            match (out.code, alive(&out, "node3")) {
                (0, Some(true)) => Ok(()),
                _ => Err(out.to_string()),
            }
        },
    )
    .await
    .unwrap();
    cluster.wait_converged().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_stopped_with_sigterm_exits_cleanly_and_rejoins_with_its_data() {
    let cluster = TestCluster::start(3).await.unwrap();
    let put = cluster
        .kvctl(&["put", "kept", "across a restart", "--w", "3"])
        .await
        .unwrap();
    assert_eq!(put.code, 0, "{put}");

    // stop() fails unless the node exits with status 0 after draining.
    cluster.stop(2).await.unwrap();
    cluster.wait_dead(2).await.unwrap();
    cluster.start_node(2).await.unwrap();
    cluster.wait_alive(2).await.unwrap();
    cluster.wait_converged().await.unwrap();

    let local = cluster
        .kvctl_on(&[2], &["get", "--node", "node2", "--local", "kept"])
        .await
        .unwrap();
    assert_eq!(local.code, 0, "{local}");
    assert!(local.stdout.contains("across a restart"), "{local}");
}
