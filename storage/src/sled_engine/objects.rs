//! Writes to the `objects` tree and the segment digests they keep up to
//! date.
//!
//! Every write to `objects` holds the digest lock of its key's segment from
//! its first read to its digest change: the compare-and-swap then only
//! fails when something outside the engine's writers changed the record
//! (a test hook), a retry adds nothing, and a segment can be recomputed
//! from the tree under the same lock. Lock order: the database read guard
//! (`with_trees`), then one segment lock; never a second read guard while a
//! segment lock is held.

use std::sync::atomic::Ordering;

use kv_types::{Object, key_hash};

use super::SledEngine;
use crate::digest::{item_digest, segment_hashes, segment_of};
use crate::group_commit::Ticket;
use crate::plan::{self, Outcome};
use crate::record::RecordError;
use crate::segments::{self, Row};
use crate::sled_db::Trees;
use crate::{Prior, Result, keyspace};

impl SledEngine {
    /// One attempt-loop of a read-modify-write on open trees; returns the
    /// object and the ticket to wait for.
    pub(super) fn apply_update(
        &self,
        t: &Trees,
        key: &[u8],
        f: &mut dyn FnMut(Prior<'_>) -> Result<Object>,
    ) -> Result<(Object, Ticket)> {
        let disk_key = keyspace::disk_key(key);
        let segment = segment_of(key_hash(key));
        let fail = |op: &str, e: sled::Error| self.shared.fail(op, &e);
        let mut cell = self.shared.segments.lock(segment);
        loop {
            let raw = t.objects.get(&disk_key).map_err(|e| fail("get", e))?;
            let (object, record, replaces_corrupt, old_digest, new_digest) =
                match plan::plan(key, raw.as_deref(), f)? {
                    Outcome::Unchanged(object) => {
                        return Ok((object, self.shared.commit.observed()));
                    }
                    Outcome::Write {
                        object,
                        record,
                        replaces_corrupt,
                        old_digest,
                        new_digest,
                    } => (object, record, replaces_corrupt, old_digest, new_digest),
                };
            let write = self.shared.commit.begin();
            if let (Some(_), Some(raw)) = (&replaces_corrupt, &raw) {
                // Keep the damaged bytes for forensics before overwriting them.
                t.corrupt
                    .insert(key, raw.clone())
                    .map_err(|e| fail("quarantine", e))?;
            }
            let swapped = t
                .objects
                .compare_and_swap(&disk_key, raw.as_ref(), Some(record))
                .map_err(|e| fail("compare_and_swap", e))?;
            if swapped.is_err() {
                continue; // The record changed under us: read again.
            }
            let ticket = write.applied();
            segments::apply(&mut cell, old_digest, Some(new_digest));
            if raw.is_none() {
                self.shared.keys.fetch_add(1, Ordering::Relaxed);
            }
            if let Some(reason) = replaces_corrupt {
                plan::log_quarantine(key, &reason);
                self.shared.quarantined.fetch_add(1, Ordering::Relaxed);
                self.resync_locked(t, segment, &mut cell);
            }
            return Ok((object, ticket));
        }
    }

    /// Removes `key` if it still decodes to `expected`; the ticket of the
    /// removal, or `None` when nothing was removed.
    pub(super) fn apply_remove_if(
        &self,
        t: &Trees,
        key: &[u8],
        expected: &Object,
    ) -> Result<Option<Ticket>> {
        let disk_key = keyspace::disk_key(key);
        let segment = segment_of(key_hash(key));
        let fail = |op: &str, e: sled::Error| self.shared.fail(op, &e);
        let mut cell = self.shared.segments.lock(segment);
        loop {
            let Some(raw) = t.objects.get(&disk_key).map_err(|e| fail("get", e))? else {
                return Ok(None);
            };
            let stored = plan::decode_for(key, &raw).inspect_err(|_| {
                self.resync_locked(t, segment, &mut cell);
            })?;
            if stored != *expected {
                return Ok(None);
            }
            let write = self.shared.commit.begin();
            let swapped = t
                .objects
                .compare_and_swap(&disk_key, Some(&raw), None::<Vec<u8>>)
                .map_err(|e| fail("compare_and_swap", e))?;
            if swapped.is_ok() {
                let ticket = write.applied();
                segments::apply(&mut cell, Some(item_digest(key, &stored)), None);
                self.shared.keys.fetch_sub(1, Ordering::Relaxed);
                return Ok(Some(ticket));
            }
        }
    }

    /// Recomputes the digest of `segment` from the tree, with its lock held
    /// by the caller. A read error leaves the digest as it is: the engine
    /// is failed then, and its reopen recounts every segment.
    fn resync_locked(&self, t: &Trees, segment: u32, cell: &mut u64) {
        let (from, to) = segment_hashes(segment);
        let Some(range) = keyspace::hash_range(from, to) else {
            return;
        };
        match segments::segment_sum(t.objects.range(range)) {
            Ok(sum) => segments::store_resync(cell, segment, sum),
            Err(e) => {
                self.shared.fail("resync digest", &e);
            }
        }
    }

    /// Recomputes the digest of the segment of `key`, after a reader met a
    /// damaged record there (so that anti-entropy sees the damage).
    pub(super) fn resync_key(&self, key: &[u8]) {
        let segment = segment_of(key_hash(key));
        let _ = self.shared.with_trees(|t| {
            self.resync_locked(t, segment, &mut self.shared.segments.lock(segment));
            Ok(())
        });
    }

    /// [`crate::Storage::key_digests`] on open trees.
    pub(super) fn list_key_digests(
        &self,
        t: &Trees,
        from_hash: u64,
        to_hash_inclusive: u64,
    ) -> Result<Vec<(Vec<u8>, u64)>> {
        let Some(range) = keyspace::hash_range(from_hash, to_hash_inclusive) else {
            return Ok(Vec::new());
        };
        let mut out = Vec::new();
        let mut damaged = Vec::new();
        for row in t.objects.range(range) {
            let (disk_key, raw) = row.map_err(|e| self.shared.fail("key digests", &e))?;
            match segments::classify(&disk_key, &raw) {
                Row::Item { key, digest, .. } => out.push((key.to_vec(), digest)),
                Row::Corrupt {
                    key,
                    segment,
                    reason,
                } => {
                    segments::log_corrupt(key, &reason);
                    damaged.push(segment);
                }
                Row::Misplaced => segments::log_corrupt(&disk_key, &RecordError::Misplaced),
            }
        }
        damaged.dedup();
        for segment in damaged {
            self.resync_locked(t, segment, &mut self.shared.segments.lock(segment));
        }
        Ok(out)
    }
}
