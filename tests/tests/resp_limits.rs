//! Hostile and slow RESP clients against a real node: connections that
//! send nothing make room for new ones at `max_connections` and at the
//! per-address cap (the longest-idle one that sent no command is closed),
//! engaged connections are never closed for that, and a client that
//! trickles bytes is cut at the unauthenticated deadline or the request
//! deadline while other clients keep being served.

#![allow(clippy::unwrap_used)]

use std::net::{Ipv4Addr, SocketAddr};
use std::time::{Duration, Instant};

use kv_tests::TestCluster;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};

/// A TCP connection to `to` from the loopback address `127.0.0.<from>`
/// (every 127/8 address is this machine's, so a test has several client
/// addresses).
async fn open(from: u8, to: SocketAddr) -> TcpStream {
    let socket = TcpSocket::new_v4().unwrap();
    socket
        .bind(SocketAddr::from((Ipv4Addr::new(127, 0, 0, from), 0)))
        .unwrap();
    socket.connect(to).await.unwrap()
}

/// Everything the server sends until it closes the connection, which must
/// happen within `limit`.
async fn closed_with(stream: &mut (impl AsyncReadExt + Unpin), limit: Duration) -> String {
    let mut got = Vec::new();
    tokio::time::timeout(limit, async {
        let mut buf = [0u8; 1024];
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => got.extend_from_slice(&buf[..n]),
            }
        }
    })
    .await
    .expect("the server did not close the connection");
    String::from_utf8_lossy(&got).into_owned()
}

/// Whether the server sent nothing and kept the connection open for
/// `wait`.
async fn still_open(stream: &mut TcpStream, wait: Duration) -> bool {
    let mut buf = [0u8; 64];
    tokio::time::timeout(wait, stream.read(&mut buf))
        .await
        .is_err()
}

