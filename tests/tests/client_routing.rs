//! The ring-aware client as a user runs it: `kvctl`, one process per call,
//! sends each request to a replica of its key (the router's choice, logged
//! and replayable) and never waits a connect timeout on a node it has
//! reason to think dead.

#![allow(clippy::unwrap_used)]

use std::time::{Duration, Instant};

use kv_tests::{KvctlOutput, TestCluster};

fn ok(out: &KvctlOutput) {
    assert_eq!(out.code, 0, "{out}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kvctl_with_a_killed_node_never_waits_on_it() {
    let cluster = TestCluster::start(5).await.unwrap();
    cluster.wait_converged().await.unwrap();
    let all: Vec<usize> = cluster.members();
    // kvctl learns the ring (and caches it) while the cluster is whole.
    ok(&cluster
        .kvctl_on(&all, &["put", "warm", "up"])
        .await
        .unwrap());
    ok(&cluster.kvctl_on(&all, &["get", "warm"]).await.unwrap());

    cluster.kill(5).unwrap();
    cluster.wait_dead(5).await.unwrap();

    // A connect timeout of 10 s: only waiting on the dead node could make
    // a call take 3 s.
    let limit = Duration::from_secs(3);
    let mut slowest = Duration::ZERO;
    for i in 0..20 {
        let key = format!("after-kill-{i}");
        let start = Instant::now();
        let put = cluster
            .kvctl_on(&all, &["--connect-timeout", "10", "put", &key, "v"])
            .await
            .unwrap();
        let took = start.elapsed();
        ok(&put);
        assert!(took < limit, "put {i} took {took:?}: {put}");
        slowest = slowest.max(took);

        let start = Instant::now();
        let get = cluster
            .kvctl_on(&all, &["--connect-timeout", "10", "get", &key])
            .await
            .unwrap();
        let took = start.elapsed();
        ok(&get);
        assert_eq!(get.stdout, "v\n", "{get}");
        assert!(took < limit, "get {i} took {took:?}: {get}");
        slowest = slowest.max(took);
    }
    eprintln!("slowest kvctl call with node5 killed: {slowest:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kvctl_sends_a_key_to_a_replica_and_its_decision_replays() {
    let cluster = TestCluster::start(5).await.unwrap();
    cluster.wait_converged().await.unwrap();
    let all = cluster.members();
    // The first call learns the ring in the background; the next route.
    ok(&cluster
        .kvctl_on(&all, &["put", "routed", "x"])
        .await
        .unwrap());
    let log = cluster.dir().join("decisions.jsonl");
    let log_s = log.to_str().unwrap();
    for _ in 0..3 {
        ok(&cluster
            .kvctl_on(&all, &["--log-decisions", log_s, "get", "routed"])
            .await
            .unwrap());
    }
    let out = cluster
        .kvctl_on(&all, &["--json", "decisions", "--client", log_s])
        .await
        .unwrap();
    ok(&out);
    let json = out.json().unwrap();
    let decisions = json["decisions"].as_array().unwrap();
    assert!(!decisions.is_empty(), "{out}");
    let explain = cluster
        .kvctl_on(&all, &["--json", "explain", "routed"])
        .await
        .unwrap();
    ok(&explain);
    let replicas: Vec<String> = explain.json().unwrap()["replicas"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_str().unwrap().to_string())
        .collect();
    for record in decisions {
        let settings: kv_router::RouterSettings =
            serde_json::from_value(record["settings"].clone()).unwrap();
        let inputs: kv_router::Inputs = serde_json::from_value(record["inputs"].clone()).unwrap();
        let made: kv_router::Decision = serde_json::from_value(record["decision"].clone()).unwrap();
        let draw = record["draw"].as_u64().unwrap();
        assert_eq!(kv_router::decide(&settings, &inputs, draw), made);
        let first = made.order[0].to_string();
        assert!(
            replicas.contains(&first),
            "{first} is not a replica: {replicas:?}"
        );
        // Without a flag kvctl routes in the cluster's mode.
        assert_eq!(record["decision"]["mode"], "scoring", "{record}");
    }

    // `--router-mode plain` and `KV_ROUTER_MODE=plain` are honoured: the
    // logged decisions were made in mode plain.
    for (how, env, flag) in [
        (
            "--router-mode plain",
            None,
            Some(["--router-mode", "plain"]),
        ),
        (
            "KV_ROUTER_MODE=plain",
            Some(("KV_ROUTER_MODE", "plain")),
            None,
        ),
    ] {
        let log = cluster
            .dir()
            .join(format!("decisions-{}.jsonl", how.replace([' ', '='], "-")));
        let log_s = log.to_str().unwrap();
        let mut args: Vec<&str> = flag.map(|f| f.to_vec()).unwrap_or_default();
        args.extend(["--log-decisions", log_s, "get", "routed"]);
        let env: Vec<(&str, &str)> = env.into_iter().collect();
        let get = cluster.kvctl_env(&all, &env, &args).await.unwrap();
        ok(&get);
        assert_eq!(get.stdout, "x\n", "{how}: {get}");
        let out = cluster
            .kvctl_on(&all, &["--json", "decisions", "--client", log_s])
            .await
            .unwrap();
        ok(&out);
        let json = out.json().unwrap();
        let decisions = json["decisions"].as_array().unwrap();
        assert!(!decisions.is_empty(), "{how}: no decision logged: {out}");
        for record in decisions {
            assert_eq!(record["decision"]["mode"], "plain", "{how}: {record}");
            assert_eq!(record["settings"]["mode"], "plain", "{how}: {record}");
        }
    }

    // kvctl bench says which nodes coordinated its requests: replicas of
    // the keys, so every node gets a share.
    let bench = cluster
        .kvctl_on(
            &all,
            &[
                "--json",
                "bench",
                "--duration",
                "2",
                "--clients",
                "4",
                "--keys",
                "200",
            ],
        )
        .await
        .unwrap();
    ok(&bench);
    let json = bench.json().unwrap();
    let coordinated = json["coordinated"].as_object().unwrap();
    let total: u64 = coordinated.values().map(|v| v.as_u64().unwrap()).sum();
    assert!(total > 0, "{bench}");
    assert_eq!(coordinated.len(), 5, "{bench}");
    assert_eq!(json["router_mode"], "scoring", "{bench}");
}
