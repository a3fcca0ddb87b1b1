//! The router on a running cluster: every routing mode serves reads and
//! writes and shows in `/status`; `kvctl router mode` switches a running
//! cluster (admin certificate only); a decision read back with
//! `kvctl decisions --json` and replayed through the router's own function
//! gives the same decision.

#![allow(clippy::unwrap_used)]

use kv_router::{Decision, Inputs, RouterSettings};
use kv_tests::{DEADLINE, KvctlOutput, TestCluster, poll_until};

const MODES: [&str; 6] = ["plain", "snitch", "hwlb", "c3", "p2c", "scoring"];

/// The `mode` every node's `kvctl status --json` reports, by node.
async fn modes(cluster: &TestCluster) -> Vec<String> {
    let mut out = Vec::new();
    for i in cluster.running() {
        let s = cluster.kvctl_on(&[i], &["status", "--json"]).await.unwrap();
        assert_eq!(s.code, 0, "{s}");
        out.push(s.json().unwrap()["mode"].as_str().unwrap().to_string());
    }
    out
}

fn ok(out: &KvctlOutput) {
    assert_eq!(out.code, 0, "{out}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_mode_serves_and_a_logged_decision_replays_to_the_same_order() {
    let cluster = TestCluster::builder(3)
        .setting("router", "mode", "\"c3\"")
        .setting("router", "decision_log_rate", "1.0")
        .start()
        .await
        .unwrap();
    cluster.wait_converged().await.unwrap();

    // The configured mode shows in /status (kvctl status and the admin
    // endpoint).
    assert_eq!(modes(&cluster).await, vec!["c3"; 3]);
    let admin = cluster.admin_get(1, "/status").await.unwrap();
    assert!(admin.body.contains("\"mode\":\"c3\""), "{}", admin.body);

    // Switching needs the admin certificate (kvctl presents it unless told
    // otherwise): a client certificate is refused (exit 5).
    let refused = cluster
        .kvctl(&["--identity", "client", "router", "mode", "plain"])
        .await
        .unwrap();
    assert_eq!(refused.code, 5, "{refused}");
    assert!(refused.stderr.contains("admin certificate"), "{refused}");
    assert_eq!(modes(&cluster).await, vec!["c3"; 3]);

    for mode in MODES {
        let switched = cluster.kvctl(&["router", "mode", mode]).await.unwrap();
        ok(&switched);
        assert_eq!(modes(&cluster).await, vec![mode; 3], "after {switched}");
        for i in 0..20 {
            let key = format!("{mode}-{i}");
            ok(&cluster.kvctl_on(&[1], &["put", &key, mode]).await.unwrap());
            let got = cluster.kvctl_on(&[2], &["get", &key]).await.unwrap();
            ok(&got);
            assert!(got.stdout.contains(mode), "{got}");
        }

        // The client chose which replica coordinated each read (issue 11);
        // that node's log holds it, with its inputs and draw. Replaying one
        // through the router gives the decision the node made.
        let key = format!("{mode}-7");
        let (logger, logged) = poll_until("a logged decision of the key", DEADLINE, async || {
            let mut seen = Vec::new();
            for node in 1..=3 {
                let name = format!("node{node}");
                let out = cluster
                    .kvctl_on(
                        &[node],
                        &["--json", "decisions", "--key", &key, "--node", &name],
                    )
                    .await
                    .map_err(|e| e.to_string())?;
                let json = out.json().map_err(|e| e.to_string())?;
                let list = json["decisions"].as_array().cloned().unwrap_or_default();
                if !list.is_empty() {
                    return Ok((node, list));
                }
                seen.push(out.to_string());
            }
            Err(seen.join("; "))
        })
        .await
        .unwrap();
        for record in logged {
            let settings: RouterSettings =
                serde_json::from_value(record["settings"].clone()).unwrap();
            let inputs: Inputs = serde_json::from_value(record["inputs"].clone()).unwrap();
            let draw = record["draw"].as_u64().unwrap();
            let made: Decision = serde_json::from_value(record["decision"].clone()).unwrap();
            assert_eq!(made.mode.as_str(), mode, "{record}");
            assert_eq!(inputs.candidates.len(), 3, "{record}");
            let replayed = kv_router::decide(&settings, &inputs, draw);
            assert_eq!(replayed, made, "{record}");
        }

        // The text form names the mode and every candidate.
        let text = cluster
            .kvctl_on(
                &[logger],
                &[
                    "decisions",
                    "--key",
                    &key,
                    "--node",
                    &format!("node{logger}"),
                    "--last",
                    "1",
                ],
            )
            .await
            .unwrap();
        ok(&text);
        assert!(text.stdout.contains(&format!("mode {mode}")), "{text}");
        let explain = cluster
            .kvctl_on(&[1], &["--json", "explain", &key, "--op", "put"])
            .await
            .unwrap();
        ok(&explain);
        let json = explain.json().unwrap();
        assert_eq!(json["mode"], mode, "{explain}");
        assert_eq!(json["op"], "put", "{explain}");
    }
}
