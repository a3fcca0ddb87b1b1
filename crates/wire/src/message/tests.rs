//! Round trips of every message type through frames, and validation.

use proptest::prelude::*;

use kv_types::{Actor, NodeId, Object, Sibling, VersionVector};

use super::*;
use crate::frame::{self, FrameKind};

fn object(values: Vec<Option<Vec<u8>>>) -> Object {
    let actor = Actor {
        node: NodeId::new("node1").unwrap(),
        incarnation: 42,
    };
    values.into_iter().fold(Object::new(), |o, data| {
        o.update(
            &VersionVector::new(),
            &actor,
            Sibling {
                data,
                written_at_ms: 5,
            },
        )
    })
}

fn key() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(any::<u8>(), 1..64)
}

fn bytes() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(any::<u8>(), 0..64)
}

fn body() -> impl Strategy<Value = RequestBody> {
    prop_oneof![
        (key(), any::<Option<u8>>(), any::<bool>()).prop_map(|(key, r, hedged)| RequestBody::Get {
            key,
            r,
            hedged
        }),
        (key(), bytes(), bytes(), any::<Option<u8>>()).prop_map(|(key, value, context, w)| {
            RequestBody::Put {
                key,
                value,
                context,
                w,
            }
        }),
        (key(), bytes(), any::<Option<u8>>()).prop_map(|(key, context, w)| RequestBody::Delete {
            key,
            context,
            w
        }),
        key().prop_map(|key| RequestBody::LocalGet { key }),
        Just(RequestBody::Status),
        Just(RequestBody::Ring),
        Just(RequestBody::RingV2),
        Just(RequestBody::Certs),
        Just(RequestBody::Repair),
        Just(RequestBody::RepairStatus),
        any::<bool>().prop_map(|dry_run| RequestBody::Drain { dry_run }),
        Just(RequestBody::Remove {
            node: "node4".into()
        }),
        (1u32..1000).prop_map(|weight| RequestBody::PlanJoin {
            zone: "zone-b".into(),
            weight
        }),
        (key(), any::<bool>()).prop_map(|(key, put)| RequestBody::Explain {
            key,
            op: if put { Op::Put } else { Op::Get }
        }),
        (prop::option::of(key()), 1u32..1000)
            .prop_map(|(key, last)| RequestBody::Decisions { key, last }),
        Just(RequestBody::RouterMode { mode: "p2c".into() }),
    ]
}

fn peer_body() -> impl Strategy<Value = PeerRequest> {
    prop_oneof![
        (key(), 1u32..100).prop_map(|(after, limit)| PeerRequest::Scan {
            from_hash: 0,
            to_hash: u64::MAX,
            after: Some(after),
            limit
        }),
        Just(PeerRequest::TransferStatus),
        (key(), any::<bool>()).prop_map(|(key, delete)| PeerRequest::ReplaceIf {
            key,
            expected: object(vec![None]),
            replacement: (!delete).then(|| object(vec![Some(vec![1])])),
        }),
        prop::collection::vec(0u32..1024, 0..8).prop_map(|partitions| {
            PeerRequest::PartitionStats {
                partitions,
                q: 1024,
            }
        }),
        key().prop_map(|key| PeerRequest::ReplicaGet { key }),
        (key(), prop::option::of(bytes()), any::<u64>()).prop_map(|(key, data, t)| {
            PeerRequest::Coordinate {
                key,
                data,
                overwrite: t % 2 == 0,
                context: object(vec![Some(vec![1])]).join(),
                written_at_ms: t,
            }
        }),
        (
            key(),
            prop::collection::vec(prop::option::of(bytes()), 0..4)
        )
            .prop_map(|(key, vals)| PeerRequest::Replicate {
                key,
                object: object(vals)
            }),
        (key(), any::<u64>()).prop_map(|(key, age_ms)| PeerRequest::StoreHint {
            owner: "node3".into(),
            key,
            object: object(vec![Some(vec![2])]),
            age_ms,
        }),
        (0u32..60000, 0u32..100)
            .prop_map(|(first, count)| PeerRequest::SegmentDigests { first, count }),
        (any::<u64>(), any::<u64>()).prop_map(|(a, b)| PeerRequest::KeyDigests {
            from_hash: a.min(b),
            to_hash: a.max(b)
        }),
    ]
}

