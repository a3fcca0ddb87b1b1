//! The seed's ring, kept as the baseline that the partition ring is measured
//! against (design.md, "Ring": the token ring of the design notes is the
//! baseline a test compares balance and movement against).
//!
//! Source: seed 002 (weighted consistent hashing: `150 * weight` virtual
//! nodes per physical node, each at `hash(name + "#" + i)`, a key owned by
//! the first virtual node clockwise, `ceilingEntry` with wrap-around). The
//! hash here is the store's xxh3-64 (seed 0) instead of the seed's
//! MurmurHash3, so both schemes see the same hash function. Not used for
//! placement.

use kv_types::{Member, NodeId, key_hash};

use crate::{Error, Result};

/// Virtual nodes (tokens) per unit of weight, from seed 002.
pub const TOKENS_PER_WEIGHT: u32 = 150;

/// 2^64 as a float: the size of the hash space.
const SPACE: f64 = 18_446_744_073_709_551_616.0;

/// A token ring: sorted token positions, each naming a node.
#[derive(Clone, Debug)]
pub struct TokenRing {
    /// `(position, node index)` sorted by position (then node index, so
    /// colliding tokens are ordered deterministically).
    tokens: Vec<(u64, u32)>,
    /// Node ids by index, sorted.
    nodes: Vec<NodeId>,
}

impl TokenRing {
    /// Places `150 * weight` tokens at `xxh3("{id}#{i}")` for every member
    /// that may own data (status `JOINING`/`UP`, weight > 0).
    ///
    /// # Errors
    /// [`Error::NoEligibleMember`] if no member may own data.
    pub fn build(members: &[Member]) -> Result<TokenRing> {
        let mut nodes: Vec<&Member> = members
            .iter()
            .filter(|m| m.status.takes_ownership() && m.weight > 0)
            .collect();
        if nodes.is_empty() {
            return Err(Error::NoEligibleMember);
        }
        nodes.sort_by(|a, b| a.id.cmp(&b.id));
        let mut tokens = Vec::new();
        for (i, m) in nodes.iter().enumerate() {
            for t in 0..TOKENS_PER_WEIGHT * m.weight {
                let pos = key_hash(format!("{}#{t}", m.id).as_bytes());
                tokens.push((pos, i as u32));
            }
        }
        tokens.sort_unstable();
        Ok(TokenRing {
            tokens,
            nodes: nodes.into_iter().map(|m| m.id.clone()).collect(),
        })
    }

    /// The node owning `hash`: the first token at or after it, wrapping.
    pub fn owner_of(&self, hash: u64) -> &NodeId {
        &self.nodes[self.owner_index(hash) as usize]
    }

    fn owner_index(&self, hash: u64) -> u32 {
        let at = self.tokens.partition_point(|(pos, _)| *pos < hash);
        self.tokens.get(at).unwrap_or(&self.tokens[0]).1
    }

    /// Each node's share (0.0..=1.0) of the hash space, by node id.
    pub fn shares(&self) -> Vec<(NodeId, f64)> {
        let mut space = vec![0u128; self.nodes.len()];
        for (k, &(pos, node)) in self.tokens.iter().enumerate() {
            // The token owns (previous token, pos]; the first one wraps.
            let prev = if k == 0 {
                self.tokens[self.tokens.len() - 1].0
            } else {
                self.tokens[k - 1].0
            };
            let arc = if k == 0 {
                (1u128 << 64) - u128::from(prev) + u128::from(pos)
            } else {
                u128::from(pos - prev)
            };
            space[node as usize] += arc;
        }
        self.nodes
            .iter()
            .zip(space)
            .map(|(id, s)| (id.clone(), s as f64 / SPACE))
            .collect()
    }

    /// Fraction (0.0..=1.0) of the hash space whose owner differs between
    /// two token rings.
    pub fn moved_fraction(old: &TokenRing, new: &TokenRing) -> f64 {
        let mut bounds: Vec<u64> = old
            .tokens
            .iter()
            .chain(new.tokens.iter())
            .map(|t| t.0)
            .collect();
        bounds.sort_unstable();
        bounds.dedup();
        let mut moved = 0u128;
        for (k, &b) in bounds.iter().enumerate() {
            // Between consecutive boundaries both owners are constant: the
            // segment (previous boundary, b] belongs to owner_of(b).
            let arc = if k == 0 {
                (1u128 << 64) - u128::from(bounds[bounds.len() - 1]) + u128::from(b)
            } else {
                u128::from(b - bounds[k - 1])
            };
            if old.owner_of(b) != new.owner_of(b) {
                moved += arc;
            }
        }
        moved as f64 / SPACE
    }
}

#[cfg(test)]
mod tests {
    use kv_types::NodeStatus;

    use super::*;

    fn member(id: &str, weight: u32) -> Member {
        Member {
            id: NodeId::new(id).unwrap(),
            zone: "z".into(),
            host: id.into(),
            weight,
            status: NodeStatus::Up,
        }
    }

    #[test]
    fn shares_sum_to_one_and_follow_weight() {
        let ring = TokenRing::build(&[member("a", 1), member("b", 3)]).unwrap();
        let shares = ring.shares();
        let total: f64 = shares.iter().map(|s| s.1).sum();
        assert!((total - 1.0).abs() < 1e-9);
        assert!(shares[1].1 > 0.6, "{shares:?}");
    }

    #[test]
    fn a_join_moves_only_to_the_new_node() {
        let old = TokenRing::build(&[member("a", 1), member("b", 1)]).unwrap();
        let new = TokenRing::build(&[member("a", 1), member("b", 1), member("c", 1)]).unwrap();
        let moved = TokenRing::moved_fraction(&old, &new);
        let c_share = new.shares()[2].1;
        assert!((moved - c_share).abs() < 1e-9, "{moved} vs {c_share}");
        assert_eq!(TokenRing::moved_fraction(&old, &old), 0.0);
    }
}
