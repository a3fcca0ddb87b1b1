//! The accepting side: connections, role checks, one task per stream.

use std::sync::Arc;

use kv_tls::{PeerIdentity, Role};
use kv_wire::frame::{self, FrameKind, HEADER_BYTES};
use kv_wire::{ErrorKind, MAX_FRAME_BYTES, Request, RequestBody, Response, WireError};
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
/// and validated the frame and checked that peer requests come from a node
/// certificate. Implementations answer every request, errors included, and
/// bound their own concurrency (answering "overloaded" when full).
#[async_trait::async_trait]
pub trait Handler: Send + Sync + 'static {
    /// Answers one request from the certified `peer`.
    async fn handle(&self, peer: &PeerIdentity, request: Request) -> Response;
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
    let response = match read {
        Err(_) => return,
        Ok(Err(e)) => {
            debug!(peer = %peer.name, error = %e, "request stream failed");
            return;
        }
        Ok(Ok(bytes)) => match decode_request(&bytes) {
            Err(message) => error(&endpoint, ErrorKind::Invalid, message),
            Ok(request) => {
                if matches!(request.body, RequestBody::Peer(_)) && peer.role != Role::Node {
                    error(
                        &endpoint,
                        ErrorKind::Refused,
                        format!(
                            "peer requests need a node certificate; {} has a {} certificate",
                            peer.name,
                            peer.role.as_str()
                        ),
                    )
                } else {
                    handler.handle(&peer, request).await
                }
            }
        },
    };
    let bytes = match frame::encode(FrameKind::Response, &response) {
        Ok(b) => b,
        Err(e) => {
            let fallback = error(
                &endpoint,
                ErrorKind::Internal,
                format!("cannot encode the answer: {e}"),
            );
            match frame::encode(FrameKind::Response, &fallback) {
                Ok(b) => b,
                Err(_) => return,
            }
        }
    };
    if let Err(e) = send.write_all(&bytes).await {
        debug!(peer = %peer.name, error = %e, "could not send the answer");
        return;
    }
    let _ = send.finish();
}

fn decode_request(bytes: &[u8]) -> std::result::Result<Request, String> {
    let request: Request = frame::decode(FrameKind::Request, bytes).map_err(|e| e.to_string())?;
    request.validate().map_err(|e| e.to_string())?;
    Ok(request)
}

fn error(endpoint: &Endpoint, kind: ErrorKind, message: String) -> Response {
    Response::Error(WireError {
        kind,
        message,
        node: endpoint.name.clone(),
    })
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
