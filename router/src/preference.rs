//! Preference lists: the N distinct nodes that hold the keys of a partition,
//! in the order a coordinator tries them.
//!
//! # The rule
//!
//! Source: Dynamo section 4.3 (walk the ring clockwise from the key's
//! position, skipping positions of nodes already chosen, until N distinct
//! nodes) with the zone rule of design.md, "Ring" and seed 004's "skip duplicate
//! physical nodes" extended to hosts. For partition `p`:
//!
//! - `target = min(N, number of distinct owners)` (a node that owns no
//!   partition is never reached by the walk, so it holds no replicas);
//!   `required_zones = min(zone_redundancy, zones among owners, target)`.
//! - Walk the owners of `p, p+1, p+2, ...` (wrapping at Q). The owner of `p`
//!   always comes first. A candidate already chosen is skipped. Three passes
//!   over the walk, each appending to what earlier passes chose:
//!   1. **strict**: skip a candidate whose *host* is already in the list, and
//!      apply the zone rule;
//!   2. **relaxed host**: apply only the zone rule (several nodes of one
//!      machine may share a list when there are not enough hosts);
//!   3. **free**: take any node not chosen (never needed in practice: pass 2
//!      can always satisfy the zone rule, because every missing zone has an
//!      unchosen owner; kept so that no input can make a list short).
//! - **Zone rule**: when the slots still open are no more than the zones
//!   still missing (`target - len <= required_zones - zones_in_list`), skip
//!   a candidate whose zone is already in the list.
//! - A pass stops once the list is full or every distinct owner has been
//!   considered, so one list costs at most Q steps per pass (a few steps in
//!   practice: about n ln n when all nodes share one host).
//!
//! Why this keeps lists stable: like Dynamo's walk, a join or leave changes
//! a list only where the owner of a nearby partition changed.

/// How strict one pass of the walk is.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Pass {
    Strict,
    RelaxHost,
    Free,
}

/// Inputs of the walk, by node index (nodes in canonical id order).
pub(crate) struct Placement<'a> {
    /// Owner index of each partition.
    pub owner: &'a [u32],
    /// Zone number of each node (equal numbers = same zone).
    pub zone: &'a [u32],
    /// Host number of each node (equal numbers = same machine).
    pub host: &'a [u32],
    /// N from the ring config.
    pub replicas: usize,
    /// `zone_redundancy` from the ring config.
    pub zone_redundancy: usize,
}

impl Placement<'_> {
    /// All Q preference lists, flattened: list `p` is
    /// `out[p * len..(p + 1) * len]`. Returns `(len, out)`.
    pub(crate) fn lists(&self) -> (usize, Vec<u32>) {
        let n = self.zone.len();
        let mut is_owner = vec![false; n];
        for &o in self.owner {
            is_owner[o as usize] = true;
        }
        let owners: Vec<usize> = (0..n).filter(|&i| is_owner[i]).collect();
        let mut owner_zones: Vec<u32> = owners.iter().map(|&i| self.zone[i]).collect();
        owner_zones.sort_unstable();
        owner_zones.dedup();
        let target = self.replicas.min(owners.len());
        let required = self.zone_redundancy.min(owner_zones.len()).min(target);
        let mut walk = Walk {
            placement: self,
            target,
            required_zones: required,
            distinct_owners: owners.len(),
            stamp: vec![0; n],
            generation: 0,
        };
        let mut out = Vec::with_capacity(self.owner.len() * target);
        let mut list = Vec::with_capacity(target);
        for p in 0..self.owner.len() {
            walk.list(p, &mut list);
            out.extend_from_slice(&list);
        }
        (target, out)
    }
}

/// Scratch state reused across lists.
struct Walk<'a, 'b> {
    placement: &'a Placement<'b>,
    target: usize,
    required_zones: usize,
    distinct_owners: usize,
    /// `stamp[i] == generation` marks node `i` as considered in this pass.
    stamp: Vec<u64>,
    generation: u64,
}

