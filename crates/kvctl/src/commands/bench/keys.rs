//! Which key an operation of `kvctl bench` touches: uniform over the key
//! space, or Zipf-distributed (a few hot keys, a long tail).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use rand::Rng;

/// A key-index distribution over `0..n`.
#[derive(Clone, Debug)]
pub enum KeyDist {
    /// Every key equally likely.
    Uniform {
        /// Keys.
        n: u64,
    },
    /// Key `k` (0-based) with probability proportional to `1/(k+1)^s`.
    Zipf(Zipf),
    /// Every key in turn, `0, 1, ..., n-1, 0, ...` (shared by every
    /// client of the run): to load a key space.
    Sequential {
        /// Keys.
        n: u64,
        /// The next index.
        next: Arc<AtomicU64>,
    },
}

impl KeyDist {
    /// A key index in `0..n`.
    pub fn sample(&self, rng: &mut impl Rng) -> u64 {
        match self {
            KeyDist::Uniform { n } => rng.random_range(0..*n),
            KeyDist::Zipf(z) => z.sample(rng) - 1,
            KeyDist::Sequential { n, next } => next.fetch_add(1, Ordering::Relaxed) % n,
        }
    }
}

/// Zipf's distribution over `1..=n` with exponent `s > 0`, sampled by
/// rejection-inversion (Hörmann and Derflinger, 1996), as in the
/// `rand_distr` crate: constant time and memory whatever `n`.
#[derive(Clone, Debug)]
pub struct Zipf {
    n: f64,
    s: f64,
    t: f64,
    q: f64,
}

impl Zipf {
    /// The distribution over `1..=n`; `None` unless `n >= 1` and `s > 0`.
    pub fn new(n: u64, s: f64) -> Option<Zipf> {
        if n == 0 || !(s > 0.0 && s.is_finite()) {
            return None;
        }
        let n = n as f64;
        let q = if s == 1.0 { 1.0 } else { 1.0 / (1.0 - s) };
        let t = if s == 1.0 {
            1.0 + n.ln()
        } else {
            (n.powf(1.0 - s) - s) * q
        };
        Some(Zipf { n, s, t, q })
    }

    fn inverse_cdf(&self, p: f64) -> f64 {
        let pt = p * self.t;
        if pt <= 1.0 {
            pt
        } else if self.s == 1.0 {
            (pt - 1.0).exp()
        } else {
            (pt * (1.0 - self.s) + self.s).powf(self.q)
        }
    }

    /// A value in `1..=n`.
    pub fn sample(&self, rng: &mut impl Rng) -> u64 {
        loop {
            let inv_b = self.inverse_cdf(rng.random::<f64>());
            let x = (inv_b + 1.0).floor();
            let mut ratio = x.powf(-self.s);
            if x > 1.0 {
                ratio *= inv_b.powf(self.s);
            }
            if rng.random::<f64>() < ratio {
                return (x as u64).clamp(1, self.n as u64);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use rand::SeedableRng;
    use rand::rngs::StdRng;

    use super::*;

    #[test]
    fn zipf_favours_the_first_keys_and_stays_in_range() {
        let z = KeyDist::Zipf(Zipf::new(1000, 0.99).expect("valid"));
        let mut rng = StdRng::seed_from_u64(7);
        let mut counts = vec![0u32; 1000];
        for _ in 0..100_000 {
            let k = z.sample(&mut rng);
            assert!(k < 1000);
            counts[k as usize] += 1;
        }
        // Key 0 is about twice as frequent as key 1 and far above the mean.
        assert!(counts[0] > counts[1] * 3 / 2, "{:?}", &counts[..4]);
        assert!(counts[0] > 100_000 / 1000 * 20, "{}", counts[0]);
        assert!(Zipf::new(0, 1.0).is_none() && Zipf::new(10, 0.0).is_none());
        assert!(Zipf::new(10, 1.0).is_some());
    }

    #[test]
    fn uniform_covers_the_range() {
        let u = KeyDist::Uniform { n: 10 };
        let mut rng = StdRng::seed_from_u64(1);
        let mut seen = [false; 10];
        for _ in 0..1000 {
            seen[u.sample(&mut rng) as usize] = true;
        }
        assert!(seen.iter().all(|s| *s));
    }
}
