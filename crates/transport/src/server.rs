//! The accepting side: connections, role checks, one task per stream.

use std::sync::Arc;

use kv_tls::{PeerIdentity, Role};
use kv_wire::frame::{self, FrameKind, HEADER_BYTES};
use kv_wire::{
    ClientReply, ErrorKind, MAX_FRAME_BYTES, MAX_REQUEST_BYTES, PeerCall, PeerReply, PeerResponse,
    Request, Response, WireError,
};
use quinn::VarInt;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc};
use tracing::{debug, warn};

use crate::Endpoint;
use crate::admission::StreamGuard;
use crate::endpoint::{GossipDatagram, MAX_GOSSIP_BYTES, Serving, identity_of};

/// Application close code sent to a peer whose certificate we refuse.
const CLOSE_REFUSED: u32 = 0x10;
/// Stream stop code for gossip from a non-node certificate.
const STOP_REFUSED: u32 = 0x11;
/// Stream stop code for a request stream given up on: longer than its role
/// may send, not received within the read deadline, or broken.
const STOP_ABANDONED: u32 = 0x13;
/// Stream reset code for an answer the peer did not read in time.
const RESET_WRITE_DEADLINE: u32 = 0x14;

/// Bytes read from a stream at once, at most.
const READ_CHUNK: usize = 64 * 1024;

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
    let Some(admitted) = endpoint.connections.admit(&peer, &conn) else {
        return;
    };
    loop {
        tokio::select! {
            _ = endpoint.shutdown.cancelled() => break,
            bi = conn.accept_bi() => match bi {
                Ok((send, recv)) => {
                    let (ep, h, p) = (endpoint.clone(), handler.clone(), peer.clone());
                    let busy = admitted.stream();
                    endpoint.tasks.spawn(async move { serve_stream(ep, h, p, send, recv, busy).await });
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
                    let busy = admitted.stream();
                    endpoint.tasks.spawn(async move { receive_gossip(ep, remote, recv, g, busy).await });
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
    _busy: StreamGuard,
) {
    // Only nodes send frames as large as a replica call may be; a client or
    // admin request is at most one maximal value with its key and context.
    let limit = HEADER_BYTES
        + match peer.role {
            Role::Node => MAX_FRAME_BYTES,
            Role::Client | Role::Admin => MAX_REQUEST_BYTES,
        };
    let read = tokio::time::timeout(
        endpoint.config.read_timeout,
        read_budgeted(&endpoint.receive_budget, &mut recv, limit),
    )
    .await;
    let (bytes, _budget) = match read {
        Err(_) => {
            debug!(peer = %peer.name, "request not received within the read deadline");
            let _ = recv.stop(VarInt::from_u32(STOP_ABANDONED));
            return;
        }
        Ok(Err(e)) => {
            debug!(peer = %peer.name, error = %e, "request stream failed");
            let _ = recv.stop(VarInt::from_u32(STOP_ABANDONED));
            return;
        }
        Ok(Ok(read)) => read,
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
    match tokio::time::timeout(endpoint.config.write_timeout, send.write_all(&answer)).await {
        Ok(Ok(())) => {
            let _ = send.finish();
        }
        Ok(Err(e)) => debug!(peer = %peer.name, error = %e, "could not send the answer"),
        Err(_) => {
            debug!(peer = %peer.name, "answer not read within the write deadline");
            let _ = send.reset(VarInt::from_u32(RESET_WRITE_DEADLINE));
        }
    }
}

/// Reads a whole stream of at most `limit` bytes, taking the bytes from
/// the endpoint's receive `budget` as they arrive (waiting while it is
/// spent: the caller's read deadline bounds the wait). The permit returned
/// holds them until dropped.
async fn read_budgeted(
    budget: &Arc<Semaphore>,
    recv: &mut quinn::RecvStream,
    limit: usize,
) -> std::result::Result<(Vec<u8>, Option<OwnedSemaphorePermit>), String> {
    let mut bytes = Vec::new();
    let mut held: Option<OwnedSemaphorePermit> = None;
    while let Some(chunk) = recv
        .read_chunk(READ_CHUNK, true)
        .await
        .map_err(|e| e.to_string())?
    {
        let n = chunk.bytes.len();
        if bytes.len() + n > limit {
            return Err(format!("the stream is longer than {limit} bytes"));
        }
        let permit = budget
            .clone()
            .acquire_many_owned(u32::try_from(n).unwrap_or(u32::MAX))
            .await
            .map_err(|_| "the endpoint is closed".to_string())?;
        match &mut held {
            Some(h) => h.merge(permit),
            None => held = Some(permit),
        }
        bytes.extend_from_slice(&chunk.bytes);
    }
    Ok((bytes, held))
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
    _busy: StreamGuard,
) {
    // A gossip message still arriving when the endpoint shuts down is
    // dropped (gossip is lossy): waiting for it, up to the read timeout
    // when its sender died, would hold up the drain.
    let read = tokio::select! {
        _ = endpoint.shutdown.cancelled() => return,
        read = tokio::time::timeout(
            endpoint.config.read_timeout,
            read_budgeted(&endpoint.receive_budget, &mut recv, HEADER_BYTES + MAX_GOSSIP_BYTES),
        ) => read,
    };
    let Ok(Ok((bytes, _budget))) = read else {
        let _ = recv.stop(VarInt::from_u32(STOP_ABANDONED));
        return;
    };
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
