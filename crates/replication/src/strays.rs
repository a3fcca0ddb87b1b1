//! Copies this node received for keys it does not replicate.
//!
//! A coordinator whose ring differs from this node's may send a
//! `Replicate` for a key this node owns under neither its current nor its
//! target ring. The replica stores it anyway (it may be the one whose view
//! is behind), counts it, keeps a hint of it for itself (durable, so a
//! restart does not forget it), and notes here which ring the sender had.
//! Hinted handoff then waits until this node's view has caught up (its
//! ring version is the sender's, or the grace period passed) and hands any
//! copy it still does not own to the key's owners, so anti-entropy, which
//! only visits owners, never misses it.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::time::Instant;

/// Strays remembered at most; beyond, new ones wait out the grace period.
const MAX_TRACKED: usize = 100_000;

/// The stray copies of one node.
#[derive(Debug, Default)]
pub struct Strays {
    /// Key -> (the sender's ring version, when it arrived).
    seen: Mutex<BTreeMap<Vec<u8>, (u64, Instant)>>,
    /// Copies received for keys this node did not own.
    received: AtomicU64,
}

impl Strays {
    /// Notes a copy of `key` sent by a node routing with `sender_version`.
    pub fn note(&self, key: &[u8], sender_version: u64, now: Instant) {
        self.received.fetch_add(1, Ordering::Relaxed);
        let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        if seen.len() < MAX_TRACKED || seen.contains_key(key) {
            seen.insert(key.to_vec(), (sender_version, now));
        }
    }

    /// Whether this node's view has caught up enough to judge the stray
    /// copy of `key`: it routes with the sender's ring, or the copy arrived
    /// at least `grace` ago; for a copy not remembered (this node
    /// restarted), once the ring has been stable for `grace`.
    pub fn ready(
        &self,
        key: &[u8],
        my_version: u64,
        now: Instant,
        grace: Duration,
        stable_for: Duration,
    ) -> bool {
        let seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        match seen.get(key) {
            Some((sender, at)) => *sender == my_version || now.duration_since(*at) >= grace,
            None => stable_for >= grace,
        }
    }

    /// Forgets `key` (handed off, or owned after all).
    pub fn forget(&self, key: &[u8]) {
        self.seen
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(key);
    }

    /// Copies received for keys this node did not own, since it started
    /// (`kv_replica_not_owner_total`).
    pub fn received(&self) -> u64 {
        self.received.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_stray_waits_for_the_senders_ring_or_the_grace_period() {
        let strays = Strays::default();
        let grace = Duration::from_secs(30);
        let t0 = Instant::now();
        strays.note(b"k", 7, t0);
        assert_eq!(strays.received(), 1);
        assert!(!strays.ready(b"k", 6, t0, grace, Duration::ZERO));
        assert!(strays.ready(b"k", 7, t0, grace, Duration::ZERO));
        assert!(strays.ready(b"k", 6, t0 + grace, grace, Duration::ZERO));
        // Not remembered (a restart): wait for a stable ring.
        strays.forget(b"k");
        assert!(!strays.ready(b"k", 6, t0, grace, Duration::from_secs(1)));
        assert!(strays.ready(b"k", 6, t0, grace, grace));
    }
}
