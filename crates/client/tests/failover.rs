//! The client against fake nodes on loopback (real QUIC and mutual TLS, a
//! scripted handler): failover, error mapping, no repeated writes, local
//! reads through status.
#![allow(clippy::unwrap_used)]

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use kv_client::{Client, ClientSettings, Error};
use kv_router::{CandidateInputs, Ring, RingSettings};
use kv_tls::{PeerIdentity, TlsFiles};
use kv_transport::{Endpoint, Handler, TransportSettings};
use kv_types::{Member, NodeId, NodeStatus};
use kv_wire::{
    ClientReply, ErrorKind, GetReply, NodeReport, PeerCall, PeerReply, PeerResponse, Request,
    RequestBody, Response, RingMember, RingReport, StatusReport, WireError,
};

/// How long `node1` takes to answer a key from `lag` on.
const LAG: Duration = Duration::from_millis(1500);
use tokio::sync::mpsc;

/// A node that answers from a script: key `slow` sleeps 5 s, keys from
/// `lag` on sleep 1.5 s on `node1` only, key `down` is unavailable, other
/// keys read as `value-from-<node>`; a ring request answers a ring of
/// every fake node with two replicas per key.
struct Fake {
    name: String,
    /// Addresses of every fake node, for status reports.
    peers: Arc<std::sync::Mutex<Vec<(String, SocketAddr)>>>,
    /// Writes received by this node.
    writes: AtomicUsize,
}

impl Fake {
    /// The answer to one client request.
    async fn answer(&self, _peer: &PeerIdentity, request: Request) -> Response {
        let key = match &request.body {
            RequestBody::Get { key, .. }
            | RequestBody::Put { key, .. }
            | RequestBody::Delete { key, .. }
            | RequestBody::LocalGet { key } => key.clone(),
            _ => Vec::new(),
        };
        if matches!(
            request.body,
            RequestBody::Put { .. } | RequestBody::Delete { .. }
        ) {
            self.writes.fetch_add(1, Ordering::SeqCst);
        }
        if key == b"slow" {
            tokio::time::sleep(Duration::from_secs(5)).await;
        }
        if key.starts_with(b"lag") && self.name == "node1" {
            tokio::time::sleep(LAG).await;
        }
        if key == b"down" {
            return Response::Error(WireError {
                kind: ErrorKind::Unavailable,
                message: "only 1 of 3 replicas alive".into(),
                node: self.name.clone(),
            });
        }
        match request.body {
            RequestBody::Get { .. } => Response::Get(GetReply {
                values: vec![format!("value-from-{}", self.name).into_bytes()],
                deleted: false,
                context: vec![],
            }),
            RequestBody::Put { .. } | RequestBody::Delete { .. } => {
                Response::Written { context: vec![] }
            }
            RequestBody::LocalGet { .. } => Response::Object(None),
            RequestBody::Ring => Response::Ring(self.ring()),
            // A node of the build before `RingV2`: the client falls back
            // to `Ring`.
            RequestBody::RingV2 => Response::Error(WireError {
                kind: ErrorKind::Invalid,
                message: "unknown request".into(),
                node: self.name.clone(),
            }),
            RequestBody::Status => {
                let nodes = self
                    .peers
                    .lock()
                    .unwrap()
                    .iter()
                    .map(|(id, addr)| NodeReport {
                        id: id.clone(),
                        addr: addr.to_string(),
                        zone: "z1".into(),
                        host: "h1".into(),
                        status: "UP".into(),
                        alive: true,
                        ring_share: 0.5,
                        transfer: String::new(),
                        resp: String::new(),
                        admin: String::new(),
                    })
                    .collect();
                Response::Status(StatusReport {
                    node: self.name.clone(),
                    ring_version: 1,
                    partitions: 8,
                    replicas: 1,
                    nodes,
                    mode: "scoring".into(),
                })
            }
            _ => Response::Ack,
        }
    }
}

impl Fake {
    /// A ring of every fake node, two replicas per key (one for a single
    /// node), all alive.
    fn ring(&self) -> RingReport {
        let peers = self.peers.lock().unwrap().clone();
        let members: Vec<Member> = peers
            .iter()
            .enumerate()
            .map(|(i, (id, _))| Member {
                id: NodeId::new(id.clone()).unwrap(),
                zone: format!("z{i}"),
                host: format!("h{i}"),
                weight: 1,
                status: NodeStatus::Up,
            })
            .collect();
        let settings = RingSettings {
            partitions: 16,
            replicas: members.len().min(2),
            zone_redundancy: 1,
        };
        let ring = Ring::build(settings, &members).unwrap();
        RingReport {
            node: self.name.clone(),
            ring_version: ring.version(),
            placement: ring.to_bytes(),
            members: members
                .iter()
                .zip(&peers)
                .map(|(m, (_, addr))| RingMember {
                    id: m.id.to_string(),
                    addr: addr.to_string(),
                    zone: m.zone.clone(),
                    host: m.host.clone(),
                    status: "UP".into(),
                    alive: true,
                    suspect: false,
                    hints_pending: 0,
                    report: None,
                })
                .collect(),
            mode: "plain".into(),
        }
    }
}

