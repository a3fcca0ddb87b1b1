//! The sled engine: records in sled 0.34 trees, durable through group
//! commit.
//!
//! Trees: `objects` (hash-prefixed key -> record), `meta` (name -> framed
//! value), `corrupt` (user key -> raw bytes of a quarantined record),
//! `hints` (owner + hash-prefixed key -> hint record). A read-modify-write
//! is a sled compare-and-swap in a retry loop (`objects`: under the lock of
//! the key's digest segment, see `objects.rs`; `hints`: see `hints.rs`), so
//! no update is ever lost. `clean_close` (a one-row tree) holds, between
//! a clean close and the next open, the object count and segment digests
//! ([`crate::clean_close`]), which an open that loads them verifies in the
//! background (`verify.rs`).

use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

use kv_types::{NodeId, Object};

use crate::group_commit::GroupCommit;
use crate::hint::{self, HintIter};
use crate::plan;
use crate::record::{self, RecordError};
use crate::sled_db::{SavedDigests, Shared};
use crate::space::FreeSpace;
use crate::storage::{Prior, ScanIter, Storage, StorageStats};
use crate::{Durable, Error, Result, SledSettings, keyspace};

mod hints;
mod objects;
mod verify;

/// A [`Storage`] engine on sled 0.34. Closing it ([`Storage::close`]) or
/// dropping it stops its threads after a final flush, saves its object
/// count and segment digests for the next open (when they are known to
/// match the records, [`SavedDigests`]), and closes the database.
#[derive(Debug)]
pub struct SledEngine {
    /// The database, its failure state and the group commit, shared with
    /// the flusher thread.
    shared: Arc<Shared>,
    /// The free-space reserve writes that grow the store are checked
    /// against.
    space: FreeSpace,
    /// The flusher thread and, after an open that loaded saved digests,
    /// the thread verifying them; `None` once closed (the lock is held for
    /// the whole close, so a second close waits for the first).
    threads: Mutex<Option<Threads>>,
}

impl SledEngine {
    /// Opens (or creates) the database in directory `path` and starts its
    /// flusher thread.
    ///
    /// # Errors
    /// [`Error::Damaged`] when sled reports corruption in the directory's
    /// files; [`Error::Io`] when sled cannot open the directory otherwise
    /// (missing permissions, another process holds it), when its
    /// filesystem cannot be measured or is not larger than
    /// [`SledSettings::min_free_bytes`], or when the flusher thread cannot
    /// be spawned.
    pub fn open(path: impl AsRef<Path>, config: SledSettings) -> Result<Self> {
        let commit = GroupCommit::new(
            config.sync_writes,
            Duration::from_millis(config.flush_every_ms.max(1)),
        )
        .with_window(Duration::from_micros(config.commit_window_us));
        std::fs::create_dir_all(path.as_ref())
            .map_err(|e| Error::Io(format!("creating {}: {e}", path.as_ref().display())))?;
        let space = FreeSpace::new(path.as_ref(), config.min_free_bytes)?;
        let shared = Arc::new(Shared::open(
            path.as_ref().to_path_buf(),
            config.cache_capacity_bytes,
            Duration::from_millis(config.reopen_interval_ms),
            commit,
        )?);
        let flusher = {
            let shared = shared.clone();
            std::thread::Builder::new()
                .name("kv-storage-flusher".into())
                .spawn(move || run_flusher(&shared))
                .map_err(|e| Error::Io(format!("spawning the flusher thread: {e}")))?
        };
        let verifier = if *shared.verification() == SavedDigests::Verifying {
            let shared = shared.clone();
            let spawned = std::thread::Builder::new()
                .name("kv-storage-verify".into())
                .spawn(move || verify::run(&shared));
            match spawned {
                Ok(handle) => Some(handle),
                Err(e) => {
                    // Unverified digests are still the best there is; the
                    // next close saves nothing, and the next open counts.
                    tracing::warn!(err = %e, "cannot spawn the digest verification thread");
                    None
                }
            }
        } else {
            None
        };
        Ok(SledEngine {
            shared,
            space,
            threads: Mutex::new(Some(Threads { flusher, verifier })),
        })
    }

    /// Test hook: closes like [`Storage::close`] but without saving the
    /// count and digests, as a crash would leave the directory (the next
    /// open counts every record).
    #[doc(hidden)]
    pub fn close_without_saving(&self) -> Result<()> {
        self.shutdown(false)
    }

    /// Whether this open counted every record or loaded the object count
    /// and segment digests saved by the last clean close, and whether the
    /// background walk that verifies loaded ones has found them right.
    pub fn saved_digests(&self) -> SavedDigests {
        *self.shared.verification()
    }

