//! Writes the seed corpus: a few valid inputs per target, made by the
//! real encoders, into `fuzz/corpus/<target>/seed-*`. Ignored by default;
//! run it after a format change with
//! `cargo test -p kv-fuzz-targets --test seeds -- --ignored`.
//! Every seed must also pass its target (checked here).

use std::path::PathBuf;

use kv_router::{Ring, RingSettings};
use kv_storage::Hint;
use kv_types::{Actor, Member, NodeId, NodeStatus, Object, Sibling, VersionVector, codec};
use kv_wire::frame::{self, FrameKind};
use kv_wire::{
    ClientReply, Feedback, GetReply, MemberLoad, PeerCall, PeerReply, PeerRequest, PeerResponse,
    Request, RequestBody, Response, RingMember, RingReport,
};

fn id(n: &str) -> NodeId {
    NodeId::new(n).expect("valid id")
}

fn object() -> Object {
    let a = Actor {
        node: id("node1"),
        incarnation: 7,
    };
    let b = Actor {
        node: id("node2"),
        incarnation: 9,
    };
    let v = |d: &[u8], t| Sibling {
        data: Some(d.to_vec()),
        written_at_ms: t,
    };
    let o = Object::new().update(&VersionVector::new(), &a, v(b"one", 1));
    let o = o.update(&VersionVector::new(), &b, v(b"two", 2));
    o.update(
        &o.join(),
        &a,
        Sibling {
            data: None,
            written_at_ms: 3,
        },
    )
    .sync(&Object::new().update(&VersionVector::new(), &b, v(b"three", 4)))
}

fn ring() -> Ring {
    let m = |n: &str, zone: &str, status| Member {
        id: id(n),
        zone: zone.into(),
        host: n.into(),
        weight: 1,
        status,
    };
    Ring::build(
        RingSettings {
            partitions: 16,
            replicas: 2,
            zone_redundancy: 2,
        },
        &[
            m("a", "z1", NodeStatus::Up),
            m("b", "z2", NodeStatus::Up),
            m("c", "z1", NodeStatus::Joining),
        ],
    )
    .expect("a valid ring")
}

fn ring_report() -> RingReport {
    let ring = ring();
    RingReport {
        node: "a".into(),
        ring_version: ring.version(),
        placement: ring.to_bytes(),
        members: vec![RingMember {
            id: "a".into(),
            addr: "127.0.0.1:7101".into(),
            zone: "z1".into(),
            host: "a".into(),
            status: "UP".into(),
            alive: true,
            suspect: false,
            hints_pending: 2,
            report: Some(MemberLoad {
                age_ms: 10,
                cpu: 0.5,
                queue: 1,
                backlog: 0,
                hit_ratio: 0.9,
                repair: false,
                hot_keys: vec![7, 8],
            }),
        }],
        mode: "scoring".into(),
    }
}

fn with(tag: u8, bytes: Vec<u8>) -> Vec<u8> {
    let mut out = vec![tag];
    out.extend(bytes);
    out
}

