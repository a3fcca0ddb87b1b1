//! The built kvctl binary against four fake nodes (real QUIC and mutual TLS,
//! scripted answers): every command's output ends with a newline, node ids
//! are listed in natural order (node2 before node10), and the progress of
//! `drain` and `repair` is one line per step when standard error is not a
//! terminal (here it is a pipe).
#![allow(clippy::unwrap_used)]

use std::net::SocketAddr;
use std::path::Path;
use std::process::Output;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use kv_tls::{PeerIdentity, TlsFiles};
use kv_transport::{Endpoint, Handler, TransportSettings};
use kv_types::NodeId;
use kv_wire::{
    ClientReply, ErrorKind, ExplainReplica, ExplainReport, GetReply, NodeReport, PeerCall,
    PeerReply, PeerResponse, PlanReport, PlannedMove, RepairReport, Request, RequestBody, Response,
    StatusReport, WireError,
};

/// The fake cluster's nodes, in the order its status lists them (not
/// natural order, on purpose).
const NODES: [&str; 4] = ["node10", "node1", "node6", "node2"];

/// Partitions of every fake repair pass.
const REPAIR_PARTITIONS: u64 = 4;

/// What the fake nodes share.
#[derive(Default)]
struct Cluster {
    /// Each node's endpoint address, as status reports it.
    addrs: Mutex<Vec<(String, SocketAddr)>>,
    /// Set by a (real) drain of node6: status then shows it DRAINING,
    /// then LEFT.
    draining: AtomicBool,
    /// Status answers given since the drain began.
    status_since_drain: AtomicU64,
    /// Repair status answers given, across nodes: each one moves every
    /// pass one partition on.
    repair_polls: AtomicU64,
}

/// One fake node: answers as `me`.
struct Fake {
    me: String,
    cluster: Arc<Cluster>,
}

impl Fake {
    fn status(&self) -> StatusReport {
        let left = if self.cluster.draining.load(Ordering::SeqCst) {
            self.cluster
                .status_since_drain
                .fetch_add(1, Ordering::SeqCst)
                >= 1
        } else {
            false
        };
        let draining = self.cluster.draining.load(Ordering::SeqCst) && !left;
        let addrs = self.cluster.addrs.lock().unwrap().clone();
        let nodes = NODES
            .iter()
            .map(|id| {
                let addr = addrs
                    .iter()
                    .find(|(name, _)| name == id)
                    .map(|(_, a)| a.to_string())
                    .unwrap();
                let (status, transfer) = match *id {
                    "node6" if left => ("LEFT", ""),
                    "node6" if draining => ("DRAINING", ""),
                    "node2" if draining => ("UP", "1/2"),
                    _ => ("UP", ""),
                };
                NodeReport {
                    id: (*id).into(),
                    addr,
                    zone: "zone-a".into(),
                    host: format!("host-{}", &id[4..]),
                    status: status.into(),
                    alive: true,
                    ring_share: 0.25,
                    transfer: transfer.into(),
                    resp: String::new(),
                    admin: String::new(),
                }
            })
            .collect();
        StatusReport {
            node: self.me.clone(),
            ring_version: 9,
            partitions: 8,
            replicas: 3,
            nodes,
            mode: "scoring".into(),
        }
    }

    fn repair(&self, polls: u64) -> RepairReport {
        RepairReport {
            node: self.me.clone(),
            running: polls < REPAIR_PARTITIONS,
            partitions_done: polls.min(REPAIR_PARTITIONS),
            partitions_total: REPAIR_PARTITIONS,
            keys_repaired: 0,
            segments_differing: 0,
            failures: 0,
        }
    }
}

/// A plan whose moves and sources come in non-natural order.
fn plan(change: &str, started: bool) -> PlanReport {
    PlanReport {
        change: change.into(),
        started,
        partitions: 3,
        moves: vec![
            PlannedMove {
                to: "node10".into(),
                from: vec!["node6".into()],
                partitions: 1,
                keys: 10,
                bytes: 100,
            },
            PlannedMove {
                to: "node2".into(),
                from: vec!["node6".into(), "node10".into(), "node4".into()],
                partitions: 2,
                keys: 20,
                bytes: 200,
            },
        ],
    }
}