    /// Stops the verifier and the flusher, flushes, and closes; `save`:
    /// keep the count and digests for the next open. Only the first call
    /// does anything; a second one waits for it.
    fn shutdown(&self, save: bool) -> Result<()> {
        let mut threads = self.threads.lock().unwrap_or_else(PoisonError::into_inner);
        let Some(Threads { flusher, verifier }) = threads.take() else {
            return Ok(());
        };
        self.shared.closing.store(true, Ordering::Release);
        if let Some(verifier) = verifier
            && verifier.join().is_err()
        {
            tracing::error!("the digest verification thread panicked");
        }
        self.shared.commit.stop();
        if flusher.join().is_err() {
            tracing::error!("the storage flusher thread panicked");
        }
        let result = match self.shared.read().as_ref() {
            Some(trees) => trees
                .db
                .flush()
                .map(drop)
                .map_err(|e| Error::sled("final flush", &e)),
            None => Ok(()),
        };
        self.shared.close(save && result.is_ok());
        result
    }

    /// Raw bytes quarantined for `key`, if any (for tests and tooling).
    ///
    /// # Errors
    /// [`Error::Io`] on disk failure.
    pub fn quarantined(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.shared.with_trees(|t| {
            t.corrupt
                .get(key)
                .map(|v| v.map(|v| v.to_vec()))
                .map_err(|e| self.shared.fail("read corrupt", &e))
        })
    }

    /// Number of times the database was reopened after an I/O error.
    pub fn reopens(&self) -> u64 {
        self.shared.reopens.load(Ordering::Relaxed)
    }

    /// Test hook: damages the stored record of `key` (flips every bit of one
    /// byte in its middle) so that its checksum fails. Returns whether a
    /// record was there.
    #[doc(hidden)]
    pub fn corrupt_for_test(&self, key: &[u8]) -> Result<bool> {
        let disk_key = keyspace::disk_key(key);
        self.shared.with_trees(|t| {
            let fail = |e: sled::Error| self.shared.fail("corrupt", &e);
            let Some(raw) = t.objects.get(&disk_key).map_err(fail)? else {
                return Ok(false);
            };
            let mut raw = raw.to_vec();
            let i = raw.len() / 2;
            raw[i] ^= 0xFF;
            t.objects.insert(disk_key.as_slice(), raw).map_err(fail)?;
            Ok(true)
        })
    }

    /// Test hook: report `free` bytes of free space instead of measuring
    /// the filesystem (`None`: measure again), at once.
    #[doc(hidden)]
    pub fn set_free_bytes_for_test(&self, free: Option<u64>) {
        self.space.force(free);
    }

    /// Test hook: behaves as if sled had just reported an I/O error, so the
    /// next operation reopens the database.
    #[doc(hidden)]
    pub fn fail_for_test(&self) {
        self.shared.fail_for_test();
    }
}

/// The engine's own threads.
#[derive(Debug)]
struct Threads {
    flusher: JoinHandle<()>,
    verifier: Option<JoinHandle<()>>,
}

impl Drop for SledEngine {
    fn drop(&mut self) {
        // Not while a panic unwinds: a write it interrupted may have left a
        // digest behind its record; the next open counts instead.
        if let Err(e) = self.shutdown(!std::thread::panicking()) {
            tracing::error!(err = %e, "closing the sled database failed");
        }
    }
}

/// The flusher thread: one flush per batch of applied writes, until stopped
/// (the last batch after the stop request is the final flush).
fn run_flusher(shared: &Shared) {
    /// Fails pending writes when the thread ends, even by a panic in sled.
    struct Exit<'a>(&'a GroupCommit);
    impl Drop for Exit<'_> {
        fn drop(&mut self) {
            self.0.flusher_exited();
        }
    }
    let _exit = Exit(&shared.commit);
    while let Some(batch) = shared.commit.next_batch() {
        let outcome = match shared.read().as_ref() {
            Some(trees) => trees.db.flush().map(drop).map_err(|e| {
                shared.fail("flush", &e);
                e.to_string()
            }),
            None => Err("database is closed or failed to reopen".to_string()),
        };
        shared.commit.finish(batch, outcome);
    }
}

impl Storage for SledEngine {
    fn get(&self, key: &[u8]) -> Result<Option<Object>> {
        let raw = self.shared.with_trees(|t| {
            t.objects
                .get(keyspace::disk_key(key))
                .map_err(|e| self.shared.fail("get", &e))
        })?;
        raw.map(|raw| plan::decode_for(key, &raw))
            .transpose()
            .inspect_err(|_| self.resync_key(key))
    }

    fn update(
        &self,
        key: &[u8],
        f: &mut dyn FnMut(Option<&Object>) -> Result<Object>,
    ) -> Result<Object> {
        self.space.check()?;
        let (object, ticket) = self
            .shared
            .with_trees(|t| self.apply_update(t, key, &mut |prior| f(prior.object())))?;
        self.shared.commit.acknowledge(ticket)?;
        Ok(object)
    }

