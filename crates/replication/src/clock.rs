//! Time, as the replication core sees it: one [`Clock`] per node.
//!
//! Monotonic instants come from tokio's clock, so tests that pause tokio's
//! time (and the deterministic simulation) control every timeout, period
//! and age. Wall-clock milliseconds (a sibling's `written_at_ms`, a hint's
//! `created_at_ms`, the tombstone grace) come from the system clock, or,
//! for a [`Clock::following_tokio`] clock, from a fixed start advanced by
//! tokio's time; either way shifted by a per-node offset that tests set to
//! model clock skew. Nothing else in the core reads a clock.

use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use tokio::time::Instant;

/// A node's clock: monotonic instants and wall-clock milliseconds.
#[derive(Debug)]
pub struct Clock {
    /// Where wall-clock time comes from.
    wall: Wall,
    /// Added to every wall-clock reading, ms (clock skew in tests).
    offset_ms: AtomicI64,
}

#[derive(Debug)]
enum Wall {
    /// The system clock.
    System,
    /// `start_ms` at `start`, advancing with tokio's clock.
    Following { start_ms: u64, start: Instant },
}

impl Clock {
    /// The system's clocks, without offset: what a node runs with.
    pub fn system() -> Self {
        Clock {
            wall: Wall::System,
            offset_ms: AtomicI64::new(0),
        }
    }

    /// A clock whose wall time is `start_ms` now and advances with tokio's
    /// clock (paused-time tests, the simulation): the same schedule gives
    /// the same wall times.
    pub fn following_tokio(start_ms: u64) -> Self {
        Clock {
            wall: Wall::Following {
                start_ms,
                start: Instant::now(),
            },
            offset_ms: AtomicI64::new(0),
        }
    }

    /// The monotonic now (tokio's clock).
    pub fn now(&self) -> Instant {
        Instant::now()
    }

    /// Milliseconds since the Unix epoch, offset included (0 before 1970).
    pub fn wall_ms(&self) -> u64 {
        let base = match &self.wall {
            Wall::System => SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
            Wall::Following { start_ms, start } => {
                let elapsed = u64::try_from(start.elapsed().as_millis()).unwrap_or(u64::MAX);
                start_ms.saturating_add(elapsed)
            }
        };
        base.saturating_add_signed(self.offset_ms.load(Ordering::Relaxed))
    }

    /// Sets the skew of this node's wall clock, ms (positive: ahead).
    pub fn set_offset_ms(&self, offset_ms: i64) {
        self.offset_ms.store(offset_ms, Ordering::Relaxed);
    }

    /// The skew of this node's wall clock, ms.
    pub fn offset_ms(&self) -> i64 {
        self.offset_ms.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_following_clock_advances_with_tokio_and_keeps_its_offset() {
        let clock = Clock::following_tokio(1_000_000);
        assert_eq!(clock.wall_ms(), 1_000_000);
        tokio::time::sleep(Duration::from_millis(1500)).await;
        assert_eq!(clock.wall_ms(), 1_001_500);
        clock.set_offset_ms(-7_200_000);
        assert_eq!(clock.wall_ms(), 0);
        clock.set_offset_ms(3_600_000);
        assert_eq!(clock.wall_ms(), 4_601_500);
        assert_eq!(clock.offset_ms(), 3_600_000);
    }

    #[test]
    fn the_system_clock_is_after_2020() {
        assert!(Clock::system().wall_ms() > 1_577_836_800_000);
    }
}
