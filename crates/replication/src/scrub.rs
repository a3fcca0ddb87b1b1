//! The background scrub: re-reads every stored record, a slice of the
//! key-hash space at a time, re-checks it (length, format byte, crc32,
//! decoding: the same checks as any read) and hands a damaged one to
//! repair, so bit rot on keys nobody reads is found without a read.
//!
//! **Pace.** The key-hash space is cut into [`SLICES`] equal slices; one
//! slice is scanned every `interval / SLICES`, so a full pass over this
//! node's records takes `interval` (`[storage] scrub_interval_secs`),
//! whatever the data size. A slice is read in one go on the blocking pool
//! (records are decoded, not kept). An interval of zero turns the scrub off.
//!
//! **Repair.** A damaged record is read from the key's other replicas
//! (current and pending owners, alive ones), their answers are merged
//! causally and the merge is written here; the write quarantines the
//! damaged bytes (`kv_storage`'s `corrupt` tree, counted in
//! `StorageStats::corrupt_quarantined`). When no other replica holds a
//! readable copy the record is left in place (logged, counted in
//! [`ScrubStats::unrepaired`]) and the next pass tries again. The engine
//! also marks the record's anti-entropy segment for recomputation when a
//! read meets damage, so an exchange repairs it too.
//!
//! What is re-read is what the engine returns: sled serves recently used
//! pages from its page cache, so damage on disk under a cached page is
//! found once the page is evicted (or the node restarts).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use kv_types::{NodeId, Object};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::{debug, info, warn};

use crate::offload::offload;
use crate::periodic::spawn_every;
use crate::replica::Replica;
use crate::{Cluster, Peers};

/// Slices of the key-hash space one pass is cut into.
pub const SLICES: u64 = 256;

/// The scrub's settings (`[storage] scrub_interval_secs`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScrubSettings {
    /// Length of one full pass over the records; zero turns the scrub off.
    pub interval: Duration,
    /// Deadline of one call to a peer while repairing.
    pub timeout: Duration,
}

impl Default for ScrubSettings {
    /// A pass a day, 2 s per peer call.
    fn default() -> Self {
        ScrubSettings {
            interval: Duration::from_secs(86_400),
            timeout: Duration::from_secs(2),
        }
    }
}

/// Lifetime counters of the scrub (since the node started).
#[derive(Debug, Default)]
pub struct ScrubStats {
    /// Records read and checked.
    pub records_checked: AtomicU64,
    /// Records found damaged (a record still damaged at the next pass is
    /// counted again).
    pub corrupt_found: AtomicU64,
    /// Damaged records rewritten from other replicas.
    pub repaired: AtomicU64,
    /// Damaged records left in place: no other replica answered with a
    /// readable copy, or the rewrite failed.
    pub unrepaired: AtomicU64,
    /// Full passes completed.
    pub passes: AtomicU64,
}

/// What scrubbing one slice (or a whole pass) found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ScrubOutcome {
    /// Records read and checked.
    pub checked: u64,
    /// User keys of the damaged records found (the raw disk key when the
    /// key itself cannot be recovered).
    pub corrupt: Vec<Vec<u8>>,
    /// How many of them were rewritten from other replicas.
    pub repaired: u64,
    /// Whether the engine failed (an I/O error) before the end: the rest
    /// of the range was not checked.
    pub incomplete: bool,
}

impl ScrubOutcome {
    fn add(&mut self, other: ScrubOutcome) {
        self.checked += other.checked;
        self.corrupt.extend(other.corrupt);
        self.repaired += other.repaired;
        self.incomplete |= other.incomplete;
    }
}

/// The scrub of one node.
pub struct Scrub {
    cluster: Arc<Cluster>,
    peers: Arc<Peers>,
    replica: Arc<Replica>,
    settings: ScrubSettings,
    stats: Arc<ScrubStats>,
}

impl Scrub {
    /// A scrub of `replica`'s storage, repairing from the key's replicas.
    pub fn new(
        cluster: Arc<Cluster>,
        peers: Arc<Peers>,
        replica: Arc<Replica>,
        settings: ScrubSettings,
    ) -> Self {
        Scrub {
            cluster,
            peers,
            replica,
            settings,
            stats: Arc::new(ScrubStats::default()),
        }
    }

    /// The counters.
    pub fn stats(&self) -> &Arc<ScrubStats> {
        &self.stats
    }

