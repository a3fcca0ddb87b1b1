//! This node's own stalls, and why they convict no peer.
//!
//! A process frozen by SIGSTOP (`docker pause`), a VM steal or a long GC
//! hears no heartbeat while it is frozen; when it runs again its phi-accrual
//! detector sees every peer silent for the whole stall and convicts them
//! all, and the node answers "0 of 3 replicas alive" for a cluster that is
//! fine. Cassandra ignores the interval in which the local node itself
//! paused (`cassandra.max_local_pause_in_ms`, CASSANDRA-9183); this is the
//! equivalent for the view chitchat's detector feeds:
//!
//! - a refresh of the view that comes far later than scheduled (more than
//!   [`LocalPause::max_pause`] after the previous one) is a local stall;
//! - every peer that was alive before the stall stays alive ("held") until
//!   chitchat's detector, fed with fresh heartbeats, agrees again, or until
//!   the peer has been silent for a whole conviction time since the stall
//!   ended: then it is convicted, on evidence gathered while this node ran.
//!
//! chitchat recomputes its live set once per gossip round, so right after
//! the stall that set is still the one from before it: a verdict of alive
//! read then is stale, and the detector convicts the peer at its next
//! round. A hold therefore ends only on a verdict of alive given after a
//! fresh heartbeat and at least [`SETTLE_ROUNDS`] gossip rounds after the
//! stall ended (found by `tests/tests/pause.rs` failing in CI: two views,
//! 125-142 ms after the resume, showed live peers dead).
//!
//! chitchat's detector is private, so its verdict is overridden here, in the
//! view, not inside it. Pure logic: time is an argument.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use chitchat::ChitchatId;
use tracing::{info, warn};

/// Gossip rounds after a stall before the detector's verdict of alive is
/// its own again (chitchat recomputes liveness at the end of each round;
/// two leave room for a round begun before the stall).
const SETTLE_ROUNDS: u32 = 2;

/// A peer held alive after a stall.
struct Held {
    /// Its heartbeat when last seen advancing (or when the stall ended).
    beat: u64,
    /// When that was: the stall itself never counts.
    since: Instant,
    /// When the stall ended.
    ended: Instant,
    /// Whether its heartbeat advanced since the stall ended.
    fresh: bool,
}

/// Stall detection and the peers held alive after one.
pub(crate) struct LocalPause {
    /// A gap between two refreshes longer than this is a stall of this
    /// node (half the conviction time: a shorter stall convicts nobody).
    max_pause: Duration,
    /// How long a held peer may stay silent, counted while this node runs,
    /// before it is convicted after all: the detector's conviction time
    /// (phi threshold x gossip interval).
    conviction: Duration,
    /// How long after a stall the detector's verdict of alive may still be
    /// the stale one from before it ([`SETTLE_ROUNDS`] gossip intervals).
    settle: Duration,
    /// When the view was last refreshed.
    last_refresh: Option<Instant>,
    /// Peers held alive since the last stall, until their detector agrees.
    held: HashMap<ChitchatId, Held>,
    /// Peers alive in the last view (detector's verdict or held).
    alive_before: HashSet<ChitchatId>,
}

impl LocalPause {
    /// A detector for a node gossiping every `interval` whose failure
    /// detector convicts at `phi_threshold`.
    pub(crate) fn new(interval: Duration, phi_threshold: f64) -> Self {
        let conviction = interval.mul_f64(phi_threshold.max(1.0));
        LocalPause {
            max_pause: (conviction / 2).max(interval * 2),
            conviction,
            settle: interval * SETTLE_ROUNDS,
            last_refresh: None,
            held: HashMap::new(),
            alive_before: HashSet::new(),
        }
    }

    /// Notes a refresh at `now`; the length of the stall that ended, when
    /// the gap since the previous refresh was one. Every peer alive before
    /// it is held from now on.
    pub(crate) fn refresh(&mut self, now: Instant) -> Option<Duration> {
        let gap = self
            .last_refresh
            .map(|last| now.saturating_duration_since(last));
        self.last_refresh = Some(now);
        let gap = gap.filter(|gap| *gap > self.max_pause)?;
        warn!(
            stall_ms = gap.as_millis() as u64,
            max_local_pause_ms = self.max_pause.as_millis() as u64,
            peers = self.alive_before.len(),
            "this node stalled (paused or starved); its failure detector convicts no peer on the strength of it until fresh heartbeats arrive"
        );
        for id in &self.alive_before {
            self.held.insert(
                id.clone(),
                Held {
                    // Any advance from here on is fresh.
                    beat: u64::MAX,
                    since: now,
                    ended: now,
                    fresh: false,
                },
            );
        }
        Some(gap)
    }

    /// Whether `id`, with heartbeat `beat` and the detector's verdict
    /// `detector_alive`, is alive at `now`; call once per peer and refresh.
    pub(crate) fn alive(
        &mut self,
        id: &ChitchatId,
        beat: u64,
        detector_alive: bool,
        now: Instant,
    ) -> bool {
        // Always asked: a verdict of alive ends the hold.
        let held = self.holds(id, beat, detector_alive, now);
        let alive = detector_alive || held;
        if alive {
            self.alive_before.insert(id.clone());
        } else {
            self.alive_before.remove(id);
        }
        alive
    }

