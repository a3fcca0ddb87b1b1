//! Reloading an endpoint's certificate, key and CA bundle while it runs
//! (a node's SIGHUP during a CA rotation): new connections, accepted and
//! dialed, use the new files; open connections go on with the old ones.
#![allow(clippy::unwrap_used)]

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use kv_tls::{ANY_NODE, Credentials, PeerIdentity, RotationStep, TlsFiles};
use kv_transport::{Endpoint, Error, Handler, TransportSettings};
use kv_types::NodeId;
use kv_wire::{ClientReply, PeerCall, PeerReply, PeerResponse, Request, RequestBody, Response};
use tokio::sync::mpsc;

/// Answers every client request with the caller's role and name.
struct Echo;

#[async_trait::async_trait]
impl Handler for Echo {
    async fn handle(&self, peer: &PeerIdentity, _request: Request) -> ClientReply {
        ClientReply {
            ring_version: 1,
            response: Response::Written {
                context: format!("{}:{}", peer.role.as_str(), peer.name).into_bytes(),
            },
        }
    }

    async fn handle_peer(&self, _peer: &PeerIdentity, _call: PeerCall) -> PeerReply {
        PeerReply {
            ring_version: 1,
            feedback: None,
            response: PeerResponse::Replaced(true),
        }
    }
}

const T: Duration = Duration::from_secs(5);

fn certs(names: &[&str]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let ids: Vec<NodeId> = names.iter().map(|n| NodeId::new(*n).unwrap()).collect();
    kv_tls::init(dir.path(), &ids).unwrap();
    dir
}

/// `name`'s files in `dir` as they are now.
fn creds(dir: &Path, name: &str) -> Credentials {
    kv_tls::load(&TlsFiles::in_dir(dir, name)).unwrap()
}

fn node(creds: &Credentials) -> Arc<Endpoint> {
    let (tx, _rx) = mpsc::channel(8);
    Endpoint::bind(
        "127.0.0.1:0".parse().unwrap(),
        creds,
        TransportSettings::default(),
        Arc::new(Echo),
        tx,
    )
    .unwrap()
}

fn client(creds: &Credentials) -> Arc<Endpoint> {
    Endpoint::client(
        "127.0.0.1:0".parse().unwrap(),
        creds,
        TransportSettings::default(),
    )
    .unwrap()
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

/// Calls `addr` from `from` and says who the node saw.
async fn caller_seen(from: &Endpoint, addr: SocketAddr, server: &str) -> Result<String, Error> {
    let reply = from.call(addr, server, &get(), T).await?;
    match reply.response {
        Response::Written { context } => Ok(String::from_utf8(context).unwrap()),
        other => panic!("unexpected answer {other:?}"),
    }
}

#[tokio::test]
async fn a_reloaded_node_accepts_with_its_new_files_and_keeps_open_connections() {
    let dir = certs(&["node1"]);
    let d = dir.path();
    let before = creds(d, "client");
    let n1 = node(&creds(d, "node1"));
    let addr = n1.local_addr().unwrap();
    // A client connected before the rotation, which never reloads.
    let early = client(&before);
    assert_eq!(
        caller_seen(&early, addr, "node1").await.unwrap(),
        "client:client"
    );

    // Begin, and node1 reloads: it trusts the new CA too. A client holding
    // the new CA's certificate (staged in next/) is accepted; a node still
    // on the old CA alone (as node1 was before its reload) refuses it.
    kv_tls::rotate(d, RotationStep::Begin).unwrap();
    let mut staged = TlsFiles::in_dir(d.join(kv_tls::NEXT_DIR), "client");
    staged.ca = d.join("ca.pem");
    let new_client = client(&kv_tls::load(&staged).unwrap());
    let stale_node = {
        let mut files = TlsFiles::in_dir(d, "node1");
        files.ca = d.join(kv_tls::PREVIOUS_DIR).join("ca.pem");
        node(&kv_tls::load(&files).unwrap())
    };
    let err = caller_seen(&new_client, stale_node.local_addr().unwrap(), "node1")
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Refused { .. }), "{err}");
    n1.reload(&creds(d, "node1")).unwrap();
    assert_eq!(
        caller_seen(&new_client, addr, "node1").await.unwrap(),
        "client:client"
    );
    assert_eq!(
        caller_seen(&early, addr, "node1").await.unwrap(),
        "client:client"
    );

    // Switch, and node1 reloads: it presents its new certificate. A client
    // that loaded only the old CA refuses it on a new connection, while the
    // early client's open connection goes on.
    let trusting = creds(d, "client");
    kv_tls::rotate(d, RotationStep::Switch).unwrap();
    n1.reload(&creds(d, "node1")).unwrap();
    let err = caller_seen(&client(&before), addr, "node1")
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Refused { .. }), "{err}");
    assert!(err.to_string().contains("UnknownIssuer"), "{err}");
    assert_eq!(
        caller_seen(&client(&trusting), addr, "node1")
            .await
            .unwrap(),
        "client:client"
    );
    assert_eq!(
        caller_seen(&early, addr, "node1").await.unwrap(),
        "client:client"
    );

    // Finish, and node1 reloads: the old CA is trusted no more on new
    // connections; the open ones still answer.
    kv_tls::rotate(d, RotationStep::Finish).unwrap();
    n1.reload(&creds(d, "node1")).unwrap();
    let err = caller_seen(&client(&trusting), addr, "node1")
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Refused { .. }), "{err}");
    assert_eq!(
        caller_seen(&client(&creds(d, "client")), addr, "node1")
            .await
            .unwrap(),
        "client:client"
    );
    assert_eq!(
        caller_seen(&early, addr, "node1").await.unwrap(),
        "client:client"
    );
    assert_eq!(
        caller_seen(&new_client, addr, "node1").await.unwrap(),
        "client:client"
    );
}

