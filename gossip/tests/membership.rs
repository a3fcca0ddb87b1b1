//! Three memberships over real QUIC endpoints on loopback: they find each
//! other from a seed, detect a stopped node as dead, and see its restarted
//! incarnation (new generation) alive in its place.
#![allow(clippy::unwrap_used)]

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use kv_gossip::{GossipSettings, Membership, NodeInfo, QuicTransport, View};
use kv_tls::{PeerIdentity, TlsFiles};
use kv_transport::{Endpoint, Handler, TransportSettings};
use kv_types::{NodeId, NodeStatus};
use kv_wire::{
    ClientReply, ErrorKind, PeerCall, PeerReply, PeerResponse, Request, Response, WireError,
};
use tokio::sync::mpsc;

struct Nothing;

impl Nothing {
    /// The answer to one client request.
    async fn answer(&self, _peer: &PeerIdentity, _request: Request) -> Response {
        Response::Error(WireError {
            kind: ErrorKind::Invalid,
            message: "no handler in this test".into(),
            node: String::new(),
        })
    }
}

#[async_trait::async_trait]
impl Handler for Nothing {
    async fn handle(&self, peer: &PeerIdentity, request: Request) -> ClientReply {
        ClientReply {
            ring_version: 1,
            response: self.answer(peer, request).await,
        }
    }

    async fn handle_peer(&self, _peer: &PeerIdentity, _call: PeerCall) -> PeerReply {
        PeerReply {
            ring_version: 1,
            feedback: None,
            response: PeerResponse::Error(WireError {
                kind: ErrorKind::Invalid,
                message: "no replica here".into(),
                node: "fake".into(),
            }),
        }
    }
}

struct Node {
    endpoint: Arc<Endpoint>,
    membership: Membership,
}

async fn start(
    certs: &std::path::Path,
    name: &str,
    addr: SocketAddr,
    seed: SocketAddr,
    generation: u64,
) -> Node {
    let creds = kv_tls::load(&TlsFiles::in_dir(certs, name)).unwrap();
    let (tx, rx) = mpsc::channel(256);
    let endpoint = Endpoint::bind(
        addr,
        &creds,
        TransportSettings::default(),
        Arc::new(Nothing),
        tx,
    )
    .unwrap();
    let addr = endpoint.local_addr().unwrap();
    let transport = QuicTransport::new(endpoint.clone(), rx);
    let me = NodeInfo {
        id: NodeId::new(name).unwrap(),
        client_addr: addr,
        zone: format!("z-{name}"),
        host: format!("h-{name}"),
        weight: 1,
        status: NodeStatus::Up,
    };
    let config = GossipSettings {
        cluster_id: "test".into(),
        gossip_addr: addr,
        seeds: vec![seed.to_string()],
        interval: Duration::from_millis(100),
        phi_threshold: 8.0,
        dead_node_grace: Duration::from_secs(3600),
        generation,
    };
    let membership = Membership::start(config, &me, &transport).await.unwrap();
    // The transport must outlive the membership's socket: the socket owns
    // what it needs, so dropping the wrapper here is fine.
    drop(transport);
    Node {
        endpoint,
        membership,
    }
}

async fn wait_for(node: &Node, what: &str, pred: impl Fn(&View) -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut rx = node.membership.subscribe();
    loop {
        if pred(&rx.borrow()) {
            return;
        }
        let left = deadline.saturating_duration_since(Instant::now());
        assert!(
            !left.is_zero(),
            "timed out waiting for: {what}; view: {:?}",
            rx.borrow()
        );
        let _ = tokio::time::timeout(left, rx.changed()).await;
    }
}

fn id(s: &str) -> NodeId {
    NodeId::new(s).unwrap()
}

fn free_port() -> SocketAddr {
    let s = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    s.local_addr().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nodes_meet_detect_death_and_replace_a_restarted_incarnation() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_test_writer()
        .try_init();
    let dir = tempfile::tempdir().unwrap();
    let names = ["node1", "node2", "node3"];
    kv_tls::init(dir.path(), &names.map(id)).unwrap();
    let addrs: Vec<SocketAddr> = names.iter().map(|_| free_port()).collect();
    let mut nodes = Vec::new();
    for (i, name) in names.iter().enumerate() {
        nodes.push(start(dir.path(), name, addrs[i], addrs[0], 1).await);
    }
    for node in &nodes {
        wait_for(node, "three alive members", |v| {
            v.members.len() == 3 && v.members.values().all(|m| m.alive)
        })
        .await;
    }
    let v = nodes[1].membership.view();
    let n3 = &v.members[&id("node3")];
    assert_eq!(n3.info.zone, "z-node3");
    assert_eq!(n3.info.client_addr, addrs[2]);

    // Stop node3: the others' failure detectors declare it dead.
    let Node {
        endpoint,
        membership,
    } = nodes.pop().unwrap();
    membership.shutdown().await;
    endpoint.shutdown(Duration::from_millis(100)).await;
    drop(endpoint);

    for node in &nodes {
        wait_for(node, "node3 dead", |v| {
            v.members.get(&id("node3")).is_some_and(|m| !m.alive)
        })
        .await;
    }

    // Restart it on the same address with a new generation: it is alive
    // again, and the view shows the new incarnation only.
    let node3 = start(dir.path(), "node3", addrs[2], addrs[0], 2).await;
    for node in &nodes {
        wait_for(node, "node3 back with generation 2", |v| {
            v.members
                .get(&id("node3"))
                .is_some_and(|m| m.alive && m.generation == 2)
        })
        .await;
    }
    wait_for(&node3, "node3 sees everyone", |v| {
        v.members.len() == 3 && v.members.values().all(|m| m.alive)
    })
    .await;
}
