//! Hostile and slow peers on real QUIC endpoints on loopback: a certificate
//! holder that opens connections and streams and then sends nothing, or one
//! byte at a time, or more than its role may send, cannot hold the node's
//! tasks, connections or buffers beyond the limits, and other callers keep
//! being answered.
#![allow(clippy::unwrap_used)]

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use kv_tls::{ANY_NODE, PeerIdentity, Role, TlsFiles};
use kv_transport::{Endpoint, Handler, TransportSettings};
use kv_types::NodeId;
use kv_wire::{
    ClientReply, MAX_REQUEST_BYTES, PeerCall, PeerReply, PeerResponse, Request, RequestBody,
    Response,
};
use quinn::crypto::rustls::QuicClientConfig;
use tokio::sync::mpsc;

/// The transport's stop code for a request stream it gave up on.
const STOP_ABANDONED: u32 = 0x13;
/// The transport's close code for a connection beyond its identity's cap.
const CLOSE_TOO_MANY: u32 = 0x12;

/// Answers every client request with `Ack`.
struct Ack;

#[async_trait::async_trait]
impl Handler for Ack {
    async fn handle(&self, _peer: &PeerIdentity, _request: Request) -> ClientReply {
        ClientReply {
            ring_version: 1,
            response: Response::Ack,
        }
    }

    async fn handle_peer(&self, _peer: &PeerIdentity, _call: PeerCall) -> PeerReply {
        PeerReply {
            ring_version: 1,
            feedback: None,
            response: PeerResponse::Replaced(false),
        }
    }
}

fn certs() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    kv_tls::init(dir.path(), &[NodeId::new("node1").unwrap()]).unwrap();
    kv_tls::add_client(dir.path(), "ops", Role::Admin).unwrap();
    dir
}

/// Short deadlines and small caps, so the limits are reached quickly.
fn settings() -> TransportSettings {
    TransportSettings {
        read_timeout: Duration::from_secs(1),
        write_timeout: Duration::from_secs(1),
        max_connections_per_identity: 3,
        max_streams_per_connection: 4,
        ..TransportSettings::default()
    }
}

fn node(dir: &std::path::Path) -> Arc<Endpoint> {
    let creds = kv_tls::load(&TlsFiles::in_dir(dir, "node1")).unwrap();
    let (tx, _rx) = mpsc::channel(8);
    Endpoint::bind(
        "127.0.0.1:0".parse().unwrap(),
        &creds,
        settings(),
        Arc::new(Ack),
        tx,
    )
    .unwrap()
}

fn client(dir: &std::path::Path, name: &str) -> Arc<Endpoint> {
    let creds = kv_tls::load(&TlsFiles::in_dir(dir, name)).unwrap();
    Endpoint::client(
        "127.0.0.1:0".parse().unwrap(),
        &creds,
        TransportSettings::default(),
    )
    .unwrap()
}

/// A bare quinn endpoint holding the certificate `name`: it opens
/// connections and streams and writes exactly what the test says.
fn raw(dir: &std::path::Path, name: &str) -> quinn::Endpoint {
    let creds = kv_tls::load(&TlsFiles::in_dir(dir, name)).unwrap();
    let crypto = QuicClientConfig::try_from(kv_tls::client_config(&creds).unwrap()).unwrap();
    let mut ep = quinn::Endpoint::client("127.0.0.1:0".parse().unwrap()).unwrap();
    ep.set_default_client_config(quinn::ClientConfig::new(Arc::new(crypto)));
    ep
}

async fn connect(ep: &quinn::Endpoint, addr: SocketAddr) -> quinn::Connection {
    ep.connect(addr, ANY_NODE).unwrap().await.unwrap()
}

fn get() -> Request {
    Request {
        id: 1,
        body: RequestBody::Get {
            key: b"k".to_vec(),
            r: None,
            hedged: false,
        },
    }
}