fn seeds() -> Vec<(&'static str, &'static str, Vec<u8>)> {
    let enc = |v: &dyn erased::Encode| v.encode();
    let request = |body| Request { id: 1, body };
    let context = object().join().to_context().expect("context");
    let get = request(RequestBody::Get {
        key: b"k".to_vec(),
        r: Some(2),
        hedged: false,
    });
    let put = request(RequestBody::Put {
        key: b"k".to_vec(),
        value: b"v".to_vec(),
        context: context.clone(),
        w: None,
    });
    let reply = |response| ClientReply {
        ring_version: 3,
        response,
    };
    let got = reply(Response::Get(GetReply {
        values: vec![b"v".to_vec()],
        deleted: false,
        context: context.clone(),
    }));
    let ring_reply = reply(Response::Ring(ring_report()));
    let call = |body| PeerCall {
        id: 1,
        ring_version: 3,
        body,
    };
    let replicate = call(PeerRequest::Replicate {
        key: b"k".to_vec(),
        object: object(),
    });
    let scan = call(PeerRequest::Scan {
        from_hash: 0,
        to_hash: u64::MAX,
        after: Some(b"k".to_vec()),
        limit: 100,
    });
    let peer_reply = PeerReply {
        ring_version: 3,
        feedback: Some(Feedback {
            queue: 2,
            service_us: 250.0,
        }),
        response: PeerResponse::Object(Some(object())),
    };
    let hint = Hint {
        owner: id("node3"),
        key: b"k".to_vec(),
        object: object(),
        created_at_ms: 1_700_000_000_000,
    };
    let (hint_key, hint_value) = hint.to_row().expect("hint row");
    let mut hint_row = vec![1, u8::try_from(hint_key.len()).expect("short key")];
    hint_row.extend(&hint_key);
    hint_row.extend(&hint_value);
    let record = kv_storage::record::encode(&object()).expect("record");
    let placement = ring().to_bytes();
    vec![
        (
            "frame",
            "request",
            frame::encode(FrameKind::Request, &get).expect("frame"),
        ),
        (
            "frame",
            "reply",
            frame::encode(FrameKind::Response, &got).expect("frame"),
        ),
        (
            "frame",
            "peer-call",
            frame::encode(FrameKind::PeerRequest, &replicate).expect("frame"),
        ),
        (
            "frame",
            "peer-reply",
            frame::encode(FrameKind::PeerResponse, &peer_reply).expect("frame"),
        ),
        ("client", "get", with(0, enc(&get))),
        ("client", "put", with(0, enc(&put))),
        ("client", "reply-get", with(1, enc(&got))),
        ("client", "reply-ring", with(1, enc(&ring_reply))),
        ("peer", "replicate", with(0, enc(&replicate))),
        ("peer", "scan", with(0, enc(&scan))),
        ("peer", "reply", with(1, enc(&peer_reply))),
        ("ring_report", "report", enc(&ring_report())),
        (
            "resp",
            "array",
            b"\x00*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n*2\r\n$3\r\nGET\r\n$1\r\nk\r\n".to_vec(),
        ),
        (
            "resp",
            "inline",
            b"\x85set k \"a b\\x41\"\r\nmget 'x' y\nPING\r\n".to_vec(),
        ),
        (
            "resp",
            "hello",
            b"\x03*4\r\n$5\r\nHELLO\r\n$1\r\n2\r\n$4\r\nAUTH\r\n$2\r\npw\r\n".to_vec(),
        ),
        ("record", "object", record),
        (
            "record",
            "payload",
            with(0, codec::encode(&object()).expect("object")),
        ),
        ("hint", "row", hint_row),
        ("context", "context", with(0, context)),
        (
            "context",
            "object",
            with(1, codec::encode(&object()).expect("object")),
        ),
        ("ring", "ring", placement.clone()),
        ("ring", "body", with(0, placement[10..].to_vec())),
        (
            "load_report",
            "report",
            b"12 0.250 7 3 1\n0.875\n0000000000000abc,0000000000000def\nnode3:12,node4:1".to_vec(),
        ),
        ("load_report", "bare", b"1 0.5 0 0 0".to_vec()),
    ]
}

/// `Serialize` without its generic, so the list above can hold any message.
mod erased {
    pub trait Encode {
        fn encode(&self) -> Vec<u8>;
    }
    impl<T: serde::Serialize> Encode for T {
        fn encode(&self) -> Vec<u8> {
            kv_types::codec::encode(self).expect("encodes")
        }
    }
}

#[test]
#[ignore = "writes fuzz/corpus; run after a format change"]
fn write_seeds() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus");
    for (target, name, data) in seeds() {
        let dir = root.join(target);
        std::fs::create_dir_all(&dir).expect("corpus directory");
        std::fs::write(dir.join(format!("seed-{name}")), &data).expect("write seed");
    }
}

#[test]
fn seeds_pass_their_targets() {
    for (target, name, data) in seeds() {
        let (_, run) = kv_fuzz_targets::TARGETS
            .iter()
            .find(|(t, _)| *t == target)
            .unwrap_or_else(|| panic!("no target {target}"));
        eprintln!("{target}/{name}");
        run(&data);
    }
}
