//! The incarnation of this node's clock actor, and why it changes.
//!
//! An actor is the node id plus an incarnation. A dot `(actor, n)` in a
//! key's clock says that every event `1..=n` of that actor for the key was
//! seen, so a replica may issue a dot for a key only while its stored
//! clock of the key holds every dot its actor ever issued for it: the next
//! dot is drawn above the local counter (or the node's counter floor,
//! [`super::DotFloor`]) and covers every lower one.
//!
//! A replica that lost its record of a key breaks that rule. When a
//! damaged record is repaired from another replica that lacks this node's
//! newest dot of the key (the copy had not reached it), the next dot this
//! node issues for the key covers that lost dot, and every merge then
//! discards its value, an acknowledged write (found by the simulation,
//! seed 665). Riak hit the same problem (basho/riak_kv issue 679, "kv679":
//! a vnode that lost a key's data re-issued old dots under its unchanged
//! vnode id) and fixed it with actor epochs: a vnode that finds it lost a
//! key's data takes a new vnode id (a new epoch, persisted before use)
//! for the events it coordinates from then on, since dots of a fresh
//! actor cover nothing issued before. Here the epoch is the incarnation:
//! the data directory's first one is drawn when it is created (a wiped
//! node is a new actor), and the replica draws a new one, durably, before
//! it overwrites a damaged record (`Replica::retire_actor`).

use kv_storage::Storage;

use crate::datadir::INCARNATION_META;
#[cfg(test)]
use crate::{Error, Result};

/// The incarnation of this data directory: the stored one, or `fresh`
/// (stored durably first) for a new data directory. The outer error is
/// storage's, the inner one an unreadable record. (Tests only: a node
/// opens its data directory through `datadir::open`, which also checks
/// whose it is.)
#[cfg(test)]
pub(crate) fn load(storage: &dyn Storage, fresh: u64) -> kv_storage::Result<Result<u64>> {
    if let Some(bytes) = storage.get_meta(INCARNATION_META)? {
        return Ok(<[u8; 8]>::try_from(bytes.as_slice())
            .map(u64::from_be_bytes)
            .map_err(|_| {
                Error::invalid(format!(
                    "the stored incarnation is {} bytes, not 8",
                    bytes.len()
                ))
            }));
    }
    store(storage, fresh)?;
    tracing::info!(
        incarnation = format!("{fresh:016x}"),
        "new data directory: new incarnation"
    );
    Ok(Ok(fresh))
}

/// Makes `incarnation` the current one, durably.
pub(crate) fn store(storage: &dyn Storage, incarnation: u64) -> kv_storage::Result<()> {
    storage.put_meta(INCARNATION_META, &incarnation.to_be_bytes())
}