impl Fake {
    /// The answer to one client request.
    async fn answer(&self, _peer: &PeerIdentity, request: Request) -> Response {
        match request.body {
            RequestBody::Status => Response::Status(self.status()),
            RequestBody::Get { .. } => Response::Get(GetReply {
                values: vec![b"hello".to_vec()],
                deleted: false,
                context: Vec::new(),
            }),
            RequestBody::Put { .. } | RequestBody::Delete { .. } => Response::Written {
                context: Vec::new(),
            },
            RequestBody::LocalGet { .. } => Response::Object(None),
            // An older node: the client routes without a ring, and status
            // shows no certificates.
            RequestBody::Ring | RequestBody::RingV2 | RequestBody::Certs => {
                Response::Error(kv_wire::WireError {
                    kind: ErrorKind::Invalid,
                    message: "unknown request".into(),
                    node: self.me.clone(),
                })
            }
            RequestBody::Explain { .. } => Response::Explain(ExplainReport {
                node: self.me.clone(),
                hash: 1,
                partition: 0,
                ring_version: 9,
                replicas: vec![ExplainReplica {
                    id: "node1".into(),
                    addr: "127.0.0.1:1".into(),
                    zone: "zone-a".into(),
                    status: "UP".into(),
                    alive: true,
                    score: 1.0,
                    latency_ms: None,
                    excluded: None,
                }],
                read_order: vec!["node1".into()],
                mode: "scoring".into(),
                op: "get".into(),
                decision: String::new(),
            }),
            RequestBody::Drain { dry_run } => {
                if !dry_run {
                    self.cluster.draining.store(true, Ordering::SeqCst);
                }
                Response::Plan(plan(&format!("drain {}", self.me), !dry_run))
            }
            RequestBody::PlanJoin { .. } => Response::Plan(plan("join zone-c weight 1", false)),
            RequestBody::Repair => Response::Repair(self.repair(0)),
            RequestBody::RepairStatus => {
                let polls = self.cluster.repair_polls.fetch_add(1, Ordering::SeqCst) + 1;
                Response::Repair(self.repair(polls))
            }
            RequestBody::Remove { .. } | RequestBody::RouterMode { .. } => Response::Ack,
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
    /// The fake nodes' endpoints, dropped before their runtime.
    _endpoints: Vec<Arc<Endpoint>>,
    _rt: tokio::runtime::Runtime,
    certs: tempfile::TempDir,
    /// kvctl's cache directory (`XDG_CACHE_HOME`): its routing cache goes
    /// here, never into the user's `~/.cache/kvctl/`.
    cache: tempfile::TempDir,
    /// node1's address: kvctl's one endpoint.
    entry: SocketAddr,
}

fn setup() -> Setup {
    let certs = tempfile::tempdir().unwrap();
    let ids: Vec<NodeId> = NODES.iter().map(|n| NodeId::new(*n).unwrap()).collect();
    kv_tls::init(certs.path(), &ids).unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let cluster = Arc::new(Cluster::default());
    let mut endpoints = Vec::new();
    for id in NODES {
        let creds = kv_tls::load(&TlsFiles::in_dir(certs.path(), id)).unwrap();
        let handler = Arc::new(Fake {
            me: id.into(),
            cluster: cluster.clone(),
        });
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
        cluster.addrs.lock().unwrap().push((id.into(), addr));
        endpoints.push(ep);
    }
    let entry = cluster
        .addrs
        .lock()
        .unwrap()
        .iter()
        .find(|(id, _)| id == "node1")
        .unwrap()
        .1;
    Setup {
        cache: tempfile::tempdir().unwrap(),
        _endpoints: endpoints,
        _rt: rt,
        certs,
        entry,
    }
}

impl Setup {
    fn kvctl(&self, args: &[&str]) -> Output {
        std::process::Command::new(env!("CARGO_BIN_EXE_kvctl"))
            .args(args)
            .env("KV_ENDPOINTS", self.entry.to_string())
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

    /// Runs kvctl, expects exit 0, returns (stdout, stderr).
    fn ok(&self, args: &[&str]) -> (String, String) {
        let o = self.kvctl(args);
        let (out, err) = (text(&o.stdout), text(&o.stderr));
        assert_eq!(o.status.code(), Some(0), "kvctl {args:?}: {err}");
        (out, err)
    }
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The plan as `drain --dry-run` and `plan join` print it: moves and their
/// sources in natural order, ending with a newline.
const PLAN_ROWS: &str = "\
TO             PARTITIONS       KEYS        BYTES  FROM
node2                   2         20          200  node4,node6,node10
node10                  1         10          100  node6
";

#[test]
fn every_command_ends_with_a_newline() {
    let s = setup();
    let commands: &[&[&str]] = &[
        &["get", "k"],
        &["put", "k", "v"],
        &["delete", "k"],
        &["status"],
        &["explain", "k"],
        &["drain", "node6", "--dry-run"],
        &["plan", "join", "--zone", "zone-c"],
        &["remove", "node6"],
        &["repair", "node2"],
    ];
    for args in commands {
        for json in [false, true] {
            let mut args = args.to_vec();
            if json {
                args.insert(0, "--json");
            }
            let (out, err) = s.ok(&args);
            assert!(out.ends_with('\n'), "kvctl {args:?} printed {out:?}");
            assert!(
                err.is_empty() || err.ends_with('\n'),
                "kvctl {args:?} wrote {err:?} on stderr"
            );
        }
    }
}

#[test]
fn plans_end_with_a_newline_in_natural_order() {
    let s = setup();
    let (out, _) = s.ok(&["drain", "node6", "--dry-run"]);
    assert_eq!(
        out,
        format!(
            "drain node6: 3 partitions change replicas (plan only, nothing moved)\n{PLAN_ROWS}"
        )
    );
    let (out, _) = s.ok(&["plan", "join", "--zone", "zone-c"]);
    assert_eq!(
        out,
        format!(
            "join zone-c weight 1: 3 partitions change replicas (plan only, nothing moved)\n{PLAN_ROWS}"
        )
    );
}

#[test]
fn a_drain_prints_its_plan_then_a_line_per_step_then_left() {
    let s = setup();
    let (out, err) = s.ok(&["drain", "node6"]);
    assert_eq!(
        out,
        format!(
            "drain node6: 3 partitions change replicas (started)\n{PLAN_ROWS}\
             node6 has LEFT: every partition moved; it can be stopped\n"
        )
    );
    // Off a terminal, progress is plain lines on standard error: no bar
    // escapes, one line per step.
    assert!(!err.contains('\r') && !err.contains('\u{1b}'), "{err:?}");
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(
        lines,
        [
            "1/2 partitions pulled  node6 is DRAINING",
            "1/1 partitions pulled  node6 is LEFT"
        ],
        "{err}"
    );
}

#[test]
fn repair_prints_one_line_per_node_in_natural_order() {
    let s = setup();
    let (out, err) = s.ok(&["repair"]);
    assert_eq!(
        out,
        "node1: 4 partitions compared, 0 keys repaired since start\n\
         node2: 4 partitions compared, 0 keys repaired since start\n\
         node6: 4 partitions compared, 0 keys repaired since start\n\
         node10: 4 partitions compared, 0 keys repaired since start\n"
    );
    assert!(!err.contains('\r') && !err.contains('\u{1b}'), "{err:?}");
    for line in err.lines() {
        assert!(
            line.starts_with("node") && line.contains(" partitions  "),
            "{err}"
        );
    }
    assert!(
        err.lines().any(|l| l.starts_with("node10: 0/4 partitions")),
        "{err}"
    );
}

#[test]
fn status_lists_node10_after_node2() {
    let s = setup();
    let (out, _) = s.ok(&["status"]);
    let ids: Vec<&str> = out
        .lines()
        .skip(2)
        .map(|l| l.split(' ').next().unwrap())
        .collect();
    assert_eq!(ids, ["node1", "node2", "node6", "node10"], "{out}");
    let (out, _) = s.ok(&["--json", "status"]);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let ids: Vec<&str> = v["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["node1", "node2", "node6", "node10"]);
}

#[test]
fn a_left_node_is_no_member_of_the_table_and_removing_it_is_done_already() {
    let s = setup();
    s.ok(&["drain", "node6"]);
    // node6 is LEFT now: named apart, not a row.
    let (out, _) = s.ok(&["status"]);
    let ids: Vec<&str> = out
        .lines()
        .skip(2)
        .map(|l| l.split(' ').next().unwrap())
        .collect();
    assert_eq!(ids, ["node1", "node2", "node10", "left"], "{out}");
    assert!(
        out.ends_with("left the ring (not members; kvctl status --all lists them): node6\n"),
        "{out}"
    );
    let (out, _) = s.ok(&["status", "--all"]);
    assert!(
        out.lines()
            .any(|l| l.starts_with("node6 ") && l.contains(" LEFT ")),
        "{out}"
    );
    // The JSON lists every node with its status, as before.
    let (out, _) = s.ok(&["--json", "status"]);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let node6 = v["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["id"] == "node6")
        .unwrap()
        .clone();
    assert_eq!(node6["status"], "LEFT", "{out}");

    // Removing a node that has LEFT: nothing to do, exit 0, and it says so.
    let (out, _) = s.ok(&["remove", "node6"]);
    assert_eq!(
        out,
        "node6 has already LEFT the ring (drained or removed): nothing to remove\n"
    );
    let (out, _) = s.ok(&["--json", "remove", "node6"]);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        v,
        serde_json::json!({"removed": "node6", "already_left": true})
    );
}
