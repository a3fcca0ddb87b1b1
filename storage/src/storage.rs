//! The `Storage` trait every engine implements, and the figures it reports.

use kv_types::Object;

use crate::Result;

/// A boxed iterator over `(user key, object)` pairs, as returned by
/// [`Storage::scan`].
pub type ScanIter<'a> = Box<dyn Iterator<Item = Result<(Vec<u8>, Object)>> + 'a>;

/// A replica's durable store of objects (all versions of a key with their
/// causal history) and of a few named metadata values.
///
/// Every method is synchronous and may block on disk I/O: async callers run
/// writes inside `tokio::task::spawn_blocking`. Every write method returns
/// only once its effect is durable (unless the engine was configured to
/// relax that, see [`crate::SledConfig::sync_writes`]). Keys are arbitrary
/// bytes; their bounds are checked at the node's doors, not here.
pub trait Storage: Send + Sync + 'static {
    /// Reads the object stored under `key`; `Ok(None)` when absent.
    ///
    /// # Errors
    /// [`crate::Error::Corrupt`] when the stored record fails its checks
    /// (it is reported, never served; the caller repairs the key from
    /// another replica); [`crate::Error::Io`] when the engine cannot read.
    fn get(&self, key: &[u8]) -> Result<Option<Object>>;

    /// Atomic, durable read-modify-write of one key.
    ///
    /// `f` receives the stored object (`None` when absent) and returns the
    /// object to store. `f` may run more than once when another writer
    /// races on the same key, so it must be pure. If the result equals the
    /// stored object nothing is written (the call still waits until
    /// whatever it read is durable). A stored record that fails its checks
    /// is quarantined (copied to the `corrupt` tree, logged, counted) and
    /// `f` sees `None`, so the write repairs the key.
    ///
    /// Returns the object now stored.
    ///
    /// # Errors
    /// Whatever `f` returns (nothing is written then; use
    /// [`crate::Error::Rejected`] for refusals); [`crate::Error::Encode`]
    /// when the result cannot be encoded; [`crate::Error::Io`] when the
    /// write could not be applied or made durable (its outcome is unknown).
    fn update(
        &self,
        key: &[u8],
        f: &mut dyn FnMut(Option<&Object>) -> Result<Object>,
    ) -> Result<Object>;

    /// Merges a replica's `incoming` object into the stored one
    /// (`stored.sync(incoming)`, absent = empty), atomically and durably.
    /// Returns the merged object. Skips the write when nothing changes.
    ///
    /// # Errors
    /// As [`Storage::update`].
    fn merge(&self, key: &[u8], incoming: &Object) -> Result<Object> {
        self.update(key, &mut |stored| {
            Ok(match stored {
                Some(stored) => stored.sync(incoming),
                None => incoming.clone(),
            })
        })
    }

    /// Iterates over the keys whose `kv_types::key_hash` lies in
    /// `from_hash..=to_hash_inclusive`, in hash order (ties in key order).
    /// Ranges do not wrap: `from_hash > to_hash_inclusive` yields nothing.
    ///
    /// The iterator is not a snapshot: writes that land during the scan may
    /// or may not be seen. A record that fails its checks is yielded as
    /// [`crate::Error::Corrupt`] and the scan goes on with the next key.
    fn scan(&self, from_hash: u64, to_hash_inclusive: u64) -> ScanIter<'_>;

    /// Deletes the record of `key` only if it still equals `expected` (used
    /// to purge tombstones once every replica has them). Durable before it
    /// returns. Returns whether the record was removed.
    ///
    /// # Errors
    /// [`crate::Error::Corrupt`] when the stored record fails its checks
    /// (it is left in place); [`crate::Error::Io`] on disk failure.
    fn remove_if(&self, key: &[u8], expected: &Object) -> Result<bool>;

    /// Reads the metadata value `name` (node incarnation, persisted ring).
    ///
    /// # Errors
    /// [`crate::Error::Corrupt`] (with `name` as the key) when the stored
    /// value fails its checksum; [`crate::Error::Io`] on disk failure.
    fn get_meta(&self, name: &str) -> Result<Option<Vec<u8>>>;

    /// Stores the metadata value `name`, durably.
    ///
    /// # Errors
    /// [`crate::Error::Io`] on disk failure.
    fn put_meta(&self, name: &str, value: &[u8]) -> Result<()>;

    /// Makes every write applied so far durable now (used at shutdown and
    /// when writes are not synchronous).
    ///
    /// # Errors
    /// [`crate::Error::Io`] on disk failure.
    fn flush(&self) -> Result<()>;

    /// Current figures of this engine, for metrics.
    fn stats(&self) -> StorageStats;
}

/// Figures an engine reports (all counters since the engine was opened).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StorageStats {
    /// Objects stored (exact: counted at open, then kept up to date by every
    /// insert and removal).
    pub keys: u64,
    /// Size of the engine's files, in bytes (sled's `size_on_disk`; 0 for
    /// the memory engine).
    pub bytes_on_disk: u64,
    /// Corrupt records found by a write and moved to the `corrupt` tree.
    pub corrupt_quarantined: u64,
    /// Writes applied (inserts, removals and metadata writes).
    pub writes: u64,
    /// Flushes to disk completed (each one an fsync shared by every write
    /// applied before it began; 0 for the memory engine).
    pub flushes: u64,
    /// Average number of writes made durable per flush: the group-commit
    /// batch size (0 when no flush happened yet).
    pub writes_per_flush: f64,
    /// Whether the engine is failed and waiting to reopen its files.
    pub failed: bool,
}
