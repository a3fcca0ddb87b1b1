//! The randomness of one decision: a stream of numbers derived from one
//! 64-bit draw (splitmix64, Steele, Lea and Flood 2014), so that a logged
//! decision replays exactly from its draw.

/// A deterministic stream of uniform numbers from one seed.
#[derive(Clone, Debug)]
pub struct Draws {
    state: u64,
}

impl Draws {
    /// The stream of `draw`.
    pub fn new(draw: u64) -> Self {
        Draws { state: draw }
    }

    /// The next 64 bits (splitmix64).
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// The next uniform number in [0, 1).
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// The next uniform index in `0..n` (0 for `n` = 0).
    pub fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            return 0;
        }
        (self.unit() * n as f64) as usize % n
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_draw_gives_the_same_stream_and_values_stay_in_range() {
        let (mut a, mut b) = (Draws::new(42), Draws::new(42));
        for _ in 0..100 {
            assert_eq!(a.next_u64(), b.next_u64());
            let u = a.unit();
            assert!((0.0..1.0).contains(&u));
            assert!(a.below(3) < 3);
            b.unit();
            b.below(3);
        }
        assert_ne!(Draws::new(1).next_u64(), Draws::new(2).next_u64());
    }
}