#[async_trait::async_trait]
impl Handler for Fake {
    async fn handle(&self, peer: &PeerIdentity, request: Request) -> ClientReply {
        ClientReply {
            // The version of the ring it reports: a client that learned it
            // is up to date (no ring refresh on every answer).
            ring_version: self.ring().ring_version,
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

struct Cluster {
    certs: tempfile::TempDir,
    nodes: Vec<(Arc<Endpoint>, Arc<Fake>)>,
}

impl Cluster {
    fn start(names: &[&str]) -> Cluster {
        let certs = tempfile::tempdir().unwrap();
        let ids: Vec<NodeId> = names.iter().map(|n| NodeId::new(*n).unwrap()).collect();
        kv_tls::init(certs.path(), &ids).unwrap();
        let peers = Arc::new(std::sync::Mutex::new(Vec::new()));
        let mut nodes = Vec::new();
        for name in names {
            let creds = kv_tls::load(&TlsFiles::in_dir(certs.path(), name)).unwrap();
            let fake = Arc::new(Fake {
                name: (*name).into(),
                peers: peers.clone(),
                writes: AtomicUsize::new(0),
            });
            let (tx, _rx) = mpsc::channel(8);
            let ep = Endpoint::bind(
                "127.0.0.1:0".parse().unwrap(),
                &creds,
                TransportSettings::default(),
                fake.clone(),
                tx,
            )
            .unwrap();
            peers
                .lock()
                .unwrap()
                .push(((*name).to_string(), ep.local_addr().unwrap()));
            nodes.push((ep, fake));
        }
        Cluster { certs, nodes }
    }

    fn addr(&self, i: usize) -> String {
        self.nodes[i].0.local_addr().unwrap().to_string()
    }

    fn writes(&self) -> usize {
        self.nodes
            .iter()
            .map(|(_, f)| f.writes.load(Ordering::SeqCst))
            .sum()
    }

    async fn client(&self, endpoints: Vec<String>, timeout: Duration) -> Client {
        let mut config = ClientSettings::new(endpoints, self.certs.path());
        config.timeout = timeout;
        Client::connect(config).await.unwrap()
    }
}

/// A UDP port with nobody behind it.
fn dead() -> String {
    let s = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    s.local_addr().unwrap().to_string()
}

#[tokio::test]
async fn reads_and_writes_fail_over_from_a_dead_endpoint() {
    let cluster = Cluster::start(&["node1"]);
    let client = cluster
        .client(vec![dead(), cluster.addr(0)], Duration::from_secs(8))
        .await;
    // Whatever endpoint the client starts at, it ends at the live one.
    for _ in 0..3 {
        let reply = client.get(b"k", None).await.unwrap();
        assert_eq!(reply.values, vec![b"value-from-node1".to_vec()]);
    }
    client.put(b"k", b"v", &[], Some(1)).await.unwrap();
    assert_eq!(cluster.writes(), 1);
    client.close().await;
}

#[tokio::test]
async fn a_write_that_may_have_been_sent_is_never_repeated() {
    let cluster = Cluster::start(&["node1", "node2"]);
    let client = cluster
        .client(
            vec![cluster.addr(0), cluster.addr(1)],
            Duration::from_millis(500),
        )
        .await;
    let e = client.put(b"slow", b"v", &[], None).await.unwrap_err();
    assert!(matches!(e, Error::Indeterminate { .. }), "{e}");
    assert_eq!(e.exit_code(), 4);
    assert_eq!(
        cluster.writes(),
        1,
        "the write went to a second coordinator"
    );
}

#[tokio::test]
async fn node_errors_keep_the_reporting_node() {
    let cluster = Cluster::start(&["node1"]);
    let client = cluster
        .client(vec![cluster.addr(0)], Duration::from_secs(5))
        .await;
    let e = client.put(b"down", b"v", &[], None).await.unwrap_err();
    assert_eq!(
        e,
        Error::Unavailable {
            node: "node1".into(),
            message: "only 1 of 3 replicas alive".into()
        }
    );
    assert_eq!(e.exit_code(), 3);
}

#[tokio::test]
async fn local_reads_find_the_node_through_status() {
    let cluster = Cluster::start(&["node1", "node2"]);
    let client = cluster
        .client(vec![cluster.addr(0)], Duration::from_secs(5))
        .await;
    let status = client.status().await.unwrap();
    assert_eq!(status.nodes.len(), 2);
    let node2 = NodeId::new("node2").unwrap();
    assert_eq!(client.local_get(&node2, b"k").await.unwrap(), None);
    let stranger = NodeId::new("node9").unwrap();
    let e = client.local_get(&stranger, b"k").await.unwrap_err();
    assert_eq!(e.exit_code(), 2, "{e}");
}

#[tokio::test]
async fn a_certificate_from_another_cluster_is_refused_without_retry() {
    let cluster = Cluster::start(&["node1"]);
    let other = tempfile::tempdir().unwrap();
    kv_tls::init(other.path(), &[NodeId::new("node1").unwrap()]).unwrap();
    let mut config = ClientSettings::new(vec![cluster.addr(0)], other.path());
    config.timeout = Duration::from_secs(5);
    let client = Client::connect(config).await.unwrap();
    let e = client.get(b"k", None).await.unwrap_err();
    assert!(matches!(e, Error::Refused { .. }), "{e}");
    assert_eq!(e.exit_code(), 5);
}

/// `node`'s inputs in the newest decision the client logged.
fn candidate(client: &Client, node: &str) -> Option<CandidateInputs> {
    let records = client.take_decisions();
    let last = records.last()?;
    last.inputs
        .candidates
        .iter()
        .find(|c| c.id.as_str() == node)
        .cloned()
}

/// A key of the given prefix whose preference list starts with `first`.
fn key_led_by(client: &Client, prefix: &str, first: &str) -> Vec<u8> {
    (0..1000)
        .map(|i| format!("{prefix}-{i}").into_bytes())
        .find(|k| {
            client
                .preference_list(k)
                .is_some_and(|p| p.first().is_some_and(|n| n.as_str() == first))
        })
        .unwrap()
}

#[tokio::test]
async fn a_read_failed_over_still_hears_its_first_node_and_the_router_learns_its_latency() {
    let cluster = Cluster::start(&["node1", "node2"]);
    let mut config = ClientSettings::new(vec![cluster.addr(1)], cluster.certs.path());
    config.timeout = Duration::from_secs(8);
    // Preference-list order, every decision logged.
    config.router_mode = Some("plain".into());
    config.decision_log_rate = 1.0;
    let client = Client::connect(config).await.unwrap();
    // The first request has the client fetch the ring in the background.
    client.get(b"k", None).await.unwrap();
    let learned = tokio::time::timeout(Duration::from_secs(5), async {
        while client.preference_list(b"k").is_none() {
            client.get(b"k", None).await.unwrap();
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    assert!(learned.is_ok(), "the client never learned the ring");
    // node1 answers a few quick reads: a latency estimate of milliseconds.
    let quick = key_led_by(&client, "quick", "node1");
    for _ in 0..5 {
        client.get(&quick, None).await.unwrap();
    }
    // Reads that node2 leads: the decisions they log show node1 without
    // sending it reads.
    let probe = key_led_by(&client, "probe", "node2");
    client.get(&probe, None).await.unwrap();
    let before = candidate(&client, "node1").unwrap();
    assert!(before.latency_us.unwrap() < 100_000.0, "{before:?}");

    // node1 takes 1.5 s: the read fails over to node2 after half a second
    // and has its answer from there.
    let lagging = key_led_by(&client, "lag", "node1");
    let sent = std::time::Instant::now();
    let reply = client.get(&lagging, None).await.unwrap();
    assert_eq!(reply.values, vec![b"value-from-node2".to_vec()]);
    assert!(sent.elapsed() < LAG, "{:?}", sent.elapsed());

    // node1's request is still in flight: the router knows it is waiting.
    client.get(&probe, None).await.unwrap();
    let waiting = candidate(&client, "node1").unwrap();
    assert_eq!(waiting.in_flight, 1, "{waiting:?}");
    assert!(waiting.latency_us.unwrap() < 100_000.0, "{waiting:?}");
    // It was outrun by node2's answer: its age floors its latency at once.
    assert!(waiting.outrun && waiting.floored(), "{waiting:?}");

    // Then node1's late answer arrives, and its latency counts.
    let heard = tokio::time::timeout(Duration::from_secs(5), async {
        loop {
            client.get(&probe, None).await.unwrap();
            let now = candidate(&client, "node1").unwrap();
            if now.in_flight == 0 {
                return now;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await
    .expect("node1's late answer was never heard");
    assert!(heard.latency_samples > before.latency_samples, "{heard:?}");
    assert!(heard.latency_us.unwrap() > 100_000.0, "{heard:?}");
    assert!(!heard.outrun, "{heard:?}");
    client.close().await;
}