/// Polls `cond` every 20 ms until it holds or `limit` passes.
async fn eventually(limit: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + limit;
    while Instant::now() < end {
        if cond() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    cond()
}

#[tokio::test]
async fn silent_connections_and_streams_are_capped_and_cut_at_the_deadline() {
    let dir = certs();
    let n1 = node(dir.path());
    let addr = n1.local_addr().unwrap();
    let idle_tasks = n1.serving_tasks();
    let hostile = raw(dir.path(), "client");
    // Six connections under one certificate, each with its four streams
    // opened by one byte of a frame header, then silence.
    let mut conns = Vec::new();
    let mut streams = Vec::new();
    for i in 0..6 {
        if i == 3 {
            // The first three connections' streams have reached the node.
            assert!(
                eventually(Duration::from_secs(2), || n1.serving_tasks()
                    >= idle_tasks + 3 + 12)
                .await
            );
        }
        let conn = connect(&hostile, addr).await;
        for _ in 0..4 {
            if let Ok((mut send, recv)) = conn.open_bi().await {
                let _ = send.write_all(&[3]).await;
                streams.push((send, recv));
            }
        }
        conns.push(conn);
    }
    // The first three are busy: the next three are refused, so the node
    // serves three connections of that certificate and their twelve
    // streams at most.
    for refused in &conns[3..] {
        let closed = tokio::time::timeout(Duration::from_secs(2), refused.closed())
            .await
            .unwrap();
        assert!(
            matches!(&closed, quinn::ConnectionError::ApplicationClosed(c) if c.error_code == quinn::VarInt::from_u32(CLOSE_TOO_MANY)),
            "{closed}"
        );
    }
    assert!(n1.served_connections() <= 3, "{}", n1.served_connections());
    assert!(
        n1.serving_tasks() <= idle_tasks + 3 + 12,
        "{} tasks",
        n1.serving_tasks()
    );
    // Another identity is answered meanwhile.
    let ops = client(dir.path(), "ops");
    let reply = ops
        .call(addr, ANY_NODE, &get(), Duration::from_secs(2))
        .await
        .unwrap();
    assert_eq!(reply.response, Response::Ack);
    // Every silent stream of an admitted connection is given up at the
    // read deadline (1 s), with the stop code that says so.
    let started = Instant::now();
    for (send, _) in streams.iter_mut().take(12) {
        let stopped = tokio::time::timeout(Duration::from_secs(3), send.stopped())
            .await
            .expect("a silent stream outlived its read deadline");
        assert_eq!(
            stopped.unwrap(),
            Some(quinn::VarInt::from_u32(STOP_ABANDONED))
        );
    }
    assert!(started.elapsed() < Duration::from_secs(3));
    // Their tasks are gone: what is left is one task per connection.
    assert!(
        eventually(Duration::from_secs(2), || n1.serving_tasks()
            <= idle_tasks + n1.served_connections())
        .await,
        "{} tasks for {} connections",
        n1.serving_tasks(),
        n1.served_connections()
    );
    // Now idle, the hostile connections make room: a well-behaved client
    // with the same certificate is admitted and answered, and the oldest
    // idle connection of that certificate was closed for it.
    let good = client(dir.path(), "client");
    let reply = good
        .call(addr, ANY_NODE, &get(), Duration::from_secs(2))
        .await
        .unwrap();
    assert_eq!(reply.response, Response::Ack);
    let oldest = tokio::time::timeout(Duration::from_secs(2), conns[0].closed())
        .await
        .unwrap();
    assert!(
        matches!(&oldest, quinn::ConnectionError::ApplicationClosed(c) if c.error_code == quinn::VarInt::from_u32(CLOSE_TOO_MANY)),
        "{oldest}"
    );
    assert!(conns[1].close_reason().is_none());
    assert!(n1.served_connections() <= 4);
}

#[tokio::test]
async fn a_request_trickling_one_byte_at_a_time_is_cut_at_the_read_deadline() {
    let dir = certs();
    let n1 = node(dir.path());
    let addr = n1.local_addr().unwrap();
    let idle_tasks = n1.serving_tasks();
    let conn = connect(&raw(dir.path(), "client"), addr).await;
    let (mut send, mut recv) = conn.open_bi().await.unwrap();
    let started = Instant::now();
    let mut sent = 0;
    // One byte every 200 ms, never a whole frame: it keeps arriving, but
    // the deadline counts from the stream's start, not from the last byte.
    let stop = loop {
        if send.write_all(&[0x03]).await.is_err() {
            break send.stopped().await;
        }
        sent += 1;
        assert!(
            started.elapsed() < Duration::from_secs(4),
            "still reading after {sent} bytes"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(stop.unwrap(), Some(quinn::VarInt::from_u32(STOP_ABANDONED)));
    assert!(sent <= 10, "{sent} bytes were read");
    // No answer comes, and the stream's task is gone.
    let answer = recv.read_to_end(1 << 20).await;
    assert!(answer.is_err() || answer.as_ref().is_ok_and(Vec::is_empty));
    assert!(
        eventually(Duration::from_secs(2), || n1.serving_tasks()
            <= idle_tasks + 1)
        .await,
        "{} tasks",
        n1.serving_tasks()
    );
}

#[tokio::test]
async fn a_client_request_longer_than_any_request_is_not_read() {
    let dir = certs();
    let n1 = node(dir.path());
    let addr = n1.local_addr().unwrap();
    let conn = connect(&raw(dir.path(), "client"), addr).await;
    let (mut send, _recv) = conn.open_bi().await.unwrap();
    // A client certificate's stream is read up to one maximal request;
    // a stream twice that long is stopped before its end.
    let huge = vec![0u8; 2 * MAX_REQUEST_BYTES];
    // The write may fail once the stop arrives, or complete first into
    // quinn's buffers and windows (timing): either way the node must stop
    // the stream, not read it to its end.
    let write = tokio::time::timeout(Duration::from_secs(5), send.write_all(&huge))
        .await
        .unwrap();
    if write.is_ok() {
        let _ = send.finish();
    }
    let stopped = tokio::time::timeout(Duration::from_secs(5), send.stopped())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        stopped,
        Some(quinn::VarInt::from_u32(STOP_ABANDONED)),
        "the whole oversized request was accepted"
    );
    // The connection stays usable for a proper request.
    let (mut send, mut recv) = conn.open_bi().await.unwrap();
    send.write_all(&kv_wire::frame::encode(kv_wire::FrameKind::Request, &get()).unwrap())
        .await
        .unwrap();
    send.finish().unwrap();
    let answer = recv.read_to_end(1 << 20).await.unwrap();
    let reply: ClientReply = kv_wire::frame::decode(kv_wire::FrameKind::Response, &answer).unwrap();
    assert_eq!(reply.response, Response::Ack);
}