    /// Scrubs one slice every `interval / SLICES` (the first at once),
    /// round robin, until `stop`; nothing when the interval is zero.
    pub fn spawn(self: Arc<Self>, tasks: &TaskTracker, stop: CancellationToken) {
        if self.settings.interval.is_zero() {
            return;
        }
        let pace = (self.settings.interval / SLICES as u32).max(Duration::from_millis(1));
        let next = Arc::new(AtomicU64::new(0));
        spawn_every(tasks, stop, pace, None, move || {
            let (this, next) = (self.clone(), next.clone());
            async move {
                let slice = next.fetch_add(1, Ordering::Relaxed) % SLICES;
                let outcome = this.scrub_slice(slice).await;
                if slice == SLICES - 1 {
                    this.stats.passes.fetch_add(1, Ordering::Relaxed);
                }
                if !outcome.corrupt.is_empty() {
                    info!(
                        slice,
                        checked = outcome.checked,
                        corrupt = outcome.corrupt.len(),
                        repaired = outcome.repaired,
                        "scrub found damaged records"
                    );
                }
            }
        })
    }

    /// Scrubs every slice at once, unpaced (for tests and tools).
    pub async fn run_pass(&self) -> ScrubOutcome {
        let mut total = ScrubOutcome::default();
        for slice in 0..SLICES {
            total.add(self.scrub_slice(slice).await);
        }
        self.stats.passes.fetch_add(1, Ordering::Relaxed);
        total
    }

    /// Reads and checks every record of slice `slice` (of [`SLICES`]) and
    /// repairs the damaged ones.
    pub async fn scrub_slice(&self, slice: u64) -> ScrubOutcome {
        let (from, to) = slice_hashes(slice);
        let storage = self.replica.storage().clone();
        let scanned = offload(move || {
            let mut outcome = ScrubOutcome::default();
            for row in storage.scan(from, to) {
                match row {
                    Ok(_) => outcome.checked += 1,
                    Err(kv_storage::Error::Corrupt { key, reason }) => {
                        outcome.checked += 1;
                        warn!(key = %key.escape_ascii(), %reason, "scrub: damaged record");
                        outcome.corrupt.push(key);
                    }
                    Err(e) => {
                        warn!(error = %e, slice, "scrub: the engine failed; slice left unchecked");
                        outcome.incomplete = true;
                        break;
                    }
                }
            }
            outcome
        })
        .await;
        let mut outcome = match scanned {
            Ok(outcome) => outcome,
            Err(e) => {
                warn!(error = %e, slice, "scrub: the scan did not run");
                return ScrubOutcome {
                    incomplete: true,
                    ..ScrubOutcome::default()
                };
            }
        };
        let s = &self.stats;
        s.records_checked
            .fetch_add(outcome.checked, Ordering::Relaxed);
        s.corrupt_found
            .fetch_add(outcome.corrupt.len() as u64, Ordering::Relaxed);
        for key in outcome.corrupt.clone() {
            if self.repair(&key).await {
                outcome.repaired += 1;
                s.repaired.fetch_add(1, Ordering::Relaxed);
            } else {
                s.unrepaired.fetch_add(1, Ordering::Relaxed);
            }
        }
        outcome
    }

    /// Rewrites the damaged record of `key` with the merge of what the
    /// key's other alive replicas hold; false when none answered with a
    /// readable copy or the write failed.
    async fn repair(&self, key: &[u8]) -> bool {
        let me = self.cluster.id().clone();
        let (_, replicas) = self.cluster.placement().key_replicas(key);
        let others: Vec<NodeId> = replicas
            .all()
            .into_iter()
            .filter(|id| *id != me && self.cluster.is_alive(id))
            .collect();
        let mut merged = Object::new();
        for peer in &others {
            let id = self.peers.fresh_id();
            match self.peers.get(peer, id, key, self.settings.timeout).await {
                Ok(Some(object)) => merged = merged.sync(&object),
                Ok(None) => {}
                Err(e) => debug!(%peer, error = %e, "scrub: a replica read failed"),
            }
        }
        if merged.is_empty() {
            warn!(
                key = %key.escape_ascii(),
                asked = others.len(),
                "scrub: no other replica holds a readable copy; the damaged record stays"
            );
            return false;
        }
        match self.replica.replicate(key, &merged).await {
            Ok(_) => {
                info!(key = %key.escape_ascii(), "scrub: damaged record rewritten from its replicas");
                true
            }
            Err(e) => {
                warn!(key = %key.escape_ascii(), error = %e, "scrub: rewriting the damaged record failed");
                false
            }
        }
    }
}

/// The inclusive key-hash range of slice `slice` of [`SLICES`].
fn slice_hashes(slice: u64) -> (u64, u64) {
    let width = u64::MAX / SLICES + 1;
    let from = slice.min(SLICES - 1) * width;
    (from, from.saturating_add(width - 1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slices_cover_the_hash_space_without_overlap() {
        assert_eq!(slice_hashes(0).0, 0);
        assert_eq!(slice_hashes(SLICES - 1).1, u64::MAX);
        for s in 1..SLICES {
            assert_eq!(slice_hashes(s).0, slice_hashes(s - 1).1 + 1);
        }
    }
}
