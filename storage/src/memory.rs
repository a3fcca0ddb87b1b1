//! The in-memory engine: the same records as on disk, in maps under one
//! mutex. For tests and simulations; nothing survives the process.
//!
//! It stores *encoded* records (format byte, codec, crc32) under the same
//! hash-prefixed keys as the sled engine, so checksums, corruption,
//! quarantine and scan order behave exactly as they do on disk.

use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard, PoisonError};

use kv_types::Object;

use crate::plan::{self, Outcome};
use crate::storage::{ScanIter, Storage, StorageStats};
use crate::{Result, keyspace, record};

/// An engine that keeps everything in memory. Every write is "durable" the
/// moment it returns (there is nothing to flush).
#[derive(Debug, Default)]
pub struct MemoryEngine {
    /// Everything, behind one lock: read-modify-writes run under it, which
    /// makes them atomic without retries.
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    /// On-disk key (hash prefix + key) -> encoded record.
    objects: BTreeMap<Vec<u8>, Vec<u8>>,
    /// Metadata name -> framed value.
    meta: BTreeMap<String, Vec<u8>>,
    /// User key -> raw bytes of the last corrupt record quarantined.
    corrupt: BTreeMap<Vec<u8>, Vec<u8>>,
    /// Counters for [`StorageStats`].
    quarantined: u64,
    writes: u64,
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

    /// Raw bytes quarantined for `key`, if any (for tests and tooling).
    pub fn quarantined(&self, key: &[u8]) -> Option<Vec<u8>> {
        self.lock().corrupt.get(key).cloned()
    }
}

impl Storage for MemoryEngine {
    fn get(&self, key: &[u8]) -> Result<Option<Object>> {
        let state = self.lock();
        match state.objects.get(&keyspace::disk_key(key)) {
            None => Ok(None),
            Some(raw) => plan::decode_for(key, raw).map(Some),
        }
    }

    fn update(
        &self,
        key: &[u8],
        f: &mut dyn FnMut(Option<&Object>) -> Result<Object>,
    ) -> Result<Object> {
        let disk_key = keyspace::disk_key(key);
        let mut state = self.lock();
        let raw = state.objects.get(&disk_key).map(Vec::as_slice);
        match plan::plan(raw, f)? {
            Outcome::Unchanged(object) => Ok(object),
            Outcome::Write {
                object,
                record,
                replaces_corrupt,
            } => {
                let old = state.objects.insert(disk_key, record);
                if let (Some(reason), Some(old)) = (replaces_corrupt, old) {
                    plan::log_quarantine(key, &reason);
                    state.corrupt.insert(key.to_vec(), old);
                    state.quarantined += 1;
                }
                state.writes += 1;
                Ok(object)
            }
        }
    }

    fn scan(&self, from_hash: u64, to_hash_inclusive: u64) -> ScanIter<'_> {
        let Some(range) = keyspace::hash_range(from_hash, to_hash_inclusive) else {
            return Box::new(std::iter::empty());
        };
        // Copy the range out so that callers may write while they scan.
        let rows: Vec<(Vec<u8>, Vec<u8>)> = self
            .lock()
            .objects
            .range(range)
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        Box::new(rows.into_iter().map(|(disk_key, raw)| {
            let key = keyspace::user_key(&disk_key)
                .ok_or_else(|| crate::Error::Corrupt {
                    key: disk_key.clone(),
                    reason: record::RecordError::Misplaced,
                })?
                .to_vec();
            let object = plan::decode_for(&key, &raw)?;
            Ok((key, object))
        }))
    }

    fn remove_if(&self, key: &[u8], expected: &Object) -> Result<bool> {
        let disk_key = keyspace::disk_key(key);
        let mut state = self.lock();
        let Some(raw) = state.objects.get(&disk_key) else {
            return Ok(false);
        };
        if plan::decode_for(key, raw)? != *expected {
            return Ok(false);
        }
        state.objects.remove(&disk_key);
        state.writes += 1;
        Ok(true)
    }

    fn get_meta(&self, name: &str) -> Result<Option<Vec<u8>>> {
        match self.lock().meta.get(name) {
            None => Ok(None),
            Some(raw) => plan::unframe_meta(name, raw).map(Some),
        }
    }

    fn put_meta(&self, name: &str, value: &[u8]) -> Result<()> {
        let mut state = self.lock();
        state.meta.insert(name.to_owned(), record::frame(value));
        state.writes += 1;
        Ok(())
    }

    fn flush(&self) -> Result<()> {
        Ok(())
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
            failed: false,
        }
    }
}
