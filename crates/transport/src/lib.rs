//! The node's one QUIC endpoint (quinn + rustls, ring provider, mutual TLS).
//!
//! One UDP socket per process carries everything: client requests, replica
//! RPCs between nodes, and gossip. Outgoing calls reuse one connection per
//! peer address ([`Endpoint::call`]); each request is its own bidirectional
//! stream on that connection (multiplexed, no head-of-line blocking), each
//! gossip message its own unidirectional stream (chitchat messages reach
//! 64 KiB, more than a datagram carries). Incoming streams are handed to a
//! [`Handler`] after the transport checked the frame and the caller's
//! certificate role: only `node` certificates may send peer requests or
//! gossip.
//! [`Endpoint::reload`] swaps the certificate, key and CA bundle of a
//! running endpoint for the connections made after it.
//!
//! Inputs: a [`kv_tls::Credentials`], a bind address, a [`Handler`]. Outputs:
//! responses from peers, gossip payloads on a channel. This crate knows
//! frames and roles, not keys, rings or storage.

mod admission;
mod endpoint;
mod error;
mod server;
mod settings;

pub use endpoint::{Endpoint, GossipDatagram};
pub use error::{Error, Result};
pub use kv_tls::{PeerIdentity, Role};
pub use server::Handler;
pub use settings::TransportSettings;
