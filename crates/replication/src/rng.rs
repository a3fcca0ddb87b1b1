//! The one source of randomness of the replication core: request ids, the
//! incarnation of a new data directory, and (later) the router's draws.
//! Seeded in tests and the simulation, so the same seed gives the same
//! history; from the operating system in a running node.

use std::sync::Mutex;

use rand::rngs::StdRng;
use rand::{RngCore, SeedableRng};

/// A shareable, seedable random number generator.
#[derive(Debug)]
pub struct Rng(Mutex<StdRng>);

impl Rng {
    /// Seeded from the operating system (a running node).
    pub fn from_os() -> Self {
        Rng(Mutex::new(StdRng::from_os_rng()))
    }

    /// Seeded with `seed`: the same seed gives the same numbers.
    pub fn seeded(seed: u64) -> Self {
        Rng(Mutex::new(StdRng::seed_from_u64(seed)))
    }

    /// The next 64 random bits.
    pub fn next_u64(&self) -> u64 {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).next_u64()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_seed_gives_the_same_numbers() {
        let (a, b) = (Rng::seeded(7), Rng::seeded(7));
        let xs: Vec<u64> = (0..4).map(|_| a.next_u64()).collect();
        let ys: Vec<u64> = (0..4).map(|_| b.next_u64()).collect();
        assert_eq!(xs, ys);
        assert_ne!(Rng::seeded(8).next_u64(), xs[0]);
    }
}
