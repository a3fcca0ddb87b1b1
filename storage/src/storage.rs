//! The `Storage` trait every engine implements, and the figures it reports.

use kv_types::{NodeId, Object};

use crate::hint::HintIter;
use crate::record::RecordError;
use crate::{Durable, Result};

/// A boxed iterator over `(user key, object)` pairs, as returned by
/// [`Storage::scan`].
pub type ScanIter<'a> = Box<dyn Iterator<Item = Result<(Vec<u8>, Object)>> + 'a>;

/// What an update found under its key: the closure of
/// [`Storage::update_deferred_prior`] is told an absent key from a damaged
/// record, which [`Storage::update`] shows alike as `None`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Prior<'a> {
    /// Nothing is stored under the key.
    Absent,
    /// The stored object.
    Stored(&'a Object),
    /// A record is stored but fails this check (it is quarantined when
    /// the update writes; nothing is written when the closure refuses).
    Damaged(&'a RecordError),
}

impl<'a> Prior<'a> {
    /// The stored object, `None` when absent or damaged.
    pub fn object(self) -> Option<&'a Object> {
        match self {
            Prior::Stored(object) => Some(object),
            Prior::Absent | Prior::Damaged(_) => None,
        }
    }
}

/// A replica's durable store of objects (all versions of a key with their
/// causal history) and of a few named metadata values.
///
/// Every method is synchronous and may block on disk I/O: async callers run
/// writes inside `tokio::task::spawn_blocking`. Every write method returns
/// only once its effect is durable (unless the engine was configured to
/// relax that, see [`crate::SledSettings::sync_writes`]). Keys are arbitrary
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
    /// when the result cannot be encoded; [`crate::Error::Unavailable`]
    /// when the engine applied nothing (failed and reopening, or closed);
    /// [`crate::Error::Io`] when the write could not be applied or made
    /// durable (its outcome is unknown).
    fn update(
        &self,
        key: &[u8],
        f: &mut dyn FnMut(Option<&Object>) -> Result<Object>,
    ) -> Result<Object>;

    /// [`Storage::update`] without the wait: the write is applied (visible
    /// to readers) when this returns, and the returned [`Durable`] resolves
    /// once it is durable. Nothing may acknowledge the write before then.
    /// The apply itself is short (sled's page cache and log buffer; a page
    /// not in the cache costs one disk read), so async callers may run it
    /// on their worker and await the [`Durable`] instead of parking a
    /// blocking-pool thread on the group commit.
    ///
    /// # Errors
    /// As [`Storage::update`], for the apply; the [`Durable`] carries the
    /// flush's outcome.
    fn update_deferred(
        &self,
        key: &[u8],
        f: &mut dyn FnMut(Option<&Object>) -> Result<Object>,
    ) -> Result<(Object, Durable)> {
        self.update_deferred_prior(key, &mut |prior| f(prior.object()))
    }

    /// [`Storage::update_deferred`] whose closure is told what the key held
    /// ([`Prior`]): a caller that must not write over a damaged record
    /// without knowing it refuses in the closure, in one read-modify-write
    /// instead of a refused update and a separate read.
    ///
    /// # Errors
    /// As [`Storage::update_deferred`].
    fn update_deferred_prior(
        &self,
        key: &[u8],
        f: &mut dyn FnMut(Prior<'_>) -> Result<Object>,
    ) -> Result<(Object, Durable)>;

    /// [`Storage::merge`] without the wait, as [`Storage::update_deferred`].
    ///
    /// # Errors
    /// As [`Storage::update_deferred`].
    fn merge_deferred(&self, key: &[u8], incoming: &Object) -> Result<(Object, Durable)> {
        self.update_deferred(key, &mut |stored| {
            Ok(match stored {
                Some(stored) => stored.sync(incoming),
                None => incoming.clone(),
            })
        })
    }

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

    /// The last call at shutdown: makes every write applied so far durable
    /// and closes the engine. The sled engine also saves its object count and
    /// segment digests there, so that its next open does not scan every
    /// record ([`crate::SledEngine`]); later calls on it fail with
    /// [`crate::Error::Unavailable`]. The default (the memory engine) only
    /// flushes.
    ///
    /// # Errors
    /// [`crate::Error::Io`] if the final flush failed.
    fn close(&self) -> Result<()> {
        self.flush()
    }

    /// Current figures of this engine, for metrics. May walk the engine's
    /// files (its size on disk): not for every request.
    fn stats(&self) -> StorageStats;

    /// Writes applied and not yet made durable (the flush backlog): cheap,
    /// for the router's load report. 0 for engines that flush at once.
    fn backlog(&self) -> u64 {
        0
    }

    /// Stores a hint: `object` is a write meant for `owner` (a replica that
    /// was down), kept here until handed off. Merges (`DvvSet::sync`) into
    /// the hint already held for (`owner`, `key`), keeping its creation
    /// time; otherwise creates it with `created_at_ms = now_ms` (ms since
    /// the Unix epoch). A stored hint that fails its checks is replaced.
    /// An empty `object` over no hint stores nothing. Durable before it
    /// returns. Hints never mix with this node's objects (own tree; no key
    /// count, scan, digest or read sees them). Their count and age bounds
    /// are enforced by the node, not here.
    ///
    /// # Errors
    /// [`crate::Error::Encode`]; [`crate::Error::Io`] as for
    /// [`Storage::update`].
    fn put_hint(&self, owner: &NodeId, key: &[u8], object: &Object, now_ms: u64) -> Result<()>;

    /// Iterates over every hint, grouped by owner (owners ordered by id
    /// length, then bytes; an owner's hints in key-hash order). Not a
    /// snapshot. A hint that fails its checks is yielded as
    /// [`crate::Error::Corrupt`] (naming its user key) and skipped, never
    /// delivered; it stays stored until a `put_hint` for the same owner and
    /// key replaces it.
    fn hints(&self) -> HintIter<'_>;

    /// Iterates over the hints for `owner` only, as [`Storage::hints`].
    fn hints_for(&self, owner: &NodeId) -> HintIter<'_>;

    /// Deletes the hint for (`owner`, `key`) only if its object still
    /// equals `expected` (what was delivered and acknowledged by `owner`):
    /// a merge that landed since delivery keeps the hint for the next
    /// round. Durable before it returns. Returns whether it was removed.
    ///
    /// # Errors
    /// [`crate::Error::Corrupt`] when the stored hint fails its checks (it
    /// is left in place); [`crate::Error::Io`] on disk failure.
    fn remove_hint_if(&self, owner: &NodeId, key: &[u8], expected: &Object) -> Result<bool>;

    /// Number of hints stored, corrupt ones included (exact: counted at
    /// open, then kept up to date by every insert and removal).
    fn hint_count(&self) -> u64;

    /// Anti-entropy digests of `count` consecutive segments from
    /// `first_segment` (see [`crate::digest`]; fewer when the range passes
    /// the last of the [`crate::digest::SEGMENTS`] segments). Each is the
    /// wrapping sum of [`crate::digest::item_digest`] over the readable
    /// records of its segment, kept up to date by every write; a ring
    /// partition's segments are [`crate::digest::partition_segments`].
    /// Read from memory: no I/O.
    fn segment_digests(&self, first_segment: u32, count: u32) -> Vec<u64>;

    /// The key and item digest of every readable record whose key hash lies
    /// in `from_hash..=to_hash_inclusive`, in hash order (to drill into a
    /// differing segment). A record that fails its checks contributes no
    /// digest: it is logged, not returned as an error, so that the peer's
    /// version looks missing here and the exchange repairs it (and its
    /// segment digest is recomputed).
    ///
    /// # Errors
    /// [`crate::Error::Io`] when the engine cannot read.
    fn key_digests(&self, from_hash: u64, to_hash_inclusive: u64) -> Result<Vec<(Vec<u8>, u64)>>;
}

/// Figures an engine reports (all counters since the engine was opened).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StorageStats {
    /// Objects stored (exact: counted at open, or loaded from the last
    /// clean close and verified in the background, then kept up to date by every
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
    /// Whether writes are refused because free space is below the reserve
    /// ([`crate::Error::DiskFull`]).
    pub disk_full: bool,
    /// Free bytes of the filesystem holding the engine's files, at most
    /// 250 ms old (`None` for the memory engine, or when it cannot be
    /// measured).
    pub free_bytes: Option<u64>,
}
