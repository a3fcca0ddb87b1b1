//! A node unpaused after a long SIGSTOP (what `docker pause` does to a
//! container) coordinates requests at once: its failure detector saw no
//! heartbeat during its own pause, but that is no evidence against its
//! peers (issue 16, item 5; Cassandra's CASSANDRA-9183).
//!
//! Without the guard (`gossip/src/pause.rs`) the outcome is a race at the
//! resume: chitchat's first gossip round after it convicts every peer
//! unless a gossip message queued during the pause is read before that
//! round. With one worker thread per node (the harness's and
//! `scripts/cluster`'s setting) the round mostly wins: with the guard
//! disabled, 2 of 3 runs of this test had 176 and 902 of their requests
//! fail (docs/benchmarks.md, issue 16); with two threads none of 3 did.
//! The node's own warning naming the stall is asserted too, so the test
//! fails without the guard even when the race goes the other way.

#![allow(clippy::unwrap_used)]

use std::time::Duration;

use kv_tests::TestCluster;
use redis::Connection;
use tokio::time::Instant;

/// How long the node stays paused: far beyond its peers' conviction time
/// (phi 8 over 200 ms gossip rounds is under 2 s) and beyond the failure
/// detector's longest counted interval (20 rounds, 4 s).
const PAUSE: Duration = Duration::from_secs(15);

/// How long requests are sent after the node resumes: the window in which
/// its detector, left alone, convicts every peer (a few gossip rounds),
/// several times over.
const WINDOW: Duration = Duration::from_secs(4);

/// A blocking Redis connection to `addr` (`HOST:PORT`) that gives up on an
/// answer after 15 s (a request timeout of the node is 10 s).
fn connect(addr: &str) -> Connection {
    let client = redis::Client::open(format!("redis://{addr}/")).unwrap();
    let connection = client.get_connection().unwrap();
    connection
        .set_read_timeout(Some(Duration::from_secs(15)))
        .unwrap();
    connection
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unpaused_node_coordinates_at_once() {
    // One worker thread, as every harness and scripts/cluster node: the
    // setting in which the unguarded detector convicts the peers at the
    // resume most often (see the header; KV_PAUSE_THREADS overrides it).
    let threads = std::env::var("KV_PAUSE_THREADS").unwrap_or_else(|_| "1".into());
    let cluster = TestCluster::builder(5)
        .setting("", "worker_threads", &threads)
        .start()
        .await
        .unwrap();
    let resp = cluster.resp_addr(1).unwrap();
    // Node 1 coordinates every request of this connection (RESP has no
    // routing client): its own view of the peers decides them.
    let warm = resp.clone();
    tokio::task::spawn_blocking(move || {
        let mut c = connect(&warm);
        let _: () = redis::cmd("SET")
            .arg("before")
            .arg("1")
            .query(&mut c)
            .unwrap();
    })
    .await
    .unwrap();

    cluster.pause(1).unwrap();
    let paused_at = Instant::now();
    // The others convict it: the cluster really lived on without it.
    cluster.wait_dead(1).await.unwrap();
    // The pause's length is the scenario itself, not a wait for a state.
    tokio::time::sleep(PAUSE.saturating_sub(paused_at.elapsed())).await;
    cluster.resume(1).unwrap();
    let resumed = std::time::Instant::now();

    // Meanwhile, node 1's own view of its peers, as its /status shows it.
    let views = async {
        let (mut samples, mut dead) = (0, Vec::new());
        while resumed.elapsed() < WINDOW {
            if let Ok(answer) = cluster.admin_get(1, "/status").await {
                samples += 1;
                if answer.body.contains("\"alive\":false") {
                    dead.push(resumed.elapsed().as_millis());
                }
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        (samples, dead)
    };
    let requests = tokio::task::spawn_blocking(move || {
        let mut c = connect(&resp);
        let mut outcomes = Vec::new();
        let mut i = 0u32;
        while resumed.elapsed() < WINDOW {
            let key = format!("after:{i}");
            let sent = resumed.elapsed();
            let set: redis::RedisResult<()> = redis::cmd("SET").arg(&key).arg(i).query(&mut c);
            outcomes.push((sent, format!("SET {key}"), set.map_err(|e| e.to_string())));
            let sent = resumed.elapsed();
            let get: redis::RedisResult<Option<u32>> = redis::cmd("GET").arg(&key).query(&mut c);
            let get = match get {
                Ok(Some(v)) if v == i => Ok(()),
                Ok(other) => Err(format!("read {other:?}, wrote {i}")),
                Err(e) => Err(e.to_string()),
            };
            outcomes.push((sent, format!("GET {key}"), get));
            i += 1;
        }
        outcomes
    });
    let ((samples, dead), outcomes) = tokio::join!(views, requests);
    let outcomes = outcomes.unwrap();
    eprintln!(
        "node1's /status after the pause: {} of {samples} samples show a peer dead{}",
        dead.len(),
        match (dead.first(), dead.last()) {
            (Some(first), Some(last)) => format!(", from {first} ms to {last} ms"),
            _ => String::new(),
        }
    );

    let failed: Vec<String> = outcomes
        .iter()
        .filter_map(|(at, what, outcome)| {
            let e = outcome.as_ref().err()?;
            Some(format!("{:>6} ms {what}: {e}", at.as_millis()))
        })
        .collect();
    eprintln!(
        "after the pause: {} requests in {WINDOW:?}, {} failed{}",
        outcomes.len(),
        failed.len(),
        failed
            .last()
            .map(|l| format!(", the last at {l}"))
            .unwrap_or_default()
    );
    // It noticed its own stall (and said so), which is what keeps its
    // detector from convicting the peers on the strength of it.
    let log = cluster.log_text(1).unwrap();
    assert!(
        log.contains("this node stalled (paused or starved)"),
        "node1 did not notice its {PAUSE:?} pause (no stall warning in its log)"
    );
    assert!(
        dead.is_empty(),
        "node1 saw live peers dead after its own pause, at {dead:?} ms"
    );
    assert!(
        failed.is_empty(),
        "{} of {} requests node1 coordinated right after its pause failed:\n{}",
        failed.len(),
        outcomes.len(),
        failed.join("\n")
    );
}
