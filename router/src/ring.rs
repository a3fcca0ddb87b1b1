//! The ring: the owner and preference list of every partition, computed from
//! the member set alone.
//!
//! Source: Dynamo section 6.2 "strategy 3" (Q equal partitions, claimed by
//! nodes) and design.md, Ring. [`Ring::build`] sorts the members by id, keeps
//! the eligible ones (status `JOINING` or `UP`, weight > 0), claims
//! partitions with [`crate::claim`] and precomputes all Q preference lists
//! with [`crate::preference`]; every lookup afterwards is an index.

use std::collections::HashMap;
use std::hash::Hasher;

use kv_types::{Member, NodeId};
use twox_hash::XxHash3_64;

use crate::settings::RingSettings;
use crate::{Error, Result, claim, preference, rendezvous};

/// Largest member weight accepted ([`kv_types::Member::weight`] documents
/// 1..=1000; 0 means "owns nothing").
pub const MAX_WEIGHT: u32 = 1000;

/// Most members that may own partitions at once. The claim algorithm keeps
/// an owners x owners cost table and runs an O(owners^2) search per
/// correction, so it is sized for clusters of up to a few hundred nodes
/// (100 owners and Q = 4096 build in about 15 ms).
pub const MAX_OWNERS: usize = 1024;

/// The placement of every partition: owners, preference lists and a version.
///
/// Immutable; a membership change builds a new ring. Two nodes that build a
/// ring from the same member set and config get equal rings with equal
/// [`Ring::version`]s.
#[derive(Clone, Debug, PartialEq)]
pub struct Ring {
    /// Q, N and the zone requirement.
    config: RingSettings,
    /// Every member given to `build`, sorted by id (including DRAINING and
    /// LEFT ones, which own nothing but are kept for persistence).
    members: Vec<Member>,
    /// Partitions owned (as first replica) by each of `members`.
    owned: Vec<u32>,
    /// Length of every preference list.
    list_len: usize,
    /// All preference lists, flattened: list `p` is
    /// `lists[p * list_len..(p + 1) * list_len]`; its first entry is the
    /// owner of `p`.
    lists: Vec<NodeId>,
    /// Hash of the config and all preference lists.
    version: u64,
}

/// A partition whose preference list differs between two rings (see
/// [`Ring::diff`]): the unit of a join or drain plan.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Move {
    /// The partition (0..Q).
    pub partition: u32,
    /// Its preference list in the old ring.
    pub from: Vec<NodeId>,
    /// Its preference list in the new ring.
    pub to: Vec<NodeId>,
}

impl Ring {
    /// Builds the ring of `members` under `config`: deterministic, whatever
    /// the order of `members` (see the `claim` and `preference` modules for
    /// the algorithms).
    ///
    /// # Errors
    /// [`Error::InvalidConfig`] for a bad config, [`Error::DuplicateMember`]
    /// if an id repeats, [`Error::InvalidMember`] for a weight above
    /// [`MAX_WEIGHT`], [`Error::NoEligibleMember`] if no member may own
    /// partitions, [`Error::TooManyOwners`] above [`MAX_OWNERS`].
    pub fn build(config: RingSettings, members: &[Member]) -> Result<Ring> {
        config.validate()?;
        let mut members = members.to_vec();
        members.sort_by(|a, b| a.id.cmp(&b.id));
        for pair in members.windows(2) {
            if pair[0].id == pair[1].id {
                return Err(Error::DuplicateMember(pair[0].id.clone()));
            }
        }
        if let Some(m) = members.iter().find(|m| m.weight > MAX_WEIGHT) {
            return Err(Error::InvalidMember {
                id: m.id.clone(),
                reason: format!("weight {} exceeds {MAX_WEIGHT}", m.weight),
            });
        }
        // Indices (into `members`) of the nodes that may own partitions.
        let eligible: Vec<usize> = (0..members.len())
            .filter(|&i| members[i].status.takes_ownership() && members[i].weight > 0)
            .collect();
        if eligible.is_empty() {
            return Err(Error::NoEligibleMember);
        }
        if eligible.len() > MAX_OWNERS {
            return Err(Error::TooManyOwners {
                count: eligible.len(),
                max: MAX_OWNERS,
            });
        }
        let ids: Vec<&str> = eligible.iter().map(|&i| members[i].id.as_str()).collect();
        let weights: Vec<u32> = eligible.iter().map(|&i| members[i].weight).collect();
        let tiebreaks: Vec<u64> = ids.iter().map(|id| rendezvous::tiebreak(id)).collect();
        let seeds: Vec<u64> = ids.iter().map(|id| rendezvous::node_seed(id)).collect();
        let quota = claim::quotas(config.partitions, &weights, &tiebreaks);
        let owner = claim::assign(config.partitions, eligible.len(), &quota, |i, p| {
            rendezvous::score(seeds[i], weights[i], p)
        });

        let zone = intern(eligible.iter().map(|&i| members[i].zone.as_str()));
        let host = intern(eligible.iter().map(|&i| members[i].host.as_str()));
        let (list_len, flat) = preference::Placement {
            owner: &owner,
            zone: &zone,
            host: &host,
            replicas: config.replicas,
            zone_redundancy: config.zone_redundancy,
        }
        .lists();
        let lists: Vec<NodeId> = flat
            .iter()
            .map(|&e| members[eligible[e as usize]].id.clone())
            .collect();
        let mut owned = vec![0u32; members.len()];
        for &o in &owner {
            owned[eligible[o as usize]] += 1;
        }
        let version = version_of(&config, list_len, &lists);
        Ok(Ring {
            config,
            members,
            owned,
            list_len,
            lists,
            version,
        })
    }

