//! The accepting side: connections, role checks, one task per stream.

use std::sync::Arc;

use kv_tls::{PeerIdentity, Role};
use kv_wire::frame::{self, FrameKind, HEADER_BYTES};
use kv_wire::{
    ClientReply, ErrorKind, MAX_FRAME_BYTES, PeerCall, PeerReply, PeerResponse, Request, Response,
    WireError,
};
use quinn::VarInt;
use tokio::sync::mpsc;
use tracing::{debug, warn};

use crate::Endpoint;
use crate::endpoint::{GossipDatagram, MAX_GOSSIP_BYTES, Serving, identity_of};

/// Application close code sent to a peer whose certificate we refuse.
const CLOSE_REFUSED: u32 = 0x10;
/// Stream stop code for gossip from a non-node certificate.
const STOP_REFUSED: u32 = 0x11;

/// Serves requests that arrive on the endpoint.
///
/// Called once per request, concurrently; the transport has already decoded
/// and validated the frame and checked that replica calls come from a node
/// certificate. Implementations answer every request, errors included, and
/// bound their own concurrency (answering "overloaded" when full).
#[async_trait::async_trait]
pub trait Handler: Send + Sync + 'static {
    /// Answers one client request from the certified `peer`.
    async fn handle(&self, peer: &PeerIdentity, request: Request) -> ClientReply;

    /// Answers one replica call from `peer`, a node certificate.
    async fn handle_peer(&self, peer: &PeerIdentity, call: PeerCall) -> PeerReply;
}

pub(crate) fn spawn_accept_loop(endpoint: Arc<Endpoint>, serving: Serving) {
    let tasks = endpoint.tasks.clone();
    tasks.spawn(async move {
        loop {
            let incoming = tokio::select! {
                _ = endpoint.shutdown.cancelled() => break,
                incoming = endpoint.quic.accept() => incoming,
            };
            let Some(incoming) = incoming else { break };
            let (ep, serving) = (endpoint.clone(), serving.clone());
            endpoint.tasks.spawn(async move {
                let remote = incoming.remote_address();
                match tokio::time::timeout(ep.config.connect_timeout, incoming).await {
                    Ok(Ok(conn)) => {
                        let remote = conn.remote_address();
                        if identity_of(&conn).is_ok_and(|p| p.role == Role::Node) {
                            ep.offer(remote, &conn);
                        }
                        serve_connection(ep, conn, serving).await
                    }
                    Ok(Err(e)) => debug!(%remote, error = %e, "incoming connection failed"),
                    Err(_) => debug!(%remote, "incoming handshake timed out"),
                }
            });
        }
    });
}

/// Serves the streams a peer opens on `conn`, until it closes or the
/// endpoint shuts down.
pub(crate) async fn serve_connection(
    endpoint: Arc<Endpoint>,
    conn: quinn::Connection,
    serving: Serving,
) {
    let Serving { handler, gossip } = serving;
    let remote = conn.remote_address();
    let peer = match identity_of(&conn) {
        Ok(peer) => Arc::new(peer),
        Err(reason) => {
            warn!(%remote, %reason, "refusing connection: unusable certificate");
            conn.close(VarInt::from_u32(CLOSE_REFUSED), b"certificate refused");
            return;
        }
    };
    loop {
        tokio::select! {
            _ = endpoint.shutdown.cancelled() => break,
            bi = conn.accept_bi() => match bi {
                Ok((send, recv)) => {
                    let (ep, h, p) = (endpoint.clone(), handler.clone(), peer.clone());
                    endpoint.tasks.spawn(async move { serve_stream(ep, h, p, send, recv).await });
                }
                Err(e) => {
                    debug!(%remote, error = %e, "connection ended");
                    break;
                }
            },
            uni = conn.accept_uni() => match uni {
                Ok(mut recv) => {
                    if peer.role != Role::Node {
                        let _ = recv.stop(VarInt::from_u32(STOP_REFUSED));
                        continue;
                    }
                    let (ep, g) = (endpoint.clone(), gossip.clone());
                    endpoint.tasks.spawn(async move { receive_gossip(ep, remote, recv, g).await });
                }
                Err(e) => {
                    debug!(%remote, error = %e, "connection ended");
                    break;
                }
            },
        }
    }
}

