//! Targets of `kv-wire`: frames and every client and peer message.

use kv_router::Mode;
use kv_types::{NodeId, NodeStatus, codec};
use kv_wire::frame::{self, FrameKind, HEADER_BYTES};
use kv_wire::{ClientReply, PROTOCOL_VERSION, PeerCall, PeerReply, Request, RingReport};

use crate::round_trip;

/// A whole frame as the transport reads it: header checks, then the
/// message of the frame's kind, validated as its receiver does. With a
/// first byte of 0, the rest is `[kind][payload]` and the header (version,
/// length) is made here, so the fuzzer reaches the messages.
pub fn frame(data: &[u8]) {
    let framed;
    let bytes = match data.split_first() {
        Some((0, rest)) if !rest.is_empty() => {
            let mut f = vec![PROTOCOL_VERSION, rest[0]];
            f.extend_from_slice(
                &u32::try_from(rest.len() - 1)
                    .unwrap_or(u32::MAX)
                    .to_le_bytes(),
            );
            f.extend_from_slice(&rest[1..]);
            framed = f;
            &framed[..]
        }
        _ => data,
    };
    if let Some(header) = bytes.first_chunk::<HEADER_BYTES>() {
        let _ = frame::parse_header(header);
    }
    let Ok((kind, payload)) = frame::unwrap(bytes) else {
        return;
    };
    // A frame that unwraps is exactly its header and payload.
    assert_eq!(frame::wrap(kind, payload).expect("bounded payload"), bytes);
    match kind {
        FrameKind::Request => request(payload),
        FrameKind::Response => client_reply(payload),
        FrameKind::PeerRequest => peer_call(payload),
        FrameKind::PeerResponse => peer_reply(payload),
        // Gossip frames carry chitchat's own encoding.
        FrameKind::Gossip => {}
    }
    // The same bytes under the frame decoder of every other kind.
    let _ = frame::decode::<Request>(FrameKind::Request, bytes);
    let _ = frame::decode::<ClientReply>(FrameKind::Response, bytes);
    let _ = frame::decode::<PeerCall>(FrameKind::PeerRequest, bytes);
    let _ = frame::decode::<PeerReply>(FrameKind::PeerResponse, bytes);
}

/// A client message payload: a `Request` (first byte even) or a
/// `ClientReply` (odd).
pub fn client(data: &[u8]) {
    match data.split_first() {
        Some((b, rest)) if b % 2 == 0 => request(rest),
        Some((_, rest)) => client_reply(rest),
        None => {}
    }
}

/// A peer message payload: a `PeerCall` (first byte even) or a
/// `PeerReply` (odd).
pub fn peer(data: &[u8]) {
    match data.split_first() {
        Some((b, rest)) if b % 2 == 0 => peer_call(rest),
        Some((_, rest)) => peer_reply(rest),
        None => {}
    }
}

/// A `RingReport` payload, then what a routing client makes of a valid
/// one: the placement rebuilt into a ring, the mode, each member's id,
/// status and address.
pub fn ring_report(data: &[u8]) {
    let Ok(report) = codec::decode::<RingReport>(data) else {
        return;
    };
    let valid = report.validate().is_ok();
    let back = round_trip::check(&report);
    assert_eq!(back.validate().is_ok(), valid);
    if valid {
        learn(&report);
    }
}

fn request(payload: &[u8]) {
    let Ok(request) = codec::decode::<Request>(payload) else {
        return;
    };
    let valid = request.validate().is_ok();
    let back = round_trip::check(&request);
    assert_eq!(back.validate().is_ok(), valid);
    if valid && let kv_wire::RequestBody::Put { context, .. } = &request.body {
        let _ = kv_types::VersionVector::from_context(context);
    }
}

fn client_reply(payload: &[u8]) {
    let Ok(reply) = codec::decode::<ClientReply>(payload) else {
        return;
    };
    let valid = reply.response.validate().is_ok();
    let back = round_trip::check(&reply);
    assert_eq!(back.response.validate().is_ok(), valid);
    if valid && let kv_wire::Response::Ring(report) = &reply.response {
        learn(report);
    }
    if valid && let kv_wire::Response::RingV2(report) = &reply.response {
        learn(&report.ring);
    }
}

fn peer_call(payload: &[u8]) {
    let Ok(call) = codec::decode::<PeerCall>(payload) else {
        return;
    };
    let valid = call.validate().is_ok();
    let back = round_trip::check(&call);
    assert_eq!(back.validate().is_ok(), valid);
}

fn peer_reply(payload: &[u8]) {
    let Ok(reply) = codec::decode::<PeerReply>(payload) else {
        return;
    };
    let valid = reply.validate().is_ok();
    let back = round_trip::check(&reply);
    assert_eq!(back.validate().is_ok(), valid);
    if valid && let Some(f) = reply.feedback {
        assert!(f.service_us.is_finite() && f.service_us >= 0.0);
    }
}

/// What `kv-client` reads from a valid ring report (its `Known`).
fn learn(report: &RingReport) {
    for m in &report.members {
        if let Some(load) = &m.report {
            assert!((0.0..=1.0).contains(&load.cpu) && (0.0..=1.0).contains(&load.hit_ratio));
        }
        let _ = NodeId::new(m.id.as_str());
        let _ = m.status.parse::<NodeStatus>();
        let _ = m.addr.parse::<std::net::SocketAddr>();
    }
    let _ = report.mode.parse::<Mode>();
    crate::ring::rebuild(&report.placement);
}
