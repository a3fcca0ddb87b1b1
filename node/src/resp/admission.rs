//! Which RESP connections are open, per client address: the caps of
//! `[resp] max_connections` and `max_connections_per_address`, and the
//! choice of the connection closed to make room when one is reached.
//!
//! A connection is *engaged* once it has authenticated and completed a
//! command (without a password: once it completed a command). When a cap is
//! reached, the longest-idle connection that is not engaged (under that
//! address for the per-address cap) is closed to make room for the new
//! one; when every connection is engaged, the new one is refused. So a
//! client that opens connections and sends nothing cannot keep working
//! clients out.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use tokio_util::sync::CancellationToken;
use tracing::debug;

/// Why a connection was not admitted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Refusal {
    /// `max_connections` reached, every open connection engaged.
    Total,
    /// `max_connections_per_address` reached for its address, every
    /// connection from there engaged.
    PerAddress,
}

/// What the registry and a connection share.
#[derive(Debug)]
pub(super) struct ConnState {
    engaged: AtomicBool,
    /// Last bytes received, ms since the registry's epoch.
    last_read_ms: AtomicU64,
    /// Cancelled when the connection is closed to make room.
    pub(super) evicted: CancellationToken,
}

struct Entry {
    ip: IpAddr,
    state: Arc<ConnState>,
}

#[derive(Default)]
struct Inner {
    conns: HashMap<u64, Entry>,
    per_ip: HashMap<IpAddr, usize>,
}

/// The open connections (one per node's RESP listener).
pub(super) struct Registry {
    max_total: usize,
    max_per_ip: usize,
    epoch: Instant,
    inner: Mutex<Inner>,
}

/// An admitted connection's place; dropping it frees the place.
pub(super) struct Ticket {
    registry: Arc<Registry>,
    id: u64,
    /// Shared with the registry.
    pub(super) state: Arc<ConnState>,
}

impl Registry {
    /// A registry of at most `max_total` connections, `max_per_ip` from one
    /// address.
    pub(super) fn new(max_total: usize, max_per_ip: usize) -> Self {
        Registry {
            max_total: max_total.max(1),
            max_per_ip: max_per_ip.max(1),
            epoch: Instant::now(),
            inner: Mutex::new(Inner::default()),
        }
    }

    fn now_ms(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// Admits connection `id` from `ip`, first closing the longest-idle
    /// connection that is not engaged when a cap is reached.
    ///
    /// # Errors
    /// [`Refusal`] when a cap is reached and every connection it counts is
    /// engaged.
    pub(super) fn admit(self: &Arc<Self>, id: u64, ip: IpAddr) -> Result<Ticket, Refusal> {
        let mut inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        if inner.per_ip.get(&ip).copied().unwrap_or(0) >= self.max_per_ip
            && !Self::evict_one(&mut inner, Some(ip))
        {
            return Err(Refusal::PerAddress);
        }
        if inner.conns.len() >= self.max_total && !Self::evict_one(&mut inner, None) {
            return Err(Refusal::Total);
        }
        let state = Arc::new(ConnState {
            engaged: AtomicBool::new(false),
            last_read_ms: AtomicU64::new(self.now_ms()),
            evicted: CancellationToken::new(),
        });
        inner.conns.insert(
            id,
            Entry {
                ip,
                state: state.clone(),
            },
        );
        *inner.per_ip.entry(ip).or_default() += 1;
        Ok(Ticket {
            registry: self.clone(),
            id,
            state,
        })
    }

    /// Closes the longest-idle connection that is not engaged (from `ip`
    /// only, when given); false when there is none.
    fn evict_one(inner: &mut Inner, ip: Option<IpAddr>) -> bool {
        let victim = inner
            .conns
            .iter()
            .filter(|(_, e)| ip.is_none_or(|ip| e.ip == ip))
            .filter(|(_, e)| !e.state.engaged.load(Ordering::Acquire))
            // Ties (same millisecond) go to the older connection.
            .min_by_key(|(id, e)| (e.state.last_read_ms.load(Ordering::Acquire), **id))
            .map(|(id, _)| *id);
        let Some(id) = victim else {
            return false;
        };
        if let Some(entry) = Self::remove(inner, id) {
            debug!(id, ip = %entry.ip, "closing an idle RESP connection that sent no command, to make room");
            ::metrics::counter!("kv_resp_connections_evicted_total").increment(1);
            entry.state.evicted.cancel();
        }
        true
    }

    fn remove(inner: &mut Inner, id: u64) -> Option<Entry> {
        let entry = inner.conns.remove(&id)?;
        if let Some(n) = inner.per_ip.get_mut(&entry.ip) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                inner.per_ip.remove(&entry.ip);
            }
        }
        Some(entry)
    }

    /// Connections counted now.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.inner
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .conns
            .len()
    }
}

impl Ticket {
    /// Records that bytes arrived now.
    pub(super) fn read(&self) {
        self.state
            .last_read_ms
            .store(self.registry.now_ms(), Ordering::Release);
    }

    /// Records that the connection is engaged: never closed to make room.
    pub(super) fn engage(&self) {
        self.state.engaged.store(true, Ordering::Release);
    }

    /// Whether the connection is engaged.
    pub(super) fn engaged(&self) -> bool {
        self.state.engaged.load(Ordering::Acquire)
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        let mut inner = self
            .registry
            .inner
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        Registry::remove(&mut inner, self.id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(last: u8) -> IpAddr {
        IpAddr::from([10, 0, 0, last])
    }

    #[test]
    fn at_the_cap_the_longest_idle_silent_connection_makes_room() {
        let r = Arc::new(Registry::new(3, 100));
        let a = r.admit(1, ip(1)).unwrap();
        let b = r.admit(2, ip(2)).unwrap();
        let c = r.admit(3, ip(3)).unwrap();
        a.engage();
        // b read more recently than c.
        c.state.last_read_ms.store(0, Ordering::Release);
        b.state.last_read_ms.store(50, Ordering::Release);
        let d = r.admit(4, ip(4)).unwrap();
        assert!(c.state.evicted.is_cancelled());
        assert!(!b.state.evicted.is_cancelled() && !a.state.evicted.is_cancelled());
        assert_eq!(r.len(), 3);
        // The evicted connection's ticket, dropped later, frees nothing twice.
        drop(c);
        assert_eq!(r.len(), 3);
        b.engage();
        d.engage();
        assert_eq!(r.admit(5, ip(5)).err(), Some(Refusal::Total));
        drop(a);
        assert!(r.admit(5, ip(5)).is_ok());
    }

    #[test]
    fn the_per_address_cap_evicts_from_that_address_only() {
        let r = Arc::new(Registry::new(100, 2));
        let other = r.admit(1, ip(9)).unwrap();
        other.state.last_read_ms.store(0, Ordering::Release);
        let a = r.admit(2, ip(1)).unwrap();
        let b = r.admit(3, ip(1)).unwrap();
        a.state.last_read_ms.store(10, Ordering::Release);
        b.state.last_read_ms.store(20, Ordering::Release);
        let _c = r.admit(4, ip(1)).unwrap();
        assert!(a.state.evicted.is_cancelled());
        assert!(!other.state.evicted.is_cancelled() && !b.state.evicted.is_cancelled());
        b.engage();
        _c.engage();
        assert_eq!(r.admit(5, ip(1)).err(), Some(Refusal::PerAddress));
        assert!(r.admit(6, ip(2)).is_ok());
    }
}