impl Walk<'_, '_> {
    fn list(&mut self, p: usize, out: &mut Vec<u32>) {
        out.clear();
        for pass in [Pass::Strict, Pass::RelaxHost, Pass::Free] {
            if out.len() >= self.target {
                break;
            }
            debug_assert!(pass != Pass::Free, "zone rule unsatisfiable");
            self.pass(p, pass, out);
        }
    }

    fn pass(&mut self, p: usize, pass: Pass, out: &mut Vec<u32>) {
        let pl = self.placement;
        let q = pl.owner.len();
        self.generation += 1;
        let mut considered = 0;
        for k in 0..q {
            let c = pl.owner[(p + k) % q];
            let ci = c as usize;
            if self.stamp[ci] == self.generation {
                continue;
            }
            self.stamp[ci] = self.generation;
            considered += 1;
            if !out.contains(&c) && self.admissible(ci, pass, out) {
                out.push(c);
                if out.len() >= self.target {
                    return;
                }
            }
            if considered >= self.distinct_owners {
                return;
            }
        }
    }

    fn admissible(&self, c: usize, pass: Pass, chosen: &[u32]) -> bool {
        let pl = self.placement;
        if pass == Pass::Free {
            return true;
        }
        if pass == Pass::Strict && chosen.iter().any(|&x| pl.host[x as usize] == pl.host[c]) {
            return false;
        }
        let zone_used = chosen.iter().any(|&x| pl.zone[x as usize] == pl.zone[c]);
        if zone_used {
            // Distinct zones in the list (lists are short: N is at most 255).
            let zones = (0..chosen.len())
                .filter(|&k| {
                    let z = pl.zone[chosen[k] as usize];
                    !chosen[..k].iter().any(|&x| pl.zone[x as usize] == z)
                })
                .count();
            let open = self.target - chosen.len();
            let missing = self.required_zones.saturating_sub(zones);
            if open <= missing {
                return false;
            }
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lists(owner: &[u32], zone: &[u32], host: &[u32], n: usize, r: usize) -> Vec<Vec<u32>> {
        let (len, flat) = Placement {
            owner,
            zone,
            host,
            replicas: n,
            zone_redundancy: r,
        }
        .lists();
        flat.chunks(len).map(<[u32]>::to_vec).collect()
    }

    #[test]
    fn walks_clockwise_skipping_duplicates() {
        let owner = [0, 0, 1, 0, 2, 3];
        let l = lists(&owner, &[0, 1, 2, 3], &[0, 1, 2, 3], 3, 1);
        assert_eq!(l[0], vec![0, 1, 2]);
        assert_eq!(l[4], vec![2, 3, 0]);
        assert_eq!(l[5], vec![3, 0, 1]);
    }

    #[test]
    fn zone_rule_reserves_the_last_slots_for_missing_zones() {
        // Nodes 0,1,2 in zone 0; node 3 in zone 1; ring order 0,1,2,3.
        let owner = [0, 1, 2, 3];
        let l = lists(&owner, &[0, 0, 0, 1], &[0, 1, 2, 3], 3, 2);
        assert_eq!(l[0], vec![0, 1, 3]);
        assert_eq!(l[1], vec![1, 2, 3]);
        assert_eq!(l[3], vec![3, 0, 1]);
        // Without the requirement the walk is plain.
        let l = lists(&owner, &[0, 0, 0, 1], &[0, 1, 2, 3], 3, 1);
        assert_eq!(l[0], vec![0, 1, 2]);
    }

    #[test]
    fn hosts_are_distinct_when_possible_and_shared_when_not() {
        // Nodes 0 and 1 share host 0.
        let owner = [0, 1, 2, 3];
        let l = lists(&owner, &[0; 4], &[0, 0, 1, 2], 3, 1);
        assert_eq!(l[0], vec![0, 2, 3]);
        // Everything on one machine: the relaxed pass fills the list.
        let l = lists(&owner, &[0; 4], &[0; 4], 3, 1);
        assert_eq!(l[0], vec![0, 1, 2]);
    }

    #[test]
    fn fewer_owners_than_replicas_gives_short_lists() {
        let l = lists(&[0, 1, 0, 1], &[0, 1], &[0, 1], 3, 2);
        assert_eq!(l[1], vec![1, 0]);
    }
}
