//! The bytes-to-commands half of the RESP (Redis protocol) front door:
//! [`parse`] turns a connection's read buffer into requests (RESP2 arrays
//! of bulk strings, or [`inline`] commands), incrementally and within
//! [`parse::Limits`]; [`command`] turns a request's arguments into a
//! [`command::Command`] (name, arity, key bounds).
//!
//! Bytes in, values out: no sockets, no tokio, no replication. The node's
//! `resp` module owns the listener, the connections and what commands do;
//! this crate stands alone so that it can be fuzzed and tested by itself.
//! It must not depend on the node, the replication core or any I/O crate.

pub mod command;
mod error;
pub mod inline;
pub mod parse;

pub use error::{Error, Result};
