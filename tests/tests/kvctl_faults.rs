//! kvctl with nodes down (issue 16, items 7 and 8): `repair` names a dead
//! node and exits 4, `delete` reads with `--r` and says which flag to
//! lower, and deleting what is not there succeeds and says so.

#![allow(clippy::unwrap_used)]

use kv_tests::TestCluster;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kvctl_says_what_it_could_not_do_with_nodes_down() {
    let cluster = TestCluster::start(3).await.unwrap();

    // Nothing there: exit 0 (deletes are idempotent), and it says so.
    let out = cluster.kvctl(&["delete", "nosuchkey"]).await.unwrap();
    assert_eq!(out.code, 0, "{out}");
    assert!(out.stdout.contains("nothing was there"), "{out}");
    let out = cluster
        .kvctl(&["--json", "delete", "nosuchkey"])
        .await
        .unwrap();
    assert_eq!(out.code, 0, "{out}");
    assert_eq!(out.json().unwrap()["existed"], false, "{out}");
    let out = cluster.kvctl(&["put", "k", "v"]).await.unwrap();
    assert_eq!(out.code, 0, "{out}");
    let out = cluster.kvctl(&["--json", "delete", "k"]).await.unwrap();
    assert_eq!(out.code, 0, "{out}");
    assert_eq!(out.json().unwrap()["existed"], true, "{out}");

    // One node down: a repair of "every node" cannot cover it.
    cluster.kill(3).unwrap();
    cluster.wait_dead(3).await.unwrap();
    let out = cluster
        .kvctl(&["--identity", "admin", "repair"])
        .await
        .unwrap();
    assert_eq!(out.code, 4, "a repair that skipped node3 exits 4: {out}");
    assert!(out.stdout.contains("node3: not repaired"), "{out}");
    let out = cluster
        .kvctl(&["--identity", "admin", "--json", "repair"])
        .await
        .unwrap();
    assert_eq!(out.code, 4, "{out}");
    assert_eq!(
        out.json().unwrap()["unreached"][0]["node"],
        "node3",
        "{out}"
    );

    // Two of three replicas down: R=2 cannot be met, and the advice names
    // the flags delete has, once.
    let out = cluster.kvctl(&["put", "k2", "v"]).await.unwrap();
    assert_eq!(out.code, 0, "{out}");
    cluster.kill(2).unwrap();
    cluster.wait_dead(2).await.unwrap();
    let out = cluster.kvctl(&["delete", "k2"]).await.unwrap();
    assert_eq!(out.code, 3, "{out}");
    // delete's own advice (its read's --r, and its --w), not get's or
    // put's, on one line, once; and not the generic tail.
    assert_eq!(
        out.stderr
            .matches("or lower --r (the read a delete makes first) or --w")
            .count(),
        1,
        "{out}"
    );
    assert_eq!(out.stderr.lines().count(), 1, "{out}");
    assert!(out.stderr.ends_with("or --w\n"), "{out}");
    assert_eq!(out.stderr.matches("nothing was stored").count(), 0, "{out}");
    let out = cluster
        .kvctl(&["delete", "k2", "--r", "1", "--w", "1"])
        .await
        .unwrap();
    assert_eq!(out.code, 0, "{out}");
    assert_eq!(out.stdout, "OK\n", "{out}");
    let out = cluster.kvctl(&["get", "k2", "--r", "1"]).await.unwrap();
    assert_eq!(out.code, 1, "{out}");
}
