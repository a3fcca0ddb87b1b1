//! Hints in the sled engine: the `hints` tree, written by compare-and-swap
//! loops like objects, made durable by the same group commit.

use std::sync::atomic::Ordering;

use kv_types::{NodeId, Object};

use super::SledEngine;
use crate::Result;
use crate::group_commit::Ticket;
use crate::hint::{self, HintIter};
use crate::sled_db::Trees;

impl SledEngine {
    /// [`crate::Storage::put_hint`] on open trees; the ticket to wait for.
    pub(super) fn apply_put_hint(
        &self,
        t: &Trees,
        owner: &NodeId,
        key: &[u8],
        object: &Object,
        now_ms: u64,
    ) -> Result<Ticket> {
        let disk_key = hint::disk_key(owner, key);
        let fail = |op: &str, e: sled::Error| self.shared.fail(op, &e);
        loop {
            let raw = t.hints.get(&disk_key).map_err(|e| fail("get hint", e))?;
            let Some(record) = hint::plan_put(raw.as_deref(), owner, key, object, now_ms)? else {
                return Ok(self.shared.commit.observed());
            };
            let write = self.shared.commit.begin();
            let swapped = t
                .hints
                .compare_and_swap(&disk_key, raw.as_ref(), Some(record))
                .map_err(|e| fail("put hint", e))?;
            if swapped.is_err() {
                continue; // Another writer changed the hint: merge again.
            }
            let ticket = write.applied();
            if raw.is_none() {
                self.shared.hints.fetch_add(1, Ordering::Relaxed);
            }
            return Ok(ticket);
        }
    }

    /// [`crate::Storage::remove_hint_if`] on open trees; the ticket of the
    /// removal, or `None` when nothing was removed.
    pub(super) fn apply_remove_hint_if(
        &self,
        t: &Trees,
        owner: &NodeId,
        key: &[u8],
        expected: &Object,
    ) -> Result<Option<Ticket>> {
        let disk_key = hint::disk_key(owner, key);
        let fail = |op: &str, e: sled::Error| self.shared.fail(op, &e);
        loop {
            let Some(raw) = t.hints.get(&disk_key).map_err(|e| fail("get hint", e))? else {
                return Ok(None);
            };
            if !hint::holds(key, &raw, expected)? {
                return Ok(None);
            }
            let write = self.shared.commit.begin();
            let swapped = t
                .hints
                .compare_and_swap(&disk_key, Some(&raw), None::<Vec<u8>>)
                .map_err(|e| fail("remove hint", e))?;
            if swapped.is_ok() {
                let ticket = write.applied();
                self.shared.hints.fetch_sub(1, Ordering::Relaxed);
                return Ok(Some(ticket));
            }
        }
    }

    /// The hints whose on-disk key starts with `prefix` (all of them for an
    /// empty prefix). Not a snapshot; holds no lock between items.
    pub(super) fn hint_rows(&self, prefix: Vec<u8>) -> HintIter<'_> {
        let tree = match self.shared.with_trees(|t| Ok(t.hints.clone())) {
            Ok(tree) => tree,
            Err(e) => return Box::new(std::iter::once(Err(e))),
        };
        Box::new(tree.scan_prefix(prefix).map(move |row| {
            let (disk_key, raw) = row.map_err(|e| self.shared.fail("scan hints", &e))?;
            hint::decode_row(&disk_key, &raw)
        }))
    }

    /// Test hook: damages the stored hint for (`owner`, `key`) so that its
    /// checksum fails. Returns whether a hint was there.
    #[doc(hidden)]
    pub fn corrupt_hint_for_test(&self, owner: &NodeId, key: &[u8]) -> Result<bool> {
        let disk_key = hint::disk_key(owner, key);
        self.shared.with_trees(|t| {
            let fail = |e: sled::Error| self.shared.fail("corrupt hint", &e);
            let Some(raw) = t.hints.get(&disk_key).map_err(fail)? else {
                return Ok(false);
            };
            let mut raw = raw.to_vec();
            let i = raw.len() / 2;
            raw[i] ^= 0xFF;
            t.hints.insert(disk_key.as_slice(), raw).map_err(fail)?;
            Ok(true)
        })
    }
}
