//! Cluster membership: chitchat's scuttlebutt gossip and phi-accrual
//! failure detector, carried over the node's one QUIC endpoint.
//!
//! [`QuicTransport`] implements chitchat's `Transport` trait on
//! `kv_transport::Endpoint`: each gossip message is one unidirectional QUIC
//! stream (no separate UDP socket, and mutual TLS covers gossip too).
//! [`Membership`] publishes what this node is (id, advertised addresses,
//! zone, host, weight, status) and maintains a [`View`] of every node: the
//! newest incarnation (chitchat generation) of each node id, and whether
//! chitchat's failure detector believes it alive. Liveness comes only from
//! that detector, except that a stall of this node itself (SIGSTOP, `docker
//! pause`) convicts no peer until fresh heartbeats have arrived (`pause`,
//! after Cassandra's CASSANDRA-9183).
//!
//! This crate must not depend on storage or the router: the node joins them.

mod error;
pub mod keys;
mod membership;
mod pause;
mod quic;
mod view;

pub use error::{Error, Result};
pub use membership::{GossipSettings, Membership, NodeInfo, Publisher};
pub use quic::QuicTransport;
pub use view::{MemberState, View};
