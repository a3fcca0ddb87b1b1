//! The async client library of the store: get, put and delete with causal
//! contexts, plus the status, explain and per-replica views `kvctl` shows.
//!
//! Inputs: a [`ClientSettings`] (endpoints, a certificate directory made by
//! `kvctl certs init`, an identity, a timeout). Outputs: wire replies
//! ([`GetReply`], [`StatusReport`], [`ExplainReport`], stored [`Object`]s)
//! and one [`Error`] type whose variants say what the caller must do next
//! (and map to `kvctl`'s exit codes). Requests go over QUIC with mutual TLS
//! through `kv-transport`. The client learns the cluster's ring and load
//! reports from a node (a `Ring` request) and sends each request about a
//! key to one of the key's replicas, ordered by the router of `kv-router`
//! (the same pure scoring the nodes use, over the client's own
//! observations); before it knows the ring, any configured endpoint. A
//! connection attempt that stalls is raced by the next candidate after a
//! short delay (happy eyeballs); nodes it could not reach go last and are
//! probed in the background. It fails over only when that is safe: reads on
//! any transport failure, writes only when the request certainly never
//! reached a node (a repeated write would be stored twice).
//!
//! The crate depends on `kv-router` for pure logic (ring, scoring), never on
//! storage, gossip or the replication core.
//!
//! ```no_run
//! # async fn demo() -> kv_client::Result<()> {
//! use kv_client::{Client, ClientSettings};
//! let client = Client::connect(ClientSettings::new(
//!     vec!["127.0.0.1:7101".into()],
//!     ".cluster/certs",
//! ))
//! .await?;
//! let read = client.get(b"greeting", None).await?;
//! client.put(b"greeting", b"hello", &read.context, None).await?;
//! client.close().await;
//! # Ok(())
//! # }
//! ```

mod cache;
mod client;
mod context;
mod error;
mod failover;
mod known;
mod resolve;
mod routing;
mod send;
mod settings;

pub use client::Client;
pub use context::{check_context, decode_context, encode_context};
pub use error::{Error, Result};
pub use kv_router::Mode;
pub use kv_types::{NodeId, Object, Sibling};
pub use kv_wire::{
    CertsReport, ErrorKind, ExplainReplica, ExplainReport, GetReply, NodeCert, NodeReport,
    RingReport, StatusReport,
};
pub use routing::DecisionRecord;
pub use settings::{ClientSettings, DEFAULT_CONNECT_TIMEOUT, DEFAULT_IDENTITY, DEFAULT_TIMEOUT};