    /// Whether a stall holds `id` alive against its detector.
    fn holds(&mut self, id: &ChitchatId, beat: u64, detector_alive: bool, now: Instant) -> bool {
        let Some(held) = self.held.get_mut(id) else {
            return false;
        };
        if held.beat == u64::MAX {
            held.beat = beat;
        } else if beat != held.beat {
            held.beat = beat;
            held.since = now;
            held.fresh = true;
        }
        if detector_alive {
            if held.fresh && now.saturating_duration_since(held.ended) >= self.settle {
                // Fresh heartbeats convinced the detector: it decides again.
                self.held.remove(id);
                return false;
            }
            // Possibly the verdict from before the stall: keep holding.
            return true;
        }
        if now.saturating_duration_since(held.since) <= self.conviction {
            return true;
        }
        info!(node = %id.node_id, "no heartbeat since this node's stall ended: convicted");
        self.held.remove(id);
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(name: &str) -> ChitchatId {
        ChitchatId::new(name, 1, "127.0.0.1:7001".parse().unwrap())
    }

    const INTERVAL: Duration = Duration::from_millis(200);

    /// A detector that saw `peers` alive in its last refresh at `t0`.
    fn running(peers: &[&ChitchatId], t0: Instant) -> LocalPause {
        let mut pause = LocalPause::new(INTERVAL, 8.0);
        assert_eq!(pause.refresh(t0), None);
        for p in peers {
            assert!(pause.alive(p, 1, true, t0));
        }
        pause
    }

    #[test]
    fn thresholds_follow_the_conviction_time() {
        let pause = LocalPause::new(INTERVAL, 8.0);
        assert_eq!(pause.conviction, Duration::from_millis(1600));
        assert_eq!(pause.max_pause, Duration::from_millis(800));
        let default = LocalPause::new(Duration::from_millis(500), 8.0);
        assert_eq!(default.max_pause, Duration::from_secs(2));
    }

    #[test]
    fn ordinary_refreshes_hold_nobody() {
        let (a, t0) = (id("a"), Instant::now());
        let mut pause = running(&[&a], t0);
        let t1 = t0 + Duration::from_millis(300);
        assert_eq!(pause.refresh(t1), None);
        // The detector's verdict stands.
        assert!(!pause.alive(&a, 1, false, t1));
    }

    #[test]
    fn a_stall_holds_the_live_peers_until_their_detector_agrees() {
        let (a, b, t0) = (id("a"), id("b"), Instant::now());
        let mut pause = running(&[&a], t0);
        // b was dead before the stall: nothing to hold.
        assert!(!pause.alive(&b, 1, false, t0));
        let resumed = t0 + Duration::from_secs(15);
        assert_eq!(pause.refresh(resumed), Some(Duration::from_secs(15)));
        // The detector convicts a on the strength of the stall: held.
        assert!(pause.alive(&a, 1, false, resumed));
        assert!(!pause.alive(&b, 1, false, resumed));
        // Fresh heartbeats keep it held however long the detector lags.
        let mut t = resumed;
        for beat in 2..20 {
            t += Duration::from_millis(500);
            assert_eq!(pause.refresh(t), None);
            assert!(pause.alive(&a, beat, false, t));
        }
        // The detector agrees: it decides again from now on.
        assert!(pause.alive(&a, 20, true, t));
        t += Duration::from_millis(100);
        assert!(!pause.alive(&a, 20, false, t));
    }

    #[test]
    fn the_detectors_stale_verdict_right_after_the_stall_ends_no_hold() {
        let (a, t0) = (id("a"), Instant::now());
        let mut pause = running(&[&a], t0);
        let resumed = t0 + Duration::from_secs(15);
        pause.refresh(resumed);
        // chitchat's live set is still the one from before the stall.
        assert!(pause.alive(&a, 1, true, resumed));
        // Its next round convicts a on the strength of the stall: held.
        let t = resumed + Duration::from_millis(120);
        assert_eq!(pause.refresh(t), None);
        assert!(pause.alive(&a, 1, false, t));
        // A fresh heartbeat and a verdict of alive, but too soon after the
        // stall for chitchat to have recomputed it: still held.
        let t = resumed + Duration::from_millis(250);
        pause.refresh(t);
        assert!(pause.alive(&a, 2, true, t));
        let t = resumed + Duration::from_millis(300);
        pause.refresh(t);
        assert!(pause.alive(&a, 2, false, t));
        // Settled: the detector decides again.
        let t = resumed + Duration::from_millis(500);
        pause.refresh(t);
        assert!(pause.alive(&a, 3, true, t));
        let t = resumed + Duration::from_millis(600);
        pause.refresh(t);
        assert!(!pause.alive(&a, 3, false, t));
    }

    #[test]
    fn a_peer_silent_for_a_conviction_time_after_the_stall_is_convicted() {
        let (a, t0) = (id("a"), Instant::now());
        let mut pause = running(&[&a], t0);
        let resumed = t0 + Duration::from_secs(15);
        pause.refresh(resumed);
        let mut t = resumed;
        while t < resumed + Duration::from_millis(1600) {
            assert!(pause.alive(&a, 1, false, t), "{:?}", t - resumed);
            t += Duration::from_millis(100);
            pause.refresh(t);
        }
        t += Duration::from_millis(100);
        pause.refresh(t);
        assert!(!pause.alive(&a, 1, false, t));
        // And it stays convicted (no longer held) until its detector says.
        assert!(!pause.alive(&a, 2, false, t + Duration::from_millis(100)));
    }
}
