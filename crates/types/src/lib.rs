//! The shared vocabulary of the store: node identities, membership records,
//! key and value bounds, causal metadata (dotted version vectors) and the one
//! codec every crate uses to turn these into bytes.
//!
//! Inputs: nothing but values. Outputs: plain data types with `serde`
//! derives, pure functions over them, and [`codec`] which pins the single
//! bincode configuration of the project (a later swap to another format is a
//! change to that one file).
//!
//! This crate does no I/O and must not depend on tokio, quinn, sled or
//! chitchat: storage, router, gossip, the wire protocol and the node all
//! build on it.

pub mod codec;
pub mod dvv;
mod error;
pub mod hash;
pub mod limits;
pub mod node;
pub mod object;

pub use dvv::{Actor, DvvSet, VersionVector};
pub use error::{Error, Result};
pub use hash::key_hash;
pub use node::{Member, NodeId, NodeStatus};
pub use object::{Object, Sibling};
