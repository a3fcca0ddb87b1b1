//! The built kvctl binary against one fake node (real QUIC and mutual TLS,
//! scripted answers): outputs, JSON shapes and exit codes of get, put,
//! delete, status, explain and local reads.
#![allow(clippy::unwrap_used)]

use std::net::SocketAddr;
use std::path::Path;
use std::process::Output;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kv_tls::{PeerIdentity, TlsFiles};
use kv_transport::{Endpoint, Handler, TransportSettings};
use kv_types::{Actor, NodeId, Object, Sibling, VersionVector};
use kv_wire::{
    ClientReply, ErrorKind, ExplainReplica, ExplainReport, GetReply, NodeReport, PeerCall,
    PeerReply, PeerResponse, Request, RequestBody, Response, StatusReport, WireError,
};
use serde_json::{Value, json};

fn context(counter: u64) -> Vec<u8> {
    let actor = Actor {
        node: NodeId::new("node1").unwrap(),
        incarnation: 0xab,
    };
    VersionVector::from_pairs([(actor, counter)])
        .to_context()
        .unwrap()
}

/// Answers by key: `twins` has two siblings, `gone` is deleted, `down` is
/// unavailable, `full` meets a storage failure, `stall:*` freezes (see
/// [`STALL_FROM`]); writes are recorded.
struct Fake {
    addr: Mutex<Option<SocketAddr>>,
    writes: Mutex<Vec<RequestBody>>,
    /// When the first `stall:*` read arrived.
    first_stall_read: Mutex<Option<tokio::time::Instant>>,
}

/// `stall:*` reads arriving from this long after the first one until
/// [`STALL_UNTIL`] after it are all answered at `STALL_UNTIL`: the node
/// froze for that window (a GC pause, a SIGSTOP).
const STALL_FROM: Duration = Duration::from_millis(1000);
/// The end of the freeze, from the first `stall:*` read.
const STALL_UNTIL: Duration = Duration::from_millis(1600);

impl Fake {
    /// The answer to one client request.
    async fn answer(&self, _peer: &PeerIdentity, request: Request) -> Response {
        match request.body {
            // An older node: the client routes without a ring, and status
            // shows no certificates.
            RequestBody::Ring | RequestBody::RingV2 | RequestBody::Certs => {
                Response::Error(WireError {
                    kind: ErrorKind::Invalid,
                    message: "unknown request".into(),
                    node: "node1".into(),
                })
            }
            RequestBody::Get { key, .. } if key.starts_with(b"stall:") => {
                let now = tokio::time::Instant::now();
                let first = *self.first_stall_read.lock().unwrap().get_or_insert(now);
                if now >= first + STALL_FROM && now < first + STALL_UNTIL {
                    tokio::time::sleep_until(first + STALL_UNTIL).await;
                }
                Response::Get(GetReply {
                    values: vec![b"v".to_vec()],
                    deleted: false,
                    context: context(1),
                })
            }
            RequestBody::Get { key, .. } => match key.as_slice() {
                b"twins" => Response::Get(GetReply {
                    values: vec![b"a".to_vec(), b"b".to_vec()],
                    deleted: false,
                    context: context(2),
                }),
                b"gone" => Response::Get(GetReply {
                    values: vec![],
                    deleted: true,
                    context: context(3),
                }),
                _ => Response::Get(GetReply {
                    values: vec![b"hello".to_vec()],
                    deleted: false,
                    context: context(1),
                }),
            },
            body @ (RequestBody::Put { .. } | RequestBody::Delete { .. }) => {
                let down = matches!(&body, RequestBody::Put { key, .. } if key == b"down");
                let full = matches!(&body, RequestBody::Put { key, .. } if key == b"full");
                self.writes.lock().unwrap().push(body);
                if full {
                    return Response::Error(WireError {
                        kind: ErrorKind::Storage,
                        message: "disk full".into(),
                        node: "node3".into(),
                    });
                }
                if down {
                    return Response::Error(WireError {
                        kind: ErrorKind::Unavailable,
                        message: "only 1 of 3 replicas alive".into(),
                        node: "node1".into(),
                    });
                }
                Response::Written {
                    context: context(4),
                }
            }
            RequestBody::LocalGet { key } => {
                if key == b"nothing" {
                    return Response::Object(None);
                }
                let actor = Actor {
                    node: NodeId::new("node1").unwrap(),
                    incarnation: 0xab,
                };
                let object = Object::new().update(
                    &VersionVector::new(),
                    &actor,
                    Sibling {
                        data: Some(b"v".to_vec()),
                        written_at_ms: 5,
                    },
                );
                Response::Object(Some(object))
            }
            RequestBody::Status => Response::Status(StatusReport {
                node: "node1".into(),
                ring_version: 9,
                partitions: 8,
                replicas: 1,
                mode: "plain".into(),
                nodes: vec![NodeReport {
                    id: "node1".into(),
                    addr: self.addr.lock().unwrap().unwrap().to_string(),
                    zone: "z1".into(),
                    host: "h1".into(),
                    status: "UP".into(),
                    alive: true,
                    ring_share: 1.0,
                    transfer: String::new(),
                    resp: "127.0.0.1:6381".into(),
                    admin: "127.0.0.1:9191".into(),
                }],
            }),
            RequestBody::Explain { .. } => Response::Explain(ExplainReport {
                node: "node1".into(),
                hash: 0xdead_beef,
                partition: 3,
                ring_version: 9,
                replicas: vec![ExplainReplica {
                    id: "node1".into(),
                    addr: "127.0.0.1:1".into(),
                    zone: "z1".into(),
                    status: "UP".into(),
                    alive: true,
                    score: 0.9,
                    latency_ms: Some(0.5),
                    excluded: None,
                }],
                read_order: vec!["node1".into()],
                mode: "scoring".into(),
                op: "get".into(),
                decision: String::new(),
            }),
            RequestBody::Repair
            | RequestBody::RepairStatus
            | RequestBody::Drain { .. }
            | RequestBody::PlanJoin { .. }
            | RequestBody::Remove { .. }
            | RequestBody::RouterMode { .. } => Response::Ack,
            RequestBody::Decisions { .. } => Response::Decisions(Vec::new()),
        }
    }
}

