//! Limits on what one certificate holder may hold open on a node: a cap on
//! its concurrent connections (the oldest idle one is closed to make room
//! for a new one), and a node-wide budget of request bytes being received.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use kv_tls::{PeerIdentity, Role};
use quinn::VarInt;
use tracing::{debug, warn};

/// Application close code of a connection closed because its certificate
/// holds too many (sent to the closed connection's peer).
pub(crate) const CLOSE_TOO_MANY: u32 = 0x12;

/// Who a connection belongs to: the role and name its certificate carries.
type Identity = (Role, String);

/// How busy one served connection is.
#[derive(Debug)]
pub(crate) struct Activity {
    /// Streams being served on it (request read, handled, answered).
    in_flight: AtomicUsize,
    /// When a stream last started or ended on it, ms since the registry's
    /// epoch.
    last_active_ms: AtomicU64,
}

/// One served connection, as the registry knows it.
struct Tracked {
    stable_id: usize,
    conn: quinn::Connection,
    activity: Arc<Activity>,
}

/// The connections an endpoint serves, grouped by certificate identity.
pub(crate) struct Connections {
    /// Connections per identity at most.
    cap: usize,
    epoch: Instant,
    by_identity: Mutex<HashMap<Identity, Vec<Tracked>>>,
}

/// A connection's place in [`Connections`]; dropping it (when the
/// connection ends) frees the place.
pub(crate) struct Admitted {
    registry: Arc<Connections>,
    identity: Identity,
    stable_id: usize,
    activity: Arc<Activity>,
}

/// A stream being served: counted as in flight on its connection until
/// dropped.
pub(crate) struct StreamGuard {
    registry: Arc<Connections>,
    activity: Arc<Activity>,
}

impl Connections {
    /// A registry allowing `cap` (at least 1) connections per identity.
    pub(crate) fn new(cap: usize) -> Self {
        Connections {
            cap: cap.max(1),
            epoch: Instant::now(),
            by_identity: Mutex::new(HashMap::new()),
        }
    }

    fn now_ms(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// Registers `conn` of `peer`. When the identity already holds `cap`
    /// connections, the one of them with no stream in flight that was
    /// active least recently is closed to make room; when every one is
    /// busy, `conn` itself is closed and `None` returned.
    pub(crate) fn admit(
        self: &Arc<Self>,
        peer: &PeerIdentity,
        conn: &quinn::Connection,
    ) -> Option<Admitted> {
        let identity = (peer.role, peer.name.clone());
        let now = self.now_ms();
        let mut map = self.by_identity.lock().unwrap_or_else(|p| p.into_inner());
        let held = map.entry(identity.clone()).or_default();
        held.retain(|t| t.conn.close_reason().is_none());
        while held.len() >= self.cap {
            let idle = held
                .iter()
                .enumerate()
                .filter(|(_, t)| t.activity.in_flight.load(Ordering::Acquire) == 0)
                .min_by_key(|(_, t)| t.activity.last_active_ms.load(Ordering::Acquire))
                .map(|(i, _)| i);
            let Some(i) = idle else {
                warn!(
                    peer = %peer.name, role = peer.role.as_str(), remote = %conn.remote_address(),
                    cap = self.cap,
                    "refusing a connection: this certificate holds the most connections allowed, all busy"
                );
                conn.close(
                    VarInt::from_u32(CLOSE_TOO_MANY),
                    b"too many connections for this certificate, all busy",
                );
                return None;
            };
            let victim = held.swap_remove(i);
            debug!(
                peer = %peer.name, remote = %victim.conn.remote_address(), cap = self.cap,
                "closing this certificate's oldest idle connection to make room"
            );
            victim.conn.close(
                VarInt::from_u32(CLOSE_TOO_MANY),
                b"too many connections for this certificate: oldest idle closed",
            );
        }
        let activity = Arc::new(Activity {
            in_flight: AtomicUsize::new(0),
            last_active_ms: AtomicU64::new(now),
        });
        held.push(Tracked {
            stable_id: conn.stable_id(),
            conn: conn.clone(),
            activity: activity.clone(),
        });
        Some(Admitted {
            registry: self.clone(),
            identity,
            stable_id: conn.stable_id(),
            activity,
        })
    }

    /// Connections served now, every identity together.
    pub(crate) fn count(&self) -> usize {
        let map = self.by_identity.lock().unwrap_or_else(|p| p.into_inner());
        map.values().map(Vec::len).sum()
    }
}

impl Admitted {
    /// Counts a stream as in flight on this connection until the guard is
    /// dropped.
    pub(crate) fn stream(&self) -> StreamGuard {
        self.activity.in_flight.fetch_add(1, Ordering::AcqRel);
        self.activity
            .last_active_ms
            .store(self.registry.now_ms(), Ordering::Release);
        StreamGuard {
            registry: self.registry.clone(),
            activity: self.activity.clone(),
        }
    }
}

impl Drop for StreamGuard {
    fn drop(&mut self) {
        self.activity
            .last_active_ms
            .store(self.registry.now_ms(), Ordering::Release);
        self.activity.in_flight.fetch_sub(1, Ordering::AcqRel);
    }
}

impl Drop for Admitted {
    fn drop(&mut self) {
        let mut map = self
            .registry
            .by_identity
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        if let Some(held) = map.get_mut(&self.identity) {
            held.retain(|t| t.stable_id != self.stable_id);
            if held.is_empty() {
                map.remove(&self.identity);
            }
        }
    }
}