async fn serve_stream(
    endpoint: Arc<Endpoint>,
    handler: Arc<dyn Handler>,
    peer: Arc<PeerIdentity>,
    mut send: quinn::SendStream,
    mut recv: quinn::RecvStream,
) {
    let read = tokio::time::timeout(
        endpoint.config.read_timeout,
        recv.read_to_end(HEADER_BYTES + MAX_FRAME_BYTES),
    )
    .await;
    let bytes = match read {
        Err(_) => return,
        Ok(Err(e)) => {
            debug!(peer = %peer.name, error = %e, "request stream failed");
            return;
        }
        Ok(Ok(bytes)) => bytes,
    };
    let answer = match frame::unwrap(&bytes) {
        Ok((FrameKind::PeerRequest, _)) => {
            let reply = answer_peer(&endpoint, &*handler, &peer, &bytes).await;
            encode_or_error(&endpoint, FrameKind::PeerResponse, &reply, |e| PeerReply {
                ring_version: 0,
                feedback: None,
                response: PeerResponse::Error(e),
            })
        }
        _ => {
            let reply = match decode_request(&bytes) {
                Err(message) => client_error(&endpoint, ErrorKind::Invalid, message),
                Ok(request) => handler.handle(&peer, request).await,
            };
            encode_or_error(&endpoint, FrameKind::Response, &reply, |e| ClientReply {
                ring_version: 0,
                response: Response::Error(e),
            })
        }
    };
    let Some(answer) = answer else { return };
    if let Err(e) = send.write_all(&answer).await {
        debug!(peer = %peer.name, error = %e, "could not send the answer");
        return;
    }
    let _ = send.finish();
}

/// The answer to a replica call frame: refused unless `peer` is a node.
async fn answer_peer(
    endpoint: &Endpoint,
    handler: &dyn Handler,
    peer: &PeerIdentity,
    bytes: &[u8],
) -> PeerReply {
    let error = |kind, message| PeerReply {
        ring_version: 0,
        feedback: None,
        response: PeerResponse::Error(wire_error(endpoint, kind, message)),
    };
    if peer.role != Role::Node {
        return error(
            ErrorKind::Refused,
            format!(
                "peer requests need a node certificate; {} has a {} certificate",
                peer.name,
                peer.role.as_str()
            ),
        );
    }
    let call = frame::decode::<PeerCall>(FrameKind::PeerRequest, bytes)
        .map_err(|e| e.to_string())
        .and_then(|call| call.validate().map(|()| call).map_err(|e| e.to_string()));
    match call {
        Ok(call) => handler.handle_peer(peer, call).await,
        Err(message) => error(ErrorKind::Invalid, message),
    }
}

/// The framed `answer`, or the framed error that it could not be encoded
/// (`None` when even that fails).
fn encode_or_error<T: serde::Serialize>(
    endpoint: &Endpoint,
    kind: FrameKind,
    answer: &T,
    error: impl FnOnce(WireError) -> T,
) -> Option<Vec<u8>> {
    match frame::encode(kind, answer) {
        Ok(b) => Some(b),
        Err(e) => {
            let fallback = error(wire_error(
                endpoint,
                ErrorKind::Internal,
                format!("cannot encode the answer: {e}"),
            ));
            frame::encode(kind, &fallback).ok()
        }
    }
}

fn decode_request(bytes: &[u8]) -> std::result::Result<Request, String> {
    let request: Request = frame::decode(FrameKind::Request, bytes).map_err(|e| e.to_string())?;
    request.validate().map_err(|e| e.to_string())?;
    Ok(request)
}

fn wire_error(endpoint: &Endpoint, kind: ErrorKind, message: String) -> WireError {
    WireError {
        kind,
        message,
        node: endpoint.name.clone(),
    }
}

fn client_error(endpoint: &Endpoint, kind: ErrorKind, message: String) -> ClientReply {
    ClientReply {
        ring_version: 0,
        response: Response::Error(wire_error(endpoint, kind, message)),
    }
}

async fn receive_gossip(
    endpoint: Arc<Endpoint>,
    from: std::net::SocketAddr,
    mut recv: quinn::RecvStream,
    gossip: mpsc::Sender<GossipDatagram>,
) {
    // A gossip message still arriving when the endpoint shuts down is
    // dropped (gossip is lossy): waiting for it, up to the read timeout
    // when its sender died, would hold up the drain.
    let read = tokio::select! {
        _ = endpoint.shutdown.cancelled() => return,
        read = tokio::time::timeout(
            endpoint.config.read_timeout,
            recv.read_to_end(HEADER_BYTES + MAX_GOSSIP_BYTES),
        ) => read,
    };
    let Ok(Ok(bytes)) = read else { return };
    match frame::unwrap(&bytes) {
        Ok((FrameKind::Gossip, payload)) => {
            let datagram = GossipDatagram {
                from,
                payload: payload.to_vec(),
            };
            if gossip.try_send(datagram).is_err() {
                debug!(%from, "gossip message dropped: receiver full or gone");
            }
        }
        Ok((kind, _)) => debug!(%from, ?kind, "unexpected frame on a gossip stream"),
        Err(e) => debug!(%from, error = %e, "bad gossip frame"),
    }
}