#[async_trait::async_trait]
impl Handler for Fake {
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

struct Setup {
    /// The fake node's endpoint, dropped before its runtime.
    _endpoint: Arc<Endpoint>,
    _rt: tokio::runtime::Runtime,
    certs: tempfile::TempDir,
    /// kvctl's cache directory (`XDG_CACHE_HOME`): its routing cache goes
    /// here, never into the user's `~/.cache/kvctl/`.
    cache: tempfile::TempDir,
    addr: SocketAddr,
    fake: Arc<Fake>,
}

fn setup() -> Setup {
    let certs = tempfile::tempdir().unwrap();
    kv_tls::init(certs.path(), &[NodeId::new("node1").unwrap()]).unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let fake = Arc::new(Fake {
        addr: Mutex::new(None),
        writes: Mutex::new(Vec::new()),
        first_stall_read: Mutex::new(None),
    });
    let creds = kv_tls::load(&TlsFiles::in_dir(certs.path(), "node1")).unwrap();
    let handler = fake.clone();
    let ep = rt.block_on(async move {
        let (tx, _rx) = tokio::sync::mpsc::channel(8);
        Endpoint::bind(
            "127.0.0.1:0".parse().unwrap(),
            &creds,
            TransportSettings::default(),
            handler,
            tx,
        )
        .unwrap()
    });
    let addr = ep.local_addr().unwrap();
    *fake.addr.lock().unwrap() = Some(addr);
    Setup {
        cache: tempfile::tempdir().unwrap(),
        _endpoint: ep,
        _rt: rt,
        certs,
        addr,
        fake,
    }
}

impl Setup {
    fn kvctl(&self, args: &[&str]) -> Output {
        std::process::Command::new(env!("CARGO_BIN_EXE_kvctl"))
            .args(args)
            .env("KV_ENDPOINTS", self.addr.to_string())
            .env("KV_CERTS", self.certs.path())
            .env_remove("KV_IDENTITY")
            // Only these flags and files decide: no inherited routing mode
            // or connect timeout, no cache outside the test's own directory.
            .env_remove("KV_ROUTER_MODE")
            .env_remove("KV_CONNECT_TIMEOUT")
            .env("XDG_CACHE_HOME", self.cache.path())
            .current_dir(Path::new("/"))
            .output()
            .unwrap()
    }
}

fn json_of(o: &Output) -> Value {
    serde_json::from_slice(&o.stdout).unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn kvctl_against_a_node() {
    let s = setup();

    let o = s.kvctl(&["get", "k"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert_eq!(text(&o.stdout), "hello\n");

    let o = s.kvctl(&["get", "k", "--json"]);
    let ctx1 = kv_client::encode_context(&context(1));
    assert_eq!(
        json_of(&o),
        json!({"key": "k", "values": ["aGVsbG8="], "deleted": false, "context": ctx1})
    );

    let o = s.kvctl(&["get", "twins"]);
    assert_eq!(o.status.code(), Some(0));
    assert_eq!(text(&o.stdout), "a\nb\n");
    let ctx2 = kv_client::encode_context(&context(2));
    assert_eq!(
        text(&o.stderr).trim_end(),
        format!("2 siblings; resolve with: kvctl put twins VALUE --context {ctx2}")
    );

    let o = s.kvctl(&["get", "gone"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(o.stdout.is_empty());
    assert_eq!(text(&o.stderr).trim_end(), "not found");
    let o = s.kvctl(&["--json", "get", "gone"]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(json_of(&o)["deleted"], true);

    // A put carries the context it was given, decoded.
    let o = s.kvctl(&["put", "twins", "c", "--context", &ctx2, "--w", "1"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert_eq!(text(&o.stdout), "OK\n");
    let o = s.kvctl(&["put", "k", "v", "--json"]);
    assert_eq!(
        json_of(&o),
        json!({"key": "k", "context": kv_client::encode_context(&context(4))})
    );
    // A delete without a context deletes what a read saw.
    let o = s.kvctl(&["delete", "twins"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    {
        let writes = s.fake.writes.lock().unwrap();
        assert_eq!(
            writes[0],
            RequestBody::Put {
                key: b"twins".to_vec(),
                value: b"c".to_vec(),
                context: context(2),
                w: Some(1)
            }
        );
        assert_eq!(
            writes[2],
            RequestBody::Delete {
                key: b"twins".to_vec(),
                context: context(2),
                w: None
            }
        );
    }

    let o = s.kvctl(&["put", "down", "v"]);
    assert_eq!(o.status.code(), Some(3));
    let err = text(&o.stderr);
    assert!(
        err.starts_with("kvctl: unavailable: node1: only 1 of 3 replicas alive;"),
        "{err}"
    );

    // A storage failure has an exit code of its own, and says nothing was
    // stored.
    let o = s.kvctl(&["put", "full", "v"]);
    assert_eq!(o.status.code(), Some(7));
    let err = text(&o.stderr);
    assert!(
        err.starts_with("kvctl: storage failure: node3: disk full; nothing was stored"),
        "{err}"
    );

    let o = s.kvctl(&["status", "--json"]);
    assert_eq!(o.status.code(), Some(0));
    let v = json_of(&o);
    assert_eq!(v["ring_version"], 9);
    assert_eq!(v["nodes"][0]["id"], "node1");
    assert_eq!(v["nodes"][0]["ring_share"], 1.0);
    assert_eq!(v["nodes"][0]["resp"], "127.0.0.1:6381");
    assert_eq!(v["nodes"][0]["admin"], "127.0.0.1:9191");
    // A node that does not answer `Certs` (an older build): unknown.
    assert_eq!(v["nodes"][0]["cert_not_after"], serde_json::Value::Null);
    assert_eq!(v["nodes"][0]["trusted_cas"], serde_json::json!([]));
    let o = s.kvctl(&["status"]);
    assert!(text(&o.stdout).contains("100.0%"), "{}", text(&o.stdout));
    assert!(
        text(&o.stdout).contains("127.0.0.1:6381"),
        "{}",
        text(&o.stdout)
    );

    let o = s.kvctl(&["explain", "k", "--json"]);
    assert_eq!(json_of(&o)["hash_hex"], "00000000deadbeef");
    let o = s.kvctl(&["explain", "k"]);
    assert!(text(&o.stdout).contains("read order: node1"));

    let o = s.kvctl(&["get", "--node", "node1", "--local", "k"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    assert_eq!(text(&o.stdout), "node1#ab:1  v\n");
    let o = s.kvctl(&["get", "--node", "node1", "--local", "nothing"]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(text(&o.stderr).trim_end(), "not found on node1");

    // The admin certificate works too; an unknown identity is a usage error.
    assert_eq!(
        s.kvctl(&["--identity", "admin", "get", "k"]).status.code(),
        Some(0)
    );
    assert_eq!(
        s.kvctl(&["--identity", "nobody", "get", "k"]).status.code(),
        Some(2)
    );
}

/// Open loop measures a freeze as every request scheduled during it saw
/// it; closed loop with one client hides it behind one slow sample
/// (coordinated omission).
#[test]
fn open_loop_counts_every_request_a_freeze_delays() {
    let bench = |s: &Setup, extra: &[&str]| {
        let mut args = vec![
            "--json",
            "bench",
            "--duration",
            "3",
            "--mix",
            "get:100",
            "--prefix",
            "stall:",
            "--keys",
            "10",
        ];
        args.extend_from_slice(extra);
        let o = s.kvctl(&args);
        assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
        json_of(&o)
    };
    // 200 requests a second: the 0.6 s freeze delays about 120 of them,
    // from 0 to 600 ms; more than 1% of 600, so the p99 shows it.
    let open = bench(&setup(), &["--rate", "200"]);
    assert_eq!(open["loop"], "open", "{open}");
    let offered = open["offered_ops_per_s"].as_f64().unwrap();
    assert!((offered - 200.0).abs() < 5.0, "{open}");
    // Every offered request completed and counts.
    assert_eq!(open["ops"]["all"]["ops"], 600, "{open}");
    assert!(open["p99_ms"].as_f64().unwrap() >= 400.0, "{open}");
    assert!(open["max_ms"].as_f64().unwrap() >= 550.0, "{open}");
    assert!(open["send_lag"]["p50_ms"].as_f64().is_some(), "{open}");

    // One closed-loop client waits out the freeze once: one slow sample
    // among thousands, and the p99 does not see it.
    let closed = bench(&setup(), &["--clients", "1"]);
    assert_eq!(closed["loop"], "closed", "{closed}");
    assert!(closed["max_ms"].as_f64().unwrap() >= 550.0, "{closed}");
    assert!(closed["p99_ms"].as_f64().unwrap() < 100.0, "{closed}");
}
