//! Rendezvous scores: the fixed pseudo-random preference of every node for
//! every partition, which the claim algorithm ([`crate::claim`]) starts
//! from.
//!
//! Source: weighted rendezvous (highest random weight) hashing, Thaler and
//! Ravishankar 1998, in the exponential-race form of Schindelhauer and
//! Schomaker 2005. Everything here is fixed forever: a change reassigns
//! partitions of every existing cluster (and changes every ring version,
//! which [`crate::Ring::from_bytes`] detects).

use std::sync::OnceLock;

use twox_hash::XxHash3_64;

/// The per-node seed of the rendezvous scores. Fixed forever: changing it
/// reassigns every partition of every existing cluster.
pub(crate) fn node_seed(id: &str) -> u64 {
    let mut bytes = Vec::with_capacity(17 + id.len());
    bytes.extend_from_slice(b"kv-ring-claim-v1:");
    bytes.extend_from_slice(id.as_bytes());
    XxHash3_64::oneshot(&bytes)
}

/// The tie-break rank of a node among equal largest-remainder quotas.
pub(crate) fn tiebreak(id: &str) -> u64 {
    XxHash3_64::oneshot_with_seed(1, id.as_bytes())
}

/// Fractional bits of the fixed-point base-2 logarithm.
const LOG_FRAC: u32 = 40;
/// log2 of the table's interval count.
const TABLE_BITS: u32 = 12;

/// `T[k] = floor(log2(1 + k / 4096) * 2^40)` for k in 0..=4096, computed
/// once with integers only (the bit-by-bit binary logarithm), so that every
/// platform gets the same table.
fn log_table() -> &'static [i64] {
    static TABLE: OnceLock<Vec<i64>> = OnceLock::new();
    TABLE.get_or_init(|| {
        let size = 1u128 << TABLE_BITS;
        (0..=size)
            .map(|k| {
                // y = (1 + k/size) in Q1.63 (k == size gives exactly 2.0).
                let mut y = (size + k) << (63 - TABLE_BITS);
                let mut out = 0i64;
                if y >= 1 << 64 {
                    return 1 << LOG_FRAC;
                }
                for bit in (0..LOG_FRAC).rev() {
                    y = (y * y) >> 63;
                    if y >= 1 << 64 {
                        out |= 1 << bit;
                        y >>= 1;
                    }
                }
                out
            })
            .collect()
    })
}

/// `log2(x)` in fixed point with [`LOG_FRAC`] fractional bits, for
/// `x >= 1`: exact integer part, table with linear interpolation for the
/// fraction (error below 2e-8). Integer arithmetic only.
pub(crate) fn log2_fixed(x: u64) -> i64 {
    let x = x.max(1);
    let int = 63 - x.leading_zeros();
    // The bits below the leading one, as a 64-bit fraction of [0, 1).
    let frac = (x << (63 - int)) << 1;
    let k = (frac >> (64 - TABLE_BITS)) as usize;
    let t = (frac << TABLE_BITS) >> 32; // 32-bit interpolation weight
    let table = log_table();
    let (lo, hi) = (table[k], table[k + 1]);
    (i64::from(int) << LOG_FRAC) + lo + (((hi - lo) * t as i64) >> 32)
}

/// The rendezvous score `s(i, p)` of a node (by its seed and weight) for
/// partition `p`: `log2(u) / w` in fixed point, with `u` in (0, 1) the
/// xxh3 of `p` under the node's seed. Maximising it is minimising
/// `-ln(u) / w`, an exponential race: plain argmax picks node `i` with
/// probability `w_i / W` (weighted rendezvous hashing, Schindelhauer and
/// Schomaker 2005), so the quota-bounded solver starts near its answer.
/// Always <= 0; differences fit an i64.
pub(crate) fn score(seed: u64, weight: u32, p: u32) -> i64 {
    let h = XxHash3_64::oneshot_with_seed(seed, &p.to_le_bytes());
    // u = (2 * (h >> 11) + 1) / 2^54: 53 random bits, never 0 or 1.
    let x = ((h >> 11) << 1) | 1;
    let log_u = log2_fixed(x) - (54 << LOG_FRAC);
    (log_u << 10) / i64::from(weight.max(1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixed_point_log2_is_accurate() {
        for x in [1u64, 2, 3, 5, 1000, 123_456_789, (1 << 54) - 1, u64::MAX] {
            let want = (x as f64).log2();
            let got = log2_fixed(x) as f64 / (1u64 << LOG_FRAC) as f64;
            assert!((got - want).abs() < 1e-7, "{x}: {got} vs {want}");
        }
        assert_eq!(log2_fixed(1), 0);
        assert_eq!(log2_fixed(1 << 20), 20 << LOG_FRAC);
    }

    #[test]
    fn scores_are_weighted_races() {
        // Plain argmax over weights 1 and 3 picks the heavy node ~3/4 of
        // the time.
        let (a, b) = (node_seed("a"), node_seed("b"));
        let wins = (0..4096)
            .filter(|&p| score(b, 3, p) > score(a, 1, p))
            .count();
        assert!((2900..3250).contains(&wins), "{wins}");
    }
}
