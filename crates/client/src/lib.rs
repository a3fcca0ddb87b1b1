//! The async client library of the store: get, put and delete with causal
//! contexts, plus the status, explain and per-replica views `kvctl` shows.
//!
//! Inputs: a [`ClientSettings`] (endpoints, a certificate directory made by
//! `kvctl certs init`, an identity, a timeout). Outputs: wire replies
//! ([`GetReply`], [`StatusReport`], [`ExplainReport`], stored [`Object`]s)
//! and one [`Error`] type whose variants say what the caller must do next
//! (and map to `kvctl`'s exit codes). Requests go over QUIC with mutual TLS
//! through `kv-transport`; any node coordinates any request, so the client
//! starts at a random endpoint and fails over to the next only when that is
//! safe: reads on any transport failure, writes only when the request
//! certainly never reached a node (a repeated write would be stored twice).
//!
//! The crate knows no ring and no storage: it must not depend on the router,
//! storage or gossip crates.
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

mod client;
mod context;
mod error;
mod failover;
mod resolve;
mod settings;

pub use client::Client;
pub use context::{check_context, decode_context, encode_context};
pub use error::{Error, Result};
pub use kv_types::{NodeId, Object, Sibling};
pub use kv_wire::{ErrorKind, ExplainReplica, ExplainReport, GetReply, NodeReport, StatusReport};
pub use settings::{ClientSettings, DEFAULT_IDENTITY, DEFAULT_TIMEOUT};