/// A ring report of one member, varied by `v` (the `Ring` and `RingV2`
/// answers' common part).
fn ring_report(v: u64) -> RingReport {
    RingReport {
        node: "node1".into(),
        ring_version: v,
        placement: vec![1, 2, 3],
        members: vec![RingMember {
            id: "node2".into(),
            addr: "127.0.0.1:7002".into(),
            zone: "z1".into(),
            host: "h1".into(),
            status: "UP".into(),
            alive: true,
            suspect: false,
            hints_pending: v % 5,
            report: None,
        }],
        mode: "scoring".into(),
    }
}

fn response() -> impl Strategy<Value = Response> {
    prop_oneof![
        (prop::collection::vec(bytes(), 0..4), any::<bool>(), bytes()).prop_map(
            |(values, deleted, context)| Response::Get(GetReply {
                values,
                deleted,
                context
            })
        ),
        bytes().prop_map(|context| Response::Written { context }),
        prop::collection::vec(prop::option::of(bytes()), 0..4)
            .prop_map(|v| Response::Object(Some(object(v)))),
        Just(Response::Object(None)),
        Just(Response::Ack),
        (any::<bool>(), any::<u64>()).prop_map(|(running, n)| Response::Repair(RepairReport {
            node: "node1".into(),
            running,
            partitions_done: n % 7,
            partitions_total: 7,
            keys_repaired: n,
            segments_differing: n / 2,
            failures: n % 3,
        })),
        (any::<u64>(), any::<bool>()).prop_map(|(n, started)| Response::Plan(PlanReport {
            change: "drain node3".into(),
            started,
            partitions: n,
            moves: vec![PlannedMove {
                to: "node1".into(),
                from: vec!["node3".into()],
                partitions: n,
                keys: n / 2,
                bytes: n.wrapping_mul(3),
            }],
        })),
        (".{0,20}", "[a-z]{1,8}").prop_map(|(message, node)| Response::Error(WireError {
            kind: ErrorKind::Storage,
            message,
            node
        })),
        (any::<u64>(), 0.0f64..1.0).prop_map(|(v, share)| Response::Status(StatusReport {
            node: "node1".into(),
            ring_version: v,
            partitions: 1024,
            replicas: 3,
            nodes: vec![NodeReport {
                id: "node2".into(),
                addr: "127.0.0.1:7002".into(),
                zone: "z1".into(),
                host: "h1".into(),
                status: "UP".into(),
                alive: true,
                ring_share: share,
                transfer: String::new(),
                resp: "127.0.0.1:6380".into(),
                admin: String::new(),
            }],
            mode: "scoring".into(),
        })),
        any::<u64>().prop_map(|v| Response::Ring(ring_report(v))),
        (any::<u64>(), prop::option::of(any::<u64>())).prop_map(|(v, generation)| {
            Response::RingV2(RingReportV2 {
                ring: ring_report(v),
                generations: vec![generation],
            })
        }),
        (any::<u64>(), "[0-9a-f]{64}").prop_map(|(not_after, ca)| Response::Certs(CertsReport {
            node: "node1".into(),
            nodes: vec![NodeCert {
                id: "node2".into(),
                not_after,
                trusted: vec![ca.clone()],
                ca,
            }],
        })),
        (any::<u64>(), any::<u32>()).prop_map(|(hash, partition)| Response::Explain(
            ExplainReport {
                node: "node1".into(),
                hash,
                partition,
                ring_version: 3,
                replicas: vec![ExplainReplica {
                    id: "node2".into(),
                    addr: "127.0.0.1:7002".into(),
                    zone: "z1".into(),
                    status: "UP".into(),
                    alive: false,
                    score: 0.5,
                    latency_ms: Some(1.5),
                    excluded: Some("dead".into()),
                }],
                read_order: vec!["node2".into()],
                mode: "scoring".into(),
                op: "get".into(),
                decision: "{}".into(),
            }
        )),
        prop::collection::vec(".{0,20}", 0..3).prop_map(Response::Decisions),
    ]
}