/// Sends `PING` and expects `+PONG`: the connection is then engaged.
async fn ping(stream: &mut TcpStream) {
    stream.write_all(b"PING\r\n").await.unwrap();
    let mut buf = [0u8; 7];
    tokio::time::timeout(Duration::from_secs(5), stream.read_exact(&mut buf))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(&buf, b"+PONG\r\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn silent_connections_make_room_at_the_caps_and_engaged_ones_do_not() {
    let cluster = TestCluster::builder(1)
        .setting("resp", "max_connections", "8")
        .setting("resp", "max_connections_per_address", "6")
        .setting("resp", "unauthenticated_timeout_secs", "60")
        .start()
        .await
        .unwrap();
    let addr: SocketAddr = cluster.resp_addr(1).unwrap().parse().unwrap();
    let quiet = Duration::from_millis(300);

    // Per address: six silent connections from 127.0.0.1; a seventh closes
    // the oldest of them, which is told why.
    let mut local = Vec::new();
    for _ in 0..6 {
        local.push(open(1, addr).await);
    }
    let mut seventh = open(1, addr).await;
    let told = closed_with(&mut local[0], Duration::from_secs(5)).await;
    assert!(told.contains("closed to make room"), "{told:?}");
    for s in &mut local[1..] {
        assert!(still_open(s, Duration::from_millis(50)).await);
    }
    // Once all six are engaged, a new one from there is refused.
    for s in &mut local[1..] {
        ping(s).await;
    }
    ping(&mut seventh).await;
    let mut refused = open(1, addr).await;
    let told = closed_with(&mut refused, Duration::from_secs(5)).await;
    assert_eq!(
        told,
        "-ERR max number of clients reached for this address\r\n"
    );

    // Overall: two silent connections from 127.0.0.2 fill the node (8);
    // one more from 127.0.0.3 closes the older silent one, never an
    // engaged one.
    let mut other_a = open(2, addr).await;
    let mut other_b = open(2, addr).await;
    let mut third = open(3, addr).await;
    let told = closed_with(&mut other_a, Duration::from_secs(5)).await;
    assert!(told.contains("closed to make room"), "{told:?}");
    assert!(still_open(&mut other_b, quiet).await);
    for s in &mut local[1..] {
        ping(s).await;
    }
    ping(&mut seventh).await;
    // All eight engaged: the next one is refused.
    ping(&mut other_b).await;
    ping(&mut third).await;
    let mut refused = open(4, addr).await;
    let told = closed_with(&mut refused, Duration::from_secs(5)).await;
    assert_eq!(told, "-ERR max number of clients reached\r\n");
    // Closing an engaged connection frees its place.
    drop(third);
    let started = Instant::now();
    loop {
        let mut s = open(4, addr).await;
        s.write_all(b"PING\r\n").await.unwrap();
        let mut buf = [0u8; 7];
        if tokio::time::timeout(Duration::from_secs(1), s.read_exact(&mut buf))
            .await
            .is_ok_and(|r| r.is_ok())
            && &buf == b"+PONG\r\n"
        {
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(10));
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clients_trickling_bytes_are_cut_at_their_deadlines() {
    let cluster = TestCluster::builder(1)
        .setting("resp", "password", "\"s3cret\"")
        .setting("resp", "unauthenticated_timeout_secs", "2")
        .setting("resp", "request_timeout_secs", "2")
        .start()
        .await
        .unwrap();
    let addr: SocketAddr = cluster.resp_addr(1).unwrap().parse().unwrap();

    // Not authenticated: a connection that sends nothing, and one that
    // sends an AUTH one byte every 300 ms, are both closed about 2 s after
    // connecting.
    let mut silent = open(1, addr).await;
    let started = Instant::now();
    let (mut slow, writer) = trickle(
        open(1, addr).await,
        b"*2\r\n$4\r\nAUTH\r\n$6\r\ns3cret\r\n",
        Duration::from_millis(300),
    );
    let told = closed_with(&mut slow, Duration::from_secs(5)).await;
    assert!(told.contains("no AUTH within 2 s"), "{told:?}");
    let elapsed = started.elapsed();
    assert!(elapsed < Duration::from_secs(4), "{elapsed:?}");
    writer.abort();
    let told = closed_with(&mut silent, Duration::from_secs(2)).await;
    assert!(told.contains("no AUTH within 2 s"), "{told:?}");

    // Authenticated, then a request trickled byte by byte: cut 2 s after
    // its first byte, while a well-behaved client is served meanwhile.
    let mut authed = open(1, addr).await;
    authed.write_all(b"AUTH s3cret\r\n").await.unwrap();
    let mut ok = [0u8; 5];
    authed.read_exact(&mut ok).await.unwrap();
    assert_eq!(&ok, b"+OK\r\n");
    let mut good = open(2, addr).await;
    good.write_all(b"AUTH s3cret\r\n").await.unwrap();
    good.read_exact(&mut ok).await.unwrap();
    let started = Instant::now();
    let (mut cut, writer) = trickle(
        authed,
        b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$10\r\n0123456789\r\n",
        Duration::from_millis(250),
    );
    let pinger = tokio::spawn(async move {
        for _ in 0..8 {
            ping(&mut good).await;
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        good
    });
    let told = closed_with(&mut cut, Duration::from_secs(5)).await;
    assert!(told.contains("not complete within 2 s"), "{told:?}");
    let elapsed = started.elapsed();
    assert!(elapsed < Duration::from_secs(4), "{elapsed:?}");
    writer.abort();
    let mut good = pinger.await.unwrap();
    // An authenticated connection idle between requests is cut by neither
    // deadline (the idle timeout is off).
    tokio::time::sleep(Duration::from_millis(2500)).await;
    ping(&mut good).await;
}

/// Splits `stream`: a task writes `bytes` but the last one, one byte every
/// `every`; the read half is returned to watch what the server does.
fn trickle(
    stream: TcpStream,
    bytes: &'static [u8],
    every: Duration,
) -> (tokio::net::tcp::OwnedReadHalf, tokio::task::JoinHandle<()>) {
    let (read, mut write) = stream.into_split();
    let writer = tokio::spawn(async move {
        for byte in &bytes[..bytes.len() - 1] {
            if write.write_all(&[*byte]).await.is_err() {
                return;
            }
            tokio::time::sleep(every).await;
        }
        // Hold the connection open, never finishing the request.
        tokio::time::sleep(Duration::from_secs(60)).await;
        drop(write);
    });
    (read, writer)
}
