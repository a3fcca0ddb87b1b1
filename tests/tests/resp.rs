//! The RESP front door, driven by a real Redis client (the `redis` crate):
//! SET/GET/DEL/EXISTS/MGET/MSET through any node with the cluster's
//! quorums, the sibling rule of GET (and siblings kept in storage),
//! malformed frames, and AUTH.

#![allow(clippy::unwrap_used)]

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use kv_tests::TestCluster;
use redis::{Connection, RedisResult, Value};

/// A blocking Redis connection to `addr` (`HOST:PORT`).
fn connect(addr: &str) -> Connection {
    let client = redis::Client::open(format!("redis://{addr}/")).unwrap();
    client.get_connection().unwrap()
}

/// Runs a blocking closure off the runtime's workers.
async fn blocking<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> T {
    tokio::task::spawn_blocking(f).await.unwrap()
}

/// Writes `raw` on a fresh TCP connection and reads what comes back within
/// a second (until the server closes, or the time is up).
fn raw_exchange(addr: &str, raw: &[u8]) -> (String, bool) {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_millis(1000)))
        .unwrap();
    stream.write_all(raw).unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    let closed = loop {
        match stream.read(&mut buf) {
            Ok(0) => break true,
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(_) => break false,
        }
    };
    (String::from_utf8_lossy(&got).into_owned(), closed)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_clients_set_get_and_delete_through_any_node() {
    let cluster = TestCluster::start(3).await.unwrap();
    let (one, two) = (cluster.resp_addr(1).unwrap(), cluster.resp_addr(2).unwrap());
    blocking(move || {
        let mut c1 = connect(&one);
        let mut c2 = connect(&two);
        let pong: String = redis::cmd("PING").query(&mut c1).unwrap();
        assert_eq!(pong, "PONG");
        let _: () = redis::cmd("SET")
            .arg("greeting")
            .arg("hello")
            .query(&mut c1)
            .unwrap();
        // Another coordinator reads it (R=2 of N=3 after W=2).
        let v: Option<String> = redis::cmd("GET").arg("greeting").query(&mut c2).unwrap();
        assert_eq!(v.as_deref(), Some("hello"));
        // SET overwrites: no sibling from a second SET.
        let _: () = redis::cmd("SET")
            .arg("greeting")
            .arg("bye")
            .query(&mut c2)
            .unwrap();
        let v: Option<String> = redis::cmd("GET").arg("greeting").query(&mut c1).unwrap();
        assert_eq!(v.as_deref(), Some("bye"));

        let _: () = redis::cmd("MSET")
            .arg(&["a", "1", "b", "2", "a", "3"])
            .query(&mut c1)
            .unwrap();
        let vs: Vec<Option<String>> = redis::cmd("MGET")
            .arg(&["a", "b", "missing"])
            .query(&mut c2)
            .unwrap();
        assert_eq!(vs, [Some("3".into()), Some("2".into()), None]);
        // More keys than the admission queue has slots: they run 64 at a time.
        let many: Vec<String> = (0..600).map(|i| format!("many{i}")).collect();
        let pairs: Vec<String> = many[..100]
            .iter()
            .flat_map(|k| [k.clone(), "v".into()])
            .collect();
        let _: () = redis::cmd("MSET").arg(&pairs).query(&mut c2).unwrap();
        let vs: Vec<Option<String>> = redis::cmd("MGET").arg(&many).query(&mut c1).unwrap();
        assert_eq!(vs.len(), 600);
        assert_eq!(vs.iter().filter(|v| v.is_some()).count(), 100);
        let n: i64 = redis::cmd("EXISTS")
            .arg(&["a", "b", "missing", "a"])
            .query(&mut c1)
            .unwrap();
        assert_eq!(n, 3);
        let n: i64 = redis::cmd("DEL")
            .arg(&["a", "missing", "a"])
            .query(&mut c2)
            .unwrap();
        assert_eq!(n, 1);
        let v: Option<String> = redis::cmd("GET").arg("a").query(&mut c1).unwrap();
        assert_eq!(v, None);

        // Errors keep the connection usable.
        let e: RedisResult<Value> = redis::cmd("SET")
            .arg("k")
            .arg("v")
            .arg("EX")
            .arg("1")
            .query(&mut c1);
        assert!(e.unwrap_err().to_string().contains("no expiry"));
        let e: RedisResult<Value> = redis::cmd("FLUSHALL").query(&mut c1);
        assert!(e.unwrap_err().to_string().contains("unknown command"));
        let long = "k".repeat(2000);
        let e: RedisResult<Value> = redis::cmd("GET").arg(&long).query(&mut c1);
        assert!(e.unwrap_err().to_string().contains("limit"));
        let info: String = redis::cmd("INFO").arg("kvstore").query(&mut c1).unwrap();
        assert!(info.contains("sibling_rule:newest"), "{info}");
        let config: Vec<String> = redis::cmd("CONFIG")
            .arg("GET")
            .arg("save")
            .query(&mut c1)
            .unwrap();
        assert_eq!(config, ["save", ""]);
    })
    .await;

    // Malformed frames: a bad element is refused and the connection goes on;
    // an oversized bulk string is refused and the connection closed.
    let addr = cluster.resp_addr(1).unwrap();
    let (got, closed) = raw_exchange(&addr, b"*2\r\n$3\r\nGET\r\n:1\r\nPING\r\n");
    assert!(
        got.starts_with("-ERR Protocol error: expected '$'"),
        "{got}"
    );
    assert!(got.ends_with("+PONG\r\n") && !closed, "{got}");
    let (got, closed) = raw_exchange(&addr, b"*2\r\n$3\r\nSET\r\n$99999999999\r\n");
    assert!(got.starts_with("-ERR Protocol error: bulk length"), "{got}");
    assert!(closed, "{got}");
    // The same with the oversized value actually sent after the header:
    // the error still reaches the client (no reset for unread input).
    let mut oversized = b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$2000000\r\n".to_vec();
    oversized.resize(oversized.len() + 2_000_000, b'x');
    let (got, closed) = raw_exchange(&addr, &oversized);
    assert!(got.starts_with("-ERR Protocol error: bulk length"), "{got}");
    assert!(closed, "{got}");
    let metrics = cluster.admin_get(1, "/metrics").await.unwrap();
    assert!(
        metrics
            .body
            .contains("kv_resp_protocol_errors_total{reason=\"fatal_frame\"} 2"),
        "{}",
        metrics.body
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_answers_the_newest_sibling_and_keeps_every_sibling() {
    let cluster = TestCluster::start(3).await.unwrap();
    let client = cluster.client(&[1]).await.unwrap();
    // Two blind writes: concurrent versions, kept as siblings.
    client.put(b"sib", b"left", &[], None).await.unwrap();
    tokio::time::sleep(Duration::from_millis(5)).await;
    client.put(b"sib", b"right", &[], None).await.unwrap();

    for i in cluster.members() {
        let addr = cluster.resp_addr(i).unwrap();
        let v: Option<String> = blocking(move || {
            redis::cmd("GET")
                .arg("sib")
                .query(&mut connect(&addr))
                .unwrap()
        })
        .await;
        assert_eq!(v.as_deref(), Some("right"), "GET through node{i}");
    }
    // Nothing was resolved by reading: both siblings are still there.
    let read = client.get(b"sib", None).await.unwrap();
    let mut values = read.values.clone();
    values.sort();
    assert_eq!(values, [b"left".to_vec(), b"right".to_vec()], "{read:?}");
    // A RESP SET supersedes both.
    let addr = cluster.resp_addr(2).unwrap();
    blocking(move || {
        let _: () = redis::cmd("SET")
            .arg("sib")
            .arg("one")
            .query(&mut connect(&addr))
            .unwrap();
    })
    .await;
    let read = client.get(b"sib", None).await.unwrap();
    assert_eq!(read.values, [b"one".to_vec()], "{read:?}");
    client.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_error_rule_and_auth() {
    let cluster = TestCluster::builder(3)
        .setting("resp", "siblings", "\"error\"")
        .setting("resp", "password", "\"s3cret\"")
        .start()
        .await
        .unwrap();
    let client = cluster.client(&[1]).await.unwrap();
    client.put(b"sib", b"left", &[], None).await.unwrap();
    client.put(b"sib", b"right", &[], None).await.unwrap();
    let addr = cluster.resp_addr(1).unwrap();
    blocking(move || {
        let mut c = connect(&addr);
        let e: RedisResult<Value> = redis::cmd("GET").arg("sib").query(&mut c);
        assert!(
            e.unwrap_err()
                .to_string()
                .contains("Authentication required")
        );
        let e: RedisResult<Value> = redis::cmd("AUTH").arg("wrong").query(&mut c);
        assert!(
            e.unwrap_err()
                .to_string()
                .contains("invalid username-password")
        );
        let _: () = redis::cmd("AUTH").arg("s3cret").query(&mut c).unwrap();
        let e: RedisResult<Value> = redis::cmd("GET").arg("sib").query(&mut c);
        let text = e.unwrap_err().to_string();
        assert!(text.contains("2 concurrent values"), "{text}");
        // A URL with the password authenticates at connect time.
        let with_password = redis::Client::open(format!("redis://:s3cret@{addr}/")).unwrap();
        let mut c = with_password.get_connection().unwrap();
        let _: () = redis::cmd("SET")
            .arg("plain")
            .arg("v")
            .query(&mut c)
            .unwrap();
        let v: String = redis::cmd("GET").arg("plain").query(&mut c).unwrap();
        assert_eq!(v, "v");
    })
    .await;
    let read = client.get(b"sib", None).await.unwrap();
    assert_eq!(read.values.len(), 2, "{read:?}");
    client.close().await;
}