    /// The config the ring was built with.
    pub fn config(&self) -> &RingSettings {
        &self.config
    }

    /// Q, the number of partitions.
    pub fn partitions(&self) -> u32 {
        self.config.partitions
    }

    /// Every member given to [`Ring::build`], sorted by id, whatever its
    /// status.
    pub fn members(&self) -> &[Member] {
        &self.members
    }

    /// The partition of a 64-bit key hash: its top log2(Q) bits.
    pub fn partition_of(&self, hash: u64) -> u32 {
        self.config.partition_of(hash)
    }

    /// The partition of `key` (xxh3-64 with seed 0, then the top bits).
    pub fn key_partition(&self, key: &[u8]) -> u32 {
        self.config.key_partition(key)
    }

    /// The first and last (inclusive) key hash of partition `p` (mod Q).
    pub fn partition_range(&self, p: u32) -> (u64, u64) {
        self.config.partition_range(p)
    }

    /// The preference list of partition `p` (taken mod Q): its owner first,
    /// then the other replicas in the order a coordinator tries them;
    /// `min(N, owners)` distinct nodes.
    pub fn preference_list(&self, p: u32) -> &[NodeId] {
        let p = (p % self.config.partitions) as usize;
        &self.lists[p * self.list_len..(p + 1) * self.list_len]
    }

    /// The preference list of the partition of `key`.
    pub fn key_preference_list(&self, key: &[u8]) -> &[NodeId] {
        self.preference_list(self.key_partition(key))
    }

    /// The owner (first replica) of partition `p` (taken mod Q).
    pub fn owner(&self, p: u32) -> &NodeId {
        // Lists are never empty: build requires an eligible member, which
        // then owns at least one partition.
        &self.preference_list(p)[0]
    }

    /// The identifier of this placement: an xxh3-64 of the config and every
    /// partition's preference list. It changes whenever an owner or a
    /// preference list changes, and is equal on every node that built the
    /// same placement. Compare it for equality only; it is not ordered
    /// (a newer ring does not have a larger version).
    pub fn version(&self) -> u64 {
        self.version
    }

    /// Share of the partitions (= share of the hash space) that `id` owns as
    /// first replica, in 0.0..=1.0; 0.0 for an unknown id.
    pub fn ownership_share(&self, id: &NodeId) -> f64 {
        self.owned_partitions(id) as f64 / f64::from(self.config.partitions)
    }

    /// Number of partitions that `id` owns as first replica (0 if unknown).
    pub fn owned_partitions(&self, id: &NodeId) -> u32 {
        self.members
            .binary_search_by(|m| m.id.cmp(id))
            .map_or(0, |i| self.owned[i])
    }

    /// The partitions whose preference list differs between `old` and `new`,
    /// in partition order, with both lists: what a join or drain will move.
    ///
    /// # Errors
    /// [`Error::PartitionCountMismatch`] if the rings have different Q.
    pub fn diff(old: &Ring, new: &Ring) -> Result<Vec<Move>> {
        if old.config.partitions != new.config.partitions {
            return Err(Error::PartitionCountMismatch {
                old: old.config.partitions,
                new: new.config.partitions,
            });
        }
        Ok((0..old.config.partitions)
            .filter_map(|p| {
                let (from, to) = (old.preference_list(p), new.preference_list(p));
                (from != to).then(|| Move {
                    partition: p,
                    from: from.to_vec(),
                    to: to.to_vec(),
                })
            })
            .collect())
    }

    /// Fraction (0.0..=1.0) of the partitions, hence of the hash space,
    /// whose owner differs between two rings of the same Q; 1.0 if Q
    /// differs. The movement measure of the ring report.
    pub fn owner_change_fraction(old: &Ring, new: &Ring) -> f64 {
        if old.config.partitions != new.config.partitions {
            return 1.0;
        }
        let q = old.config.partitions;
        let moved = (0..q).filter(|&p| old.owner(p) != new.owner(p)).count();
        moved as f64 / f64::from(q)
    }
}

/// Numbers equal strings by first appearance: `["a", "b", "a"]` -> `[0, 1, 0]`.
fn intern<'a>(labels: impl Iterator<Item = &'a str>) -> Vec<u32> {
    let mut seen: HashMap<&'a str, u32> = HashMap::new();
    labels
        .map(|l| {
            let next = seen.len() as u32;
            *seen.entry(l).or_insert(next)
        })
        .collect()
}

/// The ring version: xxh3-64 (seed 0) over a tag, the config and every
/// preference list, each id length-prefixed.
fn version_of(config: &RingSettings, list_len: usize, lists: &[NodeId]) -> u64 {
    let mut h = XxHash3_64::with_seed(0);
    h.write(b"kv-ring-version-v1");
    h.write(&config.partitions.to_le_bytes());
    h.write(&(config.replicas as u64).to_le_bytes());
    h.write(&(config.zone_redundancy as u64).to_le_bytes());
    h.write(&(list_len as u64).to_le_bytes());
    for id in lists {
        let s = id.as_str().as_bytes();
        h.write(&[s.len() as u8]);
        h.write(s);
    }
    h.finish()
}
