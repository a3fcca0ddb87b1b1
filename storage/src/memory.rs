//! The in-memory engine: the same records as on disk, in maps under one
//! mutex. For tests and simulations; nothing survives the process.
//!
//! It stores *encoded* records (format byte, codec, crc32) under the same
//! hash-prefixed keys as the sled engine, so checksums, corruption,
//! quarantine, scan order, hints and digests behave exactly as they do on
//! disk.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::sync::{Mutex, MutexGuard, PoisonError};

use kv_types::{NodeId, Object, key_hash};

use crate::digest::{item_digest, segment_hashes, segment_of};
use crate::hint::HintIter;
use crate::plan::{self, Outcome};
use crate::segments::{self, Row, SegmentTable};
use crate::storage::{Prior, ScanIter, Storage, StorageStats};
use crate::{Durable, Result, keyspace, record};

mod hints;
mod journal;

pub(crate) use journal::Commit;
pub use journal::{CrashLoss, FlushFault};
use journal::{Journal, Tree};

/// An engine that keeps everything in memory. Every write is "durable" the
/// moment it returns (there is nothing to flush), unless the engine is
/// [`MemoryEngine::journaled`]: then a crash loses a seeded suffix of the
/// writes not yet flushed (see `journal`).
#[derive(Debug, Default)]
pub struct MemoryEngine {
    /// Everything, behind one lock: read-modify-writes run under it, which
    /// makes them atomic without retries.
    state: Mutex<State>,
    /// Segment digests; changed only while `state` is locked, so they
    /// always match `state.objects` once the lock is released.
    segments: SegmentTable,
}

#[derive(Debug, Default)]
struct State {
    /// On-disk key (hash prefix + key) -> encoded record.
    objects: BTreeMap<Vec<u8>, Vec<u8>>,
    /// Metadata name -> framed value.
    meta: BTreeMap<String, Vec<u8>>,
    /// User key -> raw bytes of the last corrupt record quarantined.
    corrupt: BTreeMap<Vec<u8>, Vec<u8>>,
    /// On-disk hint key (owner prefix + hash prefix + key) -> hint record.
    hints: BTreeMap<Vec<u8>, Vec<u8>>,
    /// Counters for [`StorageStats`].
    quarantined: u64,
    writes: u64,
    /// Simulated durability: the undo records of unflushed writes
    /// (`None`: every write is final at once).
    journal: Option<Journal>,
    /// The engine crashed ([`MemoryEngine::crash`]): every call fails.
    closed: bool,
    /// Simulated full disk ([`MemoryEngine::set_disk_full_for_test`]):
    /// writes that grow the store are refused.
    disk_full: bool,
}