fn peer_response() -> impl Strategy<Value = PeerResponse> {
    prop_oneof![
        prop::collection::vec(prop::option::of(bytes()), 0..4)
            .prop_map(|v| PeerResponse::Object(Some(object(v)))),
        Just(PeerResponse::Object(None)),
        Just(PeerResponse::Ack),
        any::<bool>().prop_map(PeerResponse::Replaced),
        prop::collection::vec(any::<u64>(), 0..64).prop_map(PeerResponse::Digests),
        (key(), any::<bool>()).prop_map(|(k, more)| PeerResponse::Objects {
            objects: vec![(k, object(vec![Some(vec![7])]))],
            more
        }),
        (any::<u64>(), any::<u64>()).prop_map(|(pending, ring_version)| {
            PeerResponse::TransferStatus {
                pending,
                ring_version,
            }
        }),
        prop::collection::vec((key(), any::<u64>()), 0..8).prop_map(PeerResponse::KeyDigests),
        prop::collection::vec((any::<u32>(), any::<u64>(), any::<u64>()), 0..8)
            .prop_map(PeerResponse::PartitionStats),
        (".{0,20}", "[a-z]{1,8}").prop_map(|(message, node)| PeerResponse::Error(WireError {
            kind: ErrorKind::Unavailable,
            message,
            node
        })),
    ]
}

proptest! {
    #[test]
    fn requests_round_trip(id in any::<u64>(), body in body()) {
        let req = Request { id, body };
        let bytes = frame::encode(FrameKind::Request, &req).unwrap();
        prop_assert_eq!(frame::decode::<Request>(FrameKind::Request, &bytes).unwrap(), req);
    }

    #[test]
    fn responses_round_trip(ring_version in any::<u64>(), response in response()) {
        let reply = ClientReply { ring_version, response };
        let bytes = frame::encode(FrameKind::Response, &reply).unwrap();
        let back = frame::decode::<ClientReply>(FrameKind::Response, &bytes).unwrap();
        prop_assert!(back.response.validate().is_ok());
        prop_assert_eq!(back, reply);
    }

    #[test]
    fn peer_calls_round_trip(id in any::<u64>(), v in any::<u64>(), body in peer_body()) {
        let call = PeerCall { id, ring_version: v, body };
        let bytes = frame::encode(FrameKind::PeerRequest, &call).unwrap();
        let back = frame::decode::<PeerCall>(FrameKind::PeerRequest, &bytes).unwrap();
        prop_assert!(back.validate().is_ok());
        prop_assert_eq!(back, call);
    }

    #[test]
    fn peer_replies_round_trip(
        ring_version in any::<u64>(),
        queue in any::<Option<u32>>(),
        response in peer_response(),
    ) {
        let feedback = queue.map(|queue| Feedback { queue, service_us: f64::from(queue) / 3.0 });
        let reply = PeerReply { ring_version, feedback, response };
        let bytes = frame::encode(FrameKind::PeerResponse, &reply).unwrap();
        let back = frame::decode::<PeerReply>(FrameKind::PeerResponse, &bytes).unwrap();
        prop_assert!(back.validate().is_ok());
        prop_assert_eq!(back, reply);
    }

    #[test]
    fn garbage_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..256)) {
        let _ = frame::decode::<Request>(FrameKind::Request, &bytes);
        let _ = frame::decode::<ClientReply>(FrameKind::Response, &bytes);
        let _ = frame::decode::<PeerCall>(FrameKind::PeerRequest, &bytes);
        let _ = frame::decode::<PeerReply>(FrameKind::PeerResponse, &bytes);
    }
}

#[test]
fn a_client_frame_is_never_taken_for_a_peer_frame() {
    let reply = ClientReply {
        ring_version: 1,
        response: Response::Ack,
    };
    let bytes = frame::encode(FrameKind::Response, &reply).unwrap();
    assert!(matches!(
        frame::decode::<PeerReply>(FrameKind::PeerResponse, &bytes),
        Err(crate::Error::UnexpectedKind { .. })
    ));
}

