//! Hints in the memory engine: the same keys and records as the sled
//! engine's `hints` tree, in a map under the engine's one lock.

use kv_types::{NodeId, Object};

use super::MemoryEngine;
use super::journal::Tree;
use crate::Result;
use crate::hint::{self, HintIter};

impl MemoryEngine {
    /// [`crate::Storage::put_hint`]: merge or create under the lock.
    pub(super) fn put_hint_locked(
        &self,
        owner: &NodeId,
        key: &[u8],
        object: &Object,
        now_ms: u64,
    ) -> Result<()> {
        let disk_key = hint::disk_key(owner, key);
        let mut state = self.open_lock()?;
        let raw = state.hints.get(&disk_key).map(Vec::as_slice);
        if let Some(record) = hint::plan_put(raw, owner, key, object, now_ms)? {
            let old = state.hints.insert(disk_key.clone(), record);
            state.journal(Tree::Hints, &disk_key, old);
            state.writes += 1;
        }
        Ok(())
    }

    /// [`crate::Storage::remove_hint_if`] under the lock.
    pub(super) fn remove_hint_locked(
        &self,
        owner: &NodeId,
        key: &[u8],
        expected: &Object,
    ) -> Result<bool> {
        let disk_key = hint::disk_key(owner, key);
        let mut state = self.open_lock()?;
        let Some(raw) = state.hints.get(&disk_key) else {
            return Ok(false);
        };
        if !hint::holds(key, raw, expected)? {
            return Ok(false);
        }
        let old = state.hints.remove(&disk_key);
        state.journal(Tree::Hints, &disk_key, old);
        state.writes += 1;
        Ok(true)
    }

    /// The hints whose on-disk key starts with `prefix` (all of them for an
    /// empty prefix), copied out so that callers may write while iterating.
    pub(super) fn hint_rows(&self, prefix: Vec<u8>) -> HintIter<'_> {
        let rows: Vec<(Vec<u8>, Vec<u8>)> = self
            .lock()
            .hints
            .range(prefix.clone()..)
            .take_while(|(k, _)| k.starts_with(&prefix))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        Box::new(
            rows.into_iter()
                .map(|(disk_key, raw)| hint::decode_row(&disk_key, &raw)),
        )
    }

    /// Test hook: damages the stored hint for (`owner`, `key`) so that its
    /// checksum fails. Returns whether a hint was there.
    #[doc(hidden)]
    pub fn corrupt_hint_for_test(&self, owner: &NodeId, key: &[u8]) -> bool {
        let mut state = self.lock();
        match state.hints.get_mut(&hint::disk_key(owner, key)) {
            Some(raw) if !raw.is_empty() => {
                let i = raw.len() / 2;
                raw[i] ^= 0xFF;
                true
            }
            _ => false,
        }
    }
}