#[tokio::test]
async fn a_reloaded_node_dials_with_its_new_certificate() {
    let dir = certs(&["node1", "node2"]);
    let d = dir.path();
    let n1 = node(&creds(d, "node1"));
    for step in [
        RotationStep::Begin,
        RotationStep::Switch,
        RotationStep::Finish,
    ] {
        kv_tls::rotate(d, step).unwrap();
    }
    // node2 starts on the new CA alone.
    let n2 = node(&creds(d, "node2"));
    let to = n2.local_addr().unwrap();
    let err = caller_seen(&n1, to, "node2").await.unwrap_err();
    assert!(matches!(err, Error::Refused { .. }), "{err}");
    n1.reload(&creds(d, "node1")).unwrap();
    assert_eq!(caller_seen(&n1, to, "node2").await.unwrap(), "node:node1");
}

#[tokio::test]
async fn a_reload_with_another_identity_changes_nothing() {
    let dir = certs(&["node1", "node2"]);
    let d = dir.path();
    let n1 = node(&creds(d, "node1"));
    let addr = n1.local_addr().unwrap();
    for other in ["node2", "client", "admin"] {
        let err = n1.reload(&creds(d, other)).unwrap_err();
        assert!(matches!(err, Error::Tls(_)), "{err}");
        assert!(err.to_string().contains(other), "{err}");
    }
    let c = client(&creds(d, "client"));
    c.reload(&creds(d, "client")).unwrap();
    let err = c.reload(&creds(d, "admin")).unwrap_err();
    assert!(err.to_string().contains("admin"), "{err}");
    // node1 is still node1 to a new connection.
    assert_eq!(
        caller_seen(&c, addr, "node1").await.unwrap(),
        "client:client"
    );
}

#[tokio::test]
async fn a_reload_does_not_reopen_a_stopped_endpoint() {
    let dir = certs(&["node1"]);
    let d = dir.path();
    let n1 = node(&creds(d, "node1"));
    let addr = n1.local_addr().unwrap();
    n1.stop_accepting();
    n1.reload(&creds(d, "node1")).unwrap();
    let err = client(&creds(d, "client"))
        .connect(addr, ANY_NODE, T)
        .await
        .unwrap_err();
    assert!(err.is_unsent(), "{err}");
}
