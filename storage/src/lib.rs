//! Durable storage of one replica: the objects (all versions of a key with
//! their causal history) this node holds, and a few named metadata values.
//!
//! Its one job is to keep what it acknowledged: a write method returns only
//! once its effect is on disk (group commit shares one flush among
//! concurrent writers), and a record that fails its checksum is reported,
//! never served. Inputs are [`kv_types::Object`]s and byte keys; outputs are
//! the same objects, merged causally ([`Storage::merge`]) or updated
//! atomically by the caller's function ([`Storage::update`]).
//!
//! - [`Storage`]: the trait the node programs against.
//! - [`SledEngine`]: sled 0.34, with a small page cache, group commit, and
//!   reopen after sled latches an I/O error.
//! - [`MemoryEngine`]: the same records in memory, for tests.
//! - [`record`]: the on-disk record format (format byte, codec, crc32).
//! - [`ReadCache`]: the LRU read cache in front of an engine, with its hit
//!   ratio and hot keys.
//! - Hints ([`Hint`], [`Storage::put_hint`]): writes kept for a replica
//!   that was down, in their own tree, until handed off.
//! - [`digest`]: anti-entropy digests, one per 1/65536 of the key-hash
//!   space, kept in memory and up to date by every write
//!   ([`Storage::segment_digests`], [`Storage::key_digests`]).
//!
//! Records are keyed by `key_hash(key)` (8 bytes, big endian) followed by
//! the key, so a ring partition is one contiguous range ([`Storage::scan`]).
//!
//! This crate is synchronous: it must not depend on tokio, quinn or
//! chitchat (async callers use `spawn_blocking`), nor on the router or
//! gossip crates.
//!
//! ```
//! use kv_storage::{MemoryEngine, Storage};
//! use kv_types::{Actor, NodeId, Object, Sibling, VersionVector};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let store = MemoryEngine::new();
//! let actor = Actor { node: NodeId::new("node1")?, incarnation: 1 };
//! let put = |stored: Option<&Object>| {
//!     let stored = stored.cloned().unwrap_or_default();
//!     let value = Sibling { data: Some(b"v".to_vec()), written_at_ms: 0 };
//!     Ok(stored.update(&VersionVector::new(), &actor, value))
//! };
//! store.update(b"k", &mut { put })?;
//! let object = store.get(b"k")?.expect("just written");
//! assert_eq!(object.live_values().collect::<Vec<_>>(), vec![&b"v"[..]]);
//! # Ok(())
//! # }
//! ```

mod cache;
mod clean_close;
pub mod digest;
mod durable;
mod error;
mod group_commit;
mod hint;
mod keyspace;
mod memory;
mod plan;
pub mod record;
mod segments;
mod sled_config;
mod sled_db;
mod sled_engine;
mod space;
mod storage;

pub use cache::{CacheStats, HOT_KEY_SLOTS, ReadCache};
pub use digest::{SEGMENTS, combine, item_digest};
pub use durable::Durable;
pub use error::{Error, Result};
pub use hint::{Hint, HintIter};
pub use memory::{CrashLoss, FlushFault, MemoryEngine};
pub use sled_config::{DEFAULT_MIN_FREE_BYTES, SledSettings};
pub use sled_db::SavedDigests;
pub use sled_engine::SledEngine;
pub use storage::{Prior, ScanIter, Storage, StorageStats};
