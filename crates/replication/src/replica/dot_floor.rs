//! The counter floor of this node's clock actor.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use kv_storage::Storage;

/// Metadata key of the dot-counter lease.
const DOT_LEASE_META: &str = "dot_lease";

/// Counters reserved per lease write.
const DOT_LEASE: u64 = 1_000_000;

/// The counter floor of this node's actor (Riak's fix for kv679 leases a
/// per-vnode counter the same way): every new event of a key whose clock
/// has no current value of this actor starts above every counter the actor
/// issued before, for any key, so a purged key never gets a dot it had
/// before. Persisted as a lease: counters below the stored lease end may
/// have been issued, so a restart starts from it.
#[derive(Debug)]
pub struct DotFloor {
    issued: AtomicU64,
    lease_end: Mutex<u64>,
}

impl DotFloor {
    /// Loads the lease of this data directory and takes a new one.
    ///
    /// # Errors
    /// When the lease cannot be read or persisted.
    pub fn load(storage: &dyn Storage) -> kv_storage::Result<Self> {
        let start = storage
            .get_meta(DOT_LEASE_META)?
            .and_then(|b| <[u8; 8]>::try_from(b.as_slice()).ok())
            .map_or(0, u64::from_be_bytes);
        let end = start + DOT_LEASE;
        storage.put_meta(DOT_LEASE_META, &end.to_be_bytes())?;
        Ok(DotFloor {
            issued: AtomicU64::new(start),
            lease_end: Mutex::new(end),
        })
    }

    /// The floor for the next event.
    pub(crate) fn current(&self) -> u64 {
        self.issued.load(Ordering::Acquire)
    }

    /// Notes that `counter` was issued; whether the lease must be extended
    /// now (then call [`DotFloor::record`], which writes it durably).
    pub(crate) fn note(&self, counter: u64) -> bool {
        self.issued.fetch_max(counter, Ordering::AcqRel);
        let end = self.lease_end.lock().unwrap_or_else(|p| p.into_inner());
        counter + DOT_LEASE / 2 >= *end
    }

    /// Records that `counter` was issued, extending the lease (durably)
    /// well before it is reached.
    pub(crate) fn record(&self, storage: &dyn Storage, counter: u64) -> kv_storage::Result<()> {
        self.issued.fetch_max(counter, Ordering::AcqRel);
        let mut end = self.lease_end.lock().unwrap_or_else(|p| p.into_inner());
        if counter + DOT_LEASE / 2 >= *end {
            let next = counter + DOT_LEASE;
            storage.put_meta(DOT_LEASE_META, &next.to_be_bytes())?;
            *end = next;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use kv_storage::MemoryEngine;

    use super::*;

    #[test]
    fn a_restart_starts_above_every_counter_the_last_lease_covered() {
        let storage = MemoryEngine::new();
        let first = DotFloor::load(&storage).unwrap();
        assert_eq!(first.current(), 0);
        assert!(!first.note(10));
        assert_eq!(first.current(), 10);
        // Near the end of the lease: extend it durably.
        assert!(first.note(DOT_LEASE / 2 + 1));
        first.record(&storage, DOT_LEASE / 2 + 1).unwrap();
        let again = DotFloor::load(&storage).unwrap();
        assert!(again.current() > DOT_LEASE / 2 + 1);
    }
}