    fn update_deferred_prior(
        &self,
        key: &[u8],
        f: &mut dyn FnMut(Prior<'_>) -> Result<Object>,
    ) -> Result<(Object, Durable)> {
        self.space.check()?;
        let (object, ticket) = self.shared.with_trees(|t| self.apply_update(t, key, f))?;
        Ok((object, Durable::pending(self.shared.commit.clone(), ticket)))
    }

    fn scan(&self, from_hash: u64, to_hash_inclusive: u64) -> ScanIter<'_> {
        let Some(range) = keyspace::hash_range(from_hash, to_hash_inclusive) else {
            return Box::new(std::iter::empty());
        };
        let tree = match self.shared.with_trees(|t| Ok(t.objects.clone())) {
            Ok(tree) => tree,
            Err(e) => return Box::new(std::iter::once(Err(e))),
        };
        Box::new(tree.range(range).map(move |row| {
            let (disk_key, raw) = row.map_err(|e| self.shared.fail("scan", &e))?;
            let key = keyspace::user_key(&disk_key).ok_or_else(|| Error::Corrupt {
                key: disk_key.to_vec(),
                reason: RecordError::Misplaced,
            })?;
            let object = plan::decode_for(key, &raw).inspect_err(|_| self.resync_key(key))?;
            Ok((key.to_vec(), object))
        }))
    }

    fn remove_if(&self, key: &[u8], expected: &Object) -> Result<bool> {
        match self
            .shared
            .with_trees(|t| self.apply_remove_if(t, key, expected))?
        {
            Some(ticket) => self.shared.commit.acknowledge(ticket).map(|()| true),
            None => Ok(false),
        }
    }

    fn get_meta(&self, name: &str) -> Result<Option<Vec<u8>>> {
        let raw = self.shared.with_trees(|t| {
            t.meta
                .get(name)
                .map_err(|e| self.shared.fail("get meta", &e))
        })?;
        raw.map(|raw| plan::unframe_meta(name, &raw)).transpose()
    }

    fn put_meta(&self, name: &str, value: &[u8]) -> Result<()> {
        let ticket = self.shared.with_trees(|t| {
            let write = self.shared.commit.begin();
            t.meta
                .insert(name, record::frame(value))
                .map_err(|e| self.shared.fail("put meta", &e))?;
            Ok(write.applied())
        })?;
        self.shared.commit.acknowledge(ticket)
    }

    fn flush(&self) -> Result<()> {
        let ticket = self
            .shared
            .with_trees(|_| Ok(self.shared.commit.observed()))?;
        self.shared.commit.wait_durable(ticket)
    }

    /// Stops the flusher, flushes a last time, saves the object count and
    /// segment digests for the next open (unless [`SavedDigests`] says they
    /// are not known to match the records) and closes the database; later
    /// calls on the engine fail with [`Error::Unavailable`], a second close
    /// does nothing.
    ///
    /// # Errors
    /// [`Error::Io`] if the final flush failed (writes acknowledged earlier
    /// were already durable; only unacknowledged ones may be lost; nothing
    /// is saved then, and the next open counts).
    fn close(&self) -> Result<()> {
        self.shutdown(true)
    }

    fn stats(&self) -> StorageStats {
        let bytes_on_disk = self
            .shared
            .read()
            .as_ref()
            .and_then(|t| t.db.size_on_disk().ok())
            .unwrap_or(0);
        let c = self.shared.commit.counters();
        StorageStats {
            keys: self.shared.keys.load(Ordering::Relaxed),
            bytes_on_disk,
            corrupt_quarantined: self.shared.quarantined.load(Ordering::Relaxed),
            writes: c.writes,
            flushes: c.flushes,
            writes_per_flush: if c.flushes == 0 {
                0.0
            } else {
                c.writes_flushed as f64 / c.flushes as f64
            },
            failed: self.shared.is_failed(),
            disk_full: self.space.is_full(),
            free_bytes: self.space.free_bytes(),
        }
    }

    fn backlog(&self) -> u64 {
        self.shared.commit.counters().unflushed
    }

    fn put_hint(&self, owner: &NodeId, key: &[u8], object: &Object, now_ms: u64) -> Result<()> {
        self.space.check()?;
        let ticket = self
            .shared
            .with_trees(|t| self.apply_put_hint(t, owner, key, object, now_ms))?;
        self.shared.commit.acknowledge(ticket)
    }

    fn hints(&self) -> HintIter<'_> {
        self.hint_rows(Vec::new())
    }

    fn hints_for(&self, owner: &NodeId) -> HintIter<'_> {
        self.hint_rows(hint::owner_prefix(owner))
    }

    fn remove_hint_if(&self, owner: &NodeId, key: &[u8], expected: &Object) -> Result<bool> {
        match self
            .shared
            .with_trees(|t| self.apply_remove_hint_if(t, owner, key, expected))?
        {
            Some(ticket) => self.shared.commit.acknowledge(ticket).map(|()| true),
            None => Ok(false),
        }
    }

    fn hint_count(&self) -> u64 {
        self.shared.hints.load(Ordering::Relaxed)
    }

    fn segment_digests(&self, first_segment: u32, count: u32) -> Vec<u64> {
        self.shared.segments.snapshot(first_segment, count)
    }

    fn key_digests(&self, from_hash: u64, to_hash_inclusive: u64) -> Result<Vec<(Vec<u8>, u64)>> {
        self.shared
            .with_trees(|t| self.list_key_digests(t, from_hash, to_hash_inclusive))
    }
}