#[test]
fn validation_enforces_bounds() {
    let too_long = vec![b'k'; kv_types::limits::MAX_KEY_BYTES + 1];
    let req = |body| Request { id: 1, body };
    assert!(
        req(RequestBody::Get {
            key: too_long,
            r: None,
            hedged: false,
        })
        .validate()
        .is_err()
    );
    assert!(
        req(RequestBody::Get {
            key: vec![],
            r: None,
            hedged: false,
        })
        .validate()
        .is_err()
    );
    assert!(
        req(RequestBody::Get {
            key: b"k".to_vec(),
            r: Some(0),
            hedged: false,
        })
        .validate()
        .is_err()
    );
    assert!(
        req(RequestBody::Put {
            key: b"k".to_vec(),
            value: vec![0; kv_types::limits::MAX_VALUE_BYTES + 1],
            context: vec![],
            w: None
        })
        .validate()
        .is_err()
    );
    assert!(
        req(RequestBody::Put {
            key: b"k".to_vec(),
            value: b"v".to_vec(),
            context: vec![],
            w: Some(2)
        })
        .validate()
        .is_ok()
    );
    let peer = |body| PeerCall {
        id: 1,
        ring_version: 0,
        body,
    };
    assert!(
        peer(PeerRequest::Scan {
            from_hash: 5,
            to_hash: 4,
            after: None,
            limit: 10
        })
        .validate()
        .is_err()
    );
    assert!(
        peer(PeerRequest::SegmentDigests {
            first: 65535,
            count: 2
        })
        .validate()
        .is_err()
    );
}

#[test]
fn feedback_service_times_must_be_finite_non_negative_and_bounded() {
    let reply = |service_us| PeerReply {
        ring_version: 1,
        feedback: Some(Feedback {
            queue: 3,
            service_us,
        }),
        response: PeerResponse::Ack,
    };
    for good in [0.0, 250.5, peer::MAX_SERVICE_US] {
        assert!(reply(good).validate().is_ok(), "{good}");
    }
    for bad in [
        f64::NAN,
        f64::INFINITY,
        f64::NEG_INFINITY,
        -1.0,
        -0.0001,
        peer::MAX_SERVICE_US * 2.0,
    ] {
        // Through a frame, as a peer would send it.
        let bytes = frame::encode(FrameKind::PeerResponse, &reply(bad)).unwrap();
        let back = frame::decode::<PeerReply>(FrameKind::PeerResponse, &bytes).unwrap();
        assert!(back.validate().is_err(), "{bad}");
    }
    let none = PeerReply {
        feedback: None,
        ..reply(0.0)
    };
    assert!(none.validate().is_ok());
}

#[test]
fn requests_added_at_the_end_leave_the_others_encoded_as_before() {
    // Request id 1, then the variant's index: Status and Ring encode as in
    // the build before `Certs` was added (so a node of that build still
    // reads them), and `Certs` takes the index after the last one it knew
    // (so such a node refuses it as an unknown variant instead of
    // misreading it as another request).
    let encode = |body: RequestBody| kv_types::codec::encode(&Request { id: 1, body }).unwrap();
    assert_eq!(encode(RequestBody::Status), [1, 4]);
    assert_eq!(encode(RequestBody::Ring), [1, 13]);
    assert_eq!(encode(RequestBody::Certs), [1, 14]);
    assert_eq!(encode(RequestBody::RingV2), [1, 15]);
    let answer = |response: Response| {
        kv_types::codec::encode(&ClientReply {
            ring_version: 0,
            response,
        })
        .unwrap()
    };
    let certs = answer(Response::Certs(CertsReport {
        node: String::new(),
        nodes: Vec::new(),
    }));
    assert_eq!(certs[..2], [0, 11]);
    let ring = || RingReport {
        node: String::new(),
        ring_version: 0,
        placement: Vec::new(),
        members: Vec::new(),
        mode: String::new(),
    };
    let v2 = answer(Response::RingV2(RingReportV2 {
        ring: ring(),
        generations: Vec::new(),
    }));
    assert_eq!(v2[..2], [0, 12]);
    assert_eq!(answer(Response::Ring(ring()))[..2], [0, 10]);
    assert_eq!(answer(Response::Ack)[..2], [0, 3]);
}
