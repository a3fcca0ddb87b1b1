//! chitchat's `Transport` on the node's QUIC endpoint.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use chitchat::transport::{Socket, Transport};
use chitchat::{ChitchatMessage, Deserializable, Serializable};
use kv_transport::{Endpoint, GossipDatagram};
use tokio::sync::mpsc;
use tracing::debug;

use crate::Error;

/// Largest gossip message we send or accept, in bytes. chitchat keeps its
/// messages under 64 KiB (its UDP bound); anything bigger is a bug or an
/// attack.
const MAX_MESSAGE_BYTES: usize = 65_507;

/// chitchat's transport over [`kv_transport::Endpoint`]: a message is one
/// unidirectional stream to the peer's endpoint address, sent without
/// waiting (chitchat awaits sends inside its gossip loop; a dead peer must
/// not stall it). Received messages arrive from the endpoint through the
/// channel given to [`QuicTransport::new`].
pub struct QuicTransport {
    endpoint: Arc<Endpoint>,
    incoming: Mutex<Option<mpsc::Receiver<GossipDatagram>>>,
}

impl QuicTransport {
    /// Wraps `endpoint`; `incoming` is the receiving end of the gossip
    /// channel the endpoint was bound with.
    pub fn new(endpoint: Arc<Endpoint>, incoming: mpsc::Receiver<GossipDatagram>) -> Self {
        QuicTransport {
            endpoint,
            incoming: Mutex::new(Some(incoming)),
        }
    }
}

#[async_trait]
impl Transport for QuicTransport {
    async fn open(&self, _listen_addr: SocketAddr) -> anyhow::Result<Box<dyn Socket>> {
        let incoming = self
            .incoming
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
            .ok_or(Error::AlreadyOpen)?;
        Ok(Box::new(QuicSocket {
            endpoint: self.endpoint.clone(),
            incoming,
        }))
    }
}

struct QuicSocket {
    endpoint: Arc<Endpoint>,
    incoming: mpsc::Receiver<GossipDatagram>,
}

#[async_trait]
impl Socket for QuicSocket {
    async fn send(&mut self, to: SocketAddr, message: ChitchatMessage) -> anyhow::Result<()> {
        let payload = message.serialize_to_vec();
        if payload.len() > MAX_MESSAGE_BYTES {
            debug!(%to, len = payload.len(), "gossip message too large, dropped");
        } else {
            self.endpoint.send_gossip(to, &payload);
        }
        Ok(())
    }

    async fn recv(&mut self) -> anyhow::Result<(SocketAddr, ChitchatMessage)> {
        loop {
            let Some(datagram) = self.incoming.recv().await else {
                anyhow::bail!("the QUIC endpoint stopped delivering gossip");
            };
            if datagram.payload.len() > MAX_MESSAGE_BYTES {
                debug!(from = %datagram.from, "oversized gossip message dropped");
                continue;
            }
            let mut buf: &[u8] = &datagram.payload;
            match ChitchatMessage::deserialize(&mut buf) {
                Ok(message) => return Ok((datagram.from, message)),
                Err(e) => debug!(from = %datagram.from, error = %e, "undecodable gossip message"),
            }
        }
    }
}
