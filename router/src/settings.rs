//! The ring's three cluster-wide settings and the partition arithmetic they
//! imply: which partition a key hash falls in, and which hashes a partition
//! covers.
//!
//! Source: Dynamo (DeCandia et al., SOSP 2007) section 6.2, "strategy 3":
//! the hash space is cut into Q equal partitions; design.md, Ring fixes the hash
//! (64-bit xxh3, seed 0) and makes Q a power of two, so a partition is simply
//! the top log2(Q) bits of the key hash and every partition is one
//! contiguous range of hashes (one contiguous range on disk, one Merkle tree,
//! one streaming unit).

use serde::{Deserialize, Serialize};

use crate::{Error, Result};

/// Smallest allowed partition count Q.
pub const MIN_PARTITIONS: u32 = 8;
/// Largest allowed partition count Q (2^16).
pub const MAX_PARTITIONS: u32 = 65_536;

/// The ring's settings. All three are cluster-wide and must be equal on
/// every node (they are part of the ring version); Q is fixed when the
/// cluster is created and never changes (design.md, Ring).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RingSettings {
    /// Q, the number of partitions: a power of two in
    /// [`MIN_PARTITIONS`]..=[`MAX_PARTITIONS`]. Default 1024 (design.md, Ring:
    /// at least 8x the largest planned node count).
    pub partitions: u32,
    /// N, the number of distinct nodes in each preference list (replicas of
    /// every key). At least 1; default 3 (design.md, Replication).
    pub replicas: usize,
    /// Minimum number of zones each preference list spans, when that many
    /// zones own partitions. Default 2 (design.md, Ring: not 3, "so a small zone
    /// is not forced to hold a copy of everything").
    pub zone_redundancy: usize,
}

impl Default for RingSettings {
    fn default() -> Self {
        RingSettings {
            partitions: 1024,
            replicas: 3,
            zone_redundancy: 2,
        }
    }
}

impl RingSettings {
    /// Checks the ranges documented on each field.
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] naming the bad field.
    pub fn validate(&self) -> Result<()> {
        let q = self.partitions;
        if !q.is_power_of_two() || !(MIN_PARTITIONS..=MAX_PARTITIONS).contains(&q) {
            return Err(Error::InvalidConfig(format!(
                "partitions must be a power of two in {MIN_PARTITIONS}..={MAX_PARTITIONS}, got {q}"
            )));
        }
        if self.replicas == 0 {
            return Err(Error::InvalidConfig("replicas must be at least 1".into()));
        }
        if self.replicas > u8::MAX as usize {
            return Err(Error::InvalidConfig(format!(
                "replicas must be at most {}, got {}",
                u8::MAX,
                self.replicas
            )));
        }
        if self.zone_redundancy > u8::MAX as usize {
            return Err(Error::InvalidConfig(format!(
                "zone_redundancy must be at most {}, got {}",
                u8::MAX,
                self.zone_redundancy
            )));
        }
        Ok(())
    }

    /// log2(Q): how many top bits of the key hash name the partition.
    pub fn partition_bits(&self) -> u32 {
        self.partitions.trailing_zeros()
    }

    /// The partition (0..Q) that a 64-bit key hash falls in: its top
    /// log2(Q) bits, so partition `p` holds the hashes
    /// `[p * 2^64/Q, (p + 1) * 2^64/Q)`. Assumes a validated config.
    pub fn partition_of(&self, hash: u64) -> u32 {
        // Q >= 8 after validation, so the shift is at most 61; `checked_shr`
        // keeps an unvalidated Q = 1 (shift 64) from panicking.
        hash.checked_shr(64 - self.partition_bits()).unwrap_or(0) as u32
    }

    /// The partition of `key`: [`Self::partition_of`] its
    /// [`kv_types::key_hash`] (xxh3-64, seed 0).
    pub fn key_partition(&self, key: &[u8]) -> u32 {
        self.partition_of(kv_types::key_hash(key))
    }

    /// The first and last (inclusive) 64-bit hash of partition `p`.
    /// `p` is taken modulo Q.
    pub fn partition_range(&self, p: u32) -> (u64, u64) {
        let width_bits = 64 - self.partition_bits();
        let p = u64::from(p % self.partitions.max(1));
        let first = p.checked_shl(width_bits).unwrap_or(0);
        let span = 1u64.checked_shl(width_bits).map_or(u64::MAX, |w| w - 1);
        (first, first | span)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validation() {
        assert!(RingSettings::default().validate().is_ok());
        for q in [0, 1, 4, 1000, 131_072] {
            let c = RingSettings {
                partitions: q,
                ..RingSettings::default()
            };
            assert!(c.validate().is_err(), "{q}");
        }
        let c = RingSettings {
            replicas: 0,
            ..RingSettings::default()
        };
        assert!(c.validate().is_err());
    }

    #[test]
    fn partitions_are_the_top_bits_and_ranges_tile_the_space() {
        let c = RingSettings {
            partitions: 8,
            ..RingSettings::default()
        };
        assert_eq!(c.partition_of(0), 0);
        assert_eq!(c.partition_of(u64::MAX), 7);
        assert_eq!(c.partition_of(1 << 61), 1);
        assert_eq!(c.partition_range(0), (0, (1 << 61) - 1));
        assert_eq!(c.partition_range(7), (7 << 61, u64::MAX));
        for p in 0..8 {
            let (a, b) = c.partition_range(p);
            assert_eq!(c.partition_of(a), p);
            assert_eq!(c.partition_of(b), p);
            if p < 7 {
                assert_eq!(c.partition_range(p + 1).0, b + 1);
            }
        }
        let big = RingSettings {
            partitions: MAX_PARTITIONS,
            ..RingSettings::default()
        };
        assert_eq!(big.partition_of(u64::MAX), MAX_PARTITIONS - 1);
    }

    #[test]
    fn config_reads_from_toml_like_serde_with_defaults() {
        // Any serde format works; the codec is the one at hand.
        let c = RingSettings::default();
        let bytes = kv_types::codec::encode(&c).unwrap();
        assert_eq!(kv_types::codec::decode::<RingSettings>(&bytes).unwrap(), c);
    }
}