impl MemoryEngine {
    /// An empty engine.
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // Every mutation is a single map operation done after all fallible
        // work, so a panic in a caller's closure leaves the state coherent.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The state, or the error of a crashed engine.
    fn open_lock(&self) -> Result<MutexGuard<'_, State>> {
        let state = self.lock();
        if state.closed {
            return Err(crate::Error::Unavailable(
                "the engine crashed (simulated): its process is gone".into(),
            ));
        }
        Ok(state)
    }

    /// Refuses a write that grows the store while the simulated disk is
    /// full.
    fn check_space(&self) -> Result<()> {
        if self.lock().disk_full {
            return Err(crate::Error::DiskFull {
                free_bytes: 0,
                reserve_bytes: crate::DEFAULT_MIN_FREE_BYTES,
            });
        }
        Ok(())
    }

    /// Test hook: simulates a disk whose free space is below the reserve
    /// (`true`: `update`, `merge` and `put_hint` fail with
    /// [`crate::Error::DiskFull`], as the sled engine's do) or back above
    /// it (`false`).
    #[doc(hidden)]
    pub fn set_disk_full_for_test(&self, full: bool) {
        self.lock().disk_full = full;
    }

    /// After a write that promises durability on return: flushes a
    /// journaled engine (a no-op otherwise).
    fn durable_now(&self) -> Result<()> {
        self.flush_journal()
    }

    /// Applies a read-modify-write of `key` under the lock (journaled).
    fn apply(&self, key: &[u8], f: &mut dyn FnMut(Prior<'_>) -> Result<Object>) -> Result<Object> {
        let disk_key = keyspace::disk_key(key);
        let mut state = self.open_lock()?;
        let raw = state.objects.get(&disk_key).map(Vec::as_slice);
        match plan::plan(key, raw, f)? {
            Outcome::Unchanged(object) => Ok(object),
            Outcome::Write {
                object,
                record,
                replaces_corrupt,
                old_digest,
                new_digest,
            } => {
                let segment = segment_of(key_hash(key));
                let old = state.objects.insert(disk_key.clone(), record);
                state.journal(Tree::Objects, &disk_key, old.clone());
                segments::apply(
                    &mut self.segments.lock(segment),
                    old_digest,
                    Some(new_digest),
                );
                if let (Some(reason), Some(old)) = (replaces_corrupt, old) {
                    plan::log_quarantine(key, &reason);
                    state.corrupt.insert(key.to_vec(), old);
                    state.quarantined += 1;
                    self.resync(&state.objects, segment);
                }
                state.writes += 1;
                Ok(object)
            }
        }
    }

    /// [`Storage::remove_if`]'s removal under the lock (journaled).
    fn remove_locked(&self, key: &[u8], expected: &Object) -> Result<bool> {
        let disk_key = keyspace::disk_key(key);
        let mut state = self.open_lock()?;
        let Some(raw) = state.objects.get(&disk_key) else {
            return Ok(false);
        };
        let segment = segment_of(key_hash(key));
        let stored = plan::decode_for(key, raw).inspect_err(|_| {
            self.resync(&state.objects, segment);
        })?;
        if stored != *expected {
            return Ok(false);
        }
        let previous = state.objects.remove(&disk_key);
        state.journal(Tree::Objects, &disk_key, previous);
        let old = Some(item_digest(key, &stored));
        segments::apply(&mut self.segments.lock(segment), old, None);
        state.writes += 1;
        Ok(true)
    }

    /// Test hook: damages the stored record of `key` (flips every bit of one
    /// byte in its middle) so that its checksum fails. Returns whether a
    /// record was there.
    #[doc(hidden)]
    pub fn corrupt_for_test(&self, key: &[u8]) -> bool {
        let mut state = self.lock();
        match state.objects.get_mut(&keyspace::disk_key(key)) {
            Some(raw) if !raw.is_empty() => {
                let i = raw.len() / 2;
                raw[i] ^= 0xFF;
                true
            }
            _ => false,
        }
    }

    /// Whether nothing at all is stored (no object, hint or metadata): a
    /// new disk.
    pub fn is_empty(&self) -> bool {
        let state = self.lock();
        state.objects.is_empty() && state.meta.is_empty() && state.hints.is_empty()
    }

    /// Raw bytes quarantined for `key`, if any (for tests and tooling).
    pub fn quarantined(&self, key: &[u8]) -> Option<Vec<u8>> {
        self.lock().corrupt.get(key).cloned()
    }

    /// Recomputes the digest of `segment` from `objects` (the caller holds
    /// the state lock), after a damaged record was found in it.
    fn resync(&self, objects: &BTreeMap<Vec<u8>, Vec<u8>>, segment: u32) {
        let (from, to) = segment_hashes(segment);
        let rows = keyspace::hash_range(from, to)
            .into_iter()
            .flat_map(|range| objects.range(range))
            .map(Ok::<_, Infallible>);
        let Ok(sum) = segments::segment_sum(rows);
        segments::store_resync(&mut self.segments.lock(segment), segment, sum);
    }

    /// [`MemoryEngine::resync`] of the segment of `key`, for readers that
    /// met a damaged record after releasing the lock.
    fn resync_key(&self, key: &[u8]) {
        self.resync(&self.lock().objects, segment_of(key_hash(key)));
    }
}

impl Storage for MemoryEngine {
    fn get(&self, key: &[u8]) -> Result<Option<Object>> {
        let state = self.open_lock()?;
        match state.objects.get(&keyspace::disk_key(key)) {
            None => Ok(None),
            Some(raw) => plan::decode_for(key, raw).map(Some).inspect_err(|_| {
                self.resync(&state.objects, segment_of(key_hash(key)));
            }),
        }
    }

    fn update(
        &self,
        key: &[u8],
        f: &mut dyn FnMut(Option<&Object>) -> Result<Object>,
    ) -> Result<Object> {
        self.check_space()?;
        let object = self.apply(key, &mut |prior| f(prior.object()))?;
        self.durable_now()?;
        Ok(object)
    }

