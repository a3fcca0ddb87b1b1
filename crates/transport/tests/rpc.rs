//! Real QUIC endpoints on loopback: request/response, role checks, and a
//! certificate from another CA.
#![allow(clippy::unwrap_used)]

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use kv_tls::{ANY_NODE, PeerIdentity, Role, TlsFiles};
use kv_transport::{Endpoint, Error, Handler, TransportSettings};
use kv_types::NodeId;
use kv_wire::{
    ClientReply, ErrorKind, PeerCall, PeerReply, PeerRequest, PeerResponse, Request, RequestBody,
    Response,
};
use tokio::sync::mpsc;

/// Answers every client request with an echo: a `Written` whose context is
/// the caller's role and name, and every replica call with `Replaced(true)`;
/// both carry ring version 7.
struct Echo;

#[async_trait::async_trait]
impl Handler for Echo {
    async fn handle(&self, peer: &PeerIdentity, request: Request) -> ClientReply {
        if let RequestBody::Get { key, .. } = &request.body
            && key == b"slow"
        {
            tokio::time::sleep(Duration::from_secs(5)).await;
        }
        ClientReply {
            ring_version: 7,
            response: Response::Written {
                context: format!("{}:{}:{}", peer.role.as_str(), peer.name, request.id)
                    .into_bytes(),
            },
        }
    }

    async fn handle_peer(&self, _peer: &PeerIdentity, call: PeerCall) -> PeerReply {
        PeerReply {
            ring_version: 7,
            feedback: None,
            response: PeerResponse::Replaced(call.ring_version == 3),
        }
    }
}

fn node(dir: &std::path::Path, name: &str) -> Arc<Endpoint> {
    let creds = kv_tls::load(&TlsFiles::in_dir(dir, name)).unwrap();
    let (tx, _rx) = mpsc::channel(8);
    Endpoint::bind(
        "127.0.0.1:0".parse().unwrap(),
        &creds,
        TransportSettings::default(),
        Arc::new(Echo),
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

fn get(id: u64) -> Request {
    Request {
        id,
        body: RequestBody::Get {
            key: b"k".to_vec(),
            r: None,
            hedged: false,
        },
    }
}

fn certs(names: &[&str]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let ids: Vec<NodeId> = names.iter().map(|n| NodeId::new(*n).unwrap()).collect();
    kv_tls::init(dir.path(), &ids).unwrap();
    dir
}

#[tokio::test]
async fn requests_are_answered_with_the_callers_identity() {
    let dir = certs(&["node1", "node2"]);
    let n1 = node(dir.path(), "node1");
    let addr: SocketAddr = n1.local_addr().unwrap();
    let c = client(dir.path(), "client");
    let t = Duration::from_secs(5);
    for id in 0..20 {
        let r = c.call(addr, ANY_NODE, &get(id), t).await.unwrap();
        assert_eq!(r.ring_version, 7);
        assert_eq!(
            r.response,
            Response::Written {
                context: format!("client:client:{id}").into_bytes()
            }
        );
    }
    // A node calling with the expected node id.
    let n2 = node(dir.path(), "node2");
    let r = n2.call(addr, "node1", &get(7), t).await.unwrap();
    assert_eq!(
        r.response,
        Response::Written {
            context: b"node:node2:7".to_vec()
        }
    );
    // On the pooled connection, expecting another node behind that address
    // is refused too (the certificate's name is checked per call).
    let err = n2.call(addr, "node3", &get(8), t).await.unwrap_err();
    assert!(matches!(err, Error::Refused { .. }), "{err}");
    assert!(err.is_unsent());
    let r = n2.call(addr, "node1", &get(9), t).await.unwrap();
    assert!(matches!(r.response, Response::Written { .. }), "{r:?}");
    // Expecting the wrong node id behind that address is refused.
    let other = client(dir.path(), "admin");
    let err = other.call(addr, "node2", &get(1), t).await.unwrap_err();
    assert!(matches!(err, Error::Refused { .. }), "{err}");
    assert!(err.is_unsent());
}

#[tokio::test]
async fn peer_requests_need_a_node_certificate() {
    let dir = certs(&["node1"]);
    kv_tls::add_client(dir.path(), "ops", Role::Admin).unwrap();
    let n1 = node(dir.path(), "node1");
    let addr = n1.local_addr().unwrap();
    let peer = PeerCall {
        id: 1,
        ring_version: 3,
        body: PeerRequest::ReplicaGet { key: b"k".to_vec() },
    };
    for name in ["client", "ops"] {
        let r = client(dir.path(), name)
            .call_peer(addr, ANY_NODE, &peer, Duration::from_secs(5))
            .await
            .unwrap();
        match r.response {
            PeerResponse::Error(e) => assert_eq!(e.kind, ErrorKind::Refused),
            other => panic!("expected a refusal, got {other:?}"),
        }
    }
    // A node's call reaches the handler, with the caller's ring version.
    let n2 = node(dir.path(), "node1");
    let r = n2
        .call_peer(addr, "node1", &peer, Duration::from_secs(5))
        .await
        .unwrap();
    assert_eq!(r.ring_version, 7);
    assert_eq!(r.response, PeerResponse::Replaced(true));
}

#[tokio::test]
async fn a_certificate_from_another_ca_is_refused() {
    let ours = certs(&["node1"]);
    let theirs = certs(&["node1"]);
    let n1 = node(ours.path(), "node1");
    let addr = n1.local_addr().unwrap();
    let stranger = client(theirs.path(), "client");
    let err = stranger
        .call(addr, ANY_NODE, &get(1), Duration::from_secs(5))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Refused { .. }), "{err}");
    assert!(err.is_unsent());
}

#[tokio::test]
async fn a_slow_answer_times_out_as_sent() {
    let dir = certs(&["node1"]);
    let n1 = node(dir.path(), "node1");
    let c = client(dir.path(), "client");
    let slow = Request {
        id: 3,
        body: RequestBody::Get {
            key: b"slow".to_vec(),
            r: None,
            hedged: false,
        },
    };
    let err = c
        .call(
            n1.local_addr().unwrap(),
            ANY_NODE,
            &slow,
            Duration::from_millis(300),
        )
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Timeout { sent: true, .. }), "{err}");
    assert!(!err.is_unsent());
}

#[tokio::test]
async fn nobody_listening_is_a_connect_error() {
    let dir = certs(&["node1"]);
    let c = client(dir.path(), "client");
    let dead: SocketAddr = {
        let s = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        s.local_addr().unwrap()
    };
    let err = c
        .call(dead, ANY_NODE, &get(1), Duration::from_secs(5))
        .await
        .unwrap_err();
    assert!(err.is_unsent(), "{err}");
}

#[tokio::test]
async fn draining_does_not_wait_for_gossip_to_a_dead_peer() {
    let dir = certs(&["node1"]);
    let n = node(dir.path(), "node1");
    // A socket that swallows every packet: no handshake ever completes, so
    // a gossip send to it lasts its whole deadline (two connect timeouts).
    let hole = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    n.send_gossip(hole.local_addr().unwrap(), b"hello");
    n.stop_accepting();
    let started = std::time::Instant::now();
    n.drain(Duration::from_secs(10)).await;
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "drain waited {:?} for a gossip send",
        started.elapsed()
    );
    // Closing ends the send at once.
    let started = std::time::Instant::now();
    n.close().await;
    assert!(started.elapsed() < Duration::from_millis(1500));
    drop(hole);
}