    fn update_deferred_prior(
        &self,
        key: &[u8],
        f: &mut dyn FnMut(Prior<'_>) -> Result<Object>,
    ) -> Result<(Object, Durable)> {
        self.check_space()?;
        let object = self.apply(key, f)?;
        // Journaled: durable once a flush covers every write applied so far
        // (this one, or what it read). Otherwise applied is final.
        let durable = match self.commit() {
            Some(commit) => Durable::memory(commit, self.applied_seq()),
            None => Durable::ready(),
        };
        Ok((object, durable))
    }

    fn scan(&self, from_hash: u64, to_hash_inclusive: u64) -> ScanIter<'_> {
        let Some(range) = keyspace::hash_range(from_hash, to_hash_inclusive) else {
            return Box::new(std::iter::empty());
        };
        let state = match self.open_lock() {
            Ok(state) => state,
            Err(e) => return Box::new(std::iter::once(Err(e))),
        };
        // Copy the range out so that callers may write while they scan.
        let rows: Vec<(Vec<u8>, Vec<u8>)> = state
            .objects
            .range(range)
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        drop(state);
        Box::new(rows.into_iter().map(|(disk_key, raw)| {
            let key = keyspace::user_key(&disk_key)
                .ok_or_else(|| crate::Error::Corrupt {
                    key: disk_key.clone(),
                    reason: record::RecordError::Misplaced,
                })?
                .to_vec();
            let object = plan::decode_for(&key, &raw).inspect_err(|_| self.resync_key(&key))?;
            Ok((key, object))
        }))
    }
    fn remove_if(&self, key: &[u8], expected: &Object) -> Result<bool> {
        let removed = self.remove_locked(key, expected)?;
        if removed {
            self.durable_now()?;
        }
        Ok(removed)
    }

    fn get_meta(&self, name: &str) -> Result<Option<Vec<u8>>> {
        match self.open_lock()?.meta.get(name) {
            None => Ok(None),
            Some(raw) => plan::unframe_meta(name, raw).map(Some),
        }
    }

    fn put_meta(&self, name: &str, value: &[u8]) -> Result<()> {
        {
            let mut state = self.open_lock()?;
            let old = state.meta.insert(name.to_owned(), record::frame(value));
            state.journal(Tree::Meta, name.as_bytes(), old);
            state.writes += 1;
        }
        self.durable_now()
    }

    fn flush(&self) -> Result<()> {
        drop(self.open_lock()?);
        self.flush_journal()
    }
    fn stats(&self) -> StorageStats {
        let state = self.lock();
        StorageStats {
            keys: state.objects.len() as u64,
            bytes_on_disk: 0,
            corrupt_quarantined: state.quarantined,
            writes: state.writes,
            flushes: 0,
            writes_per_flush: 0.0,
            failed: state.closed,
            disk_full: state.disk_full,
            free_bytes: None,
        }
    }

    fn put_hint(&self, owner: &NodeId, key: &[u8], object: &Object, now_ms: u64) -> Result<()> {
        self.check_space()?;
        self.put_hint_locked(owner, key, object, now_ms)?;
        self.durable_now()
    }

    fn hints(&self) -> HintIter<'_> {
        self.hint_rows(Vec::new())
    }

    fn hints_for(&self, owner: &NodeId) -> HintIter<'_> {
        self.hint_rows(crate::hint::owner_prefix(owner))
    }

    fn remove_hint_if(&self, owner: &NodeId, key: &[u8], expected: &Object) -> Result<bool> {
        let removed = self.remove_hint_locked(owner, key, expected)?;
        if removed {
            self.durable_now()?;
        }
        Ok(removed)
    }

    fn backlog(&self) -> u64 {
        self.unflushed() as u64
    }

    fn hint_count(&self) -> u64 {
        self.lock().hints.len() as u64
    }

    fn segment_digests(&self, first_segment: u32, count: u32) -> Vec<u64> {
        self.segments.snapshot(first_segment, count)
    }

    fn key_digests(&self, from_hash: u64, to_hash_inclusive: u64) -> Result<Vec<(Vec<u8>, u64)>> {
        let Some(range) = keyspace::hash_range(from_hash, to_hash_inclusive) else {
            return Ok(Vec::new());
        };
        let state = self.open_lock()?;
        let mut out = Vec::new();
        let mut damaged = Vec::new();
        for (disk_key, raw) in state.objects.range(range) {
            match segments::classify(disk_key, raw) {
                Row::Item { key, digest, .. } => out.push((key.to_vec(), digest)),
                Row::Corrupt {
                    key,
                    segment,
                    reason,
                } => {
                    segments::log_corrupt(key, &reason);
                    damaged.push(segment);
                }
                Row::Misplaced => segments::log_corrupt(disk_key, &record::RecordError::Misplaced),
            }
        }
        damaged.dedup();
        for segment in damaged {
            self.resync(&state.objects, segment);
        }
        Ok(out)
    }
}
