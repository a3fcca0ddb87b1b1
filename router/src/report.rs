//! Balance and movement of the partition ring against the seed's token ring
//! (the comparison design.md, "Ring" requires), for tests, the `ring_report`
//! example and docs/benchmarks.md.
//!
//! Definitions, both computed over shares of the 64-bit hash space:
//! - **balance** = max over nodes of `share / fair share` (fair share =
//!   weight / total weight; with equal weights this is max/mean). 1.0 is
//!   perfect.
//! - **join movement** = fraction of the hash space whose owner changes when
//!   node `n+1` joins `n` nodes; its lower bound is the joiner's fair share
//!   `1/(n+1)`.
//! - **leave movement** = the same when one of the `n` nodes leaves,
//!   averaged over every choice of the leaving node; its lower bound is the
//!   leaver's fair share `1/n`.

use kv_types::{Member, NodeId, NodeStatus};

use crate::tokens::TokenRing;
use crate::{Result, Ring, RingSettings};

/// Balance and movement of one scheme at one cluster size.
#[derive(Clone, Debug, PartialEq)]
pub struct BalanceRow {
    /// `"partitions"` (this crate's ring) or `"tokens"` (the seed's).
    pub scheme: &'static str,
    /// Nodes before the join / leave.
    pub nodes: usize,
    /// Max over nodes of share / fair share (1.0 = perfect).
    pub balance: f64,
    /// Fraction of the hash space moved when one node joins.
    pub join_moved: f64,
    /// The lower bound of `join_moved`: 1 / (nodes + 1).
    pub join_optimal: f64,
    /// Fraction moved when one node leaves, averaged over the leaver.
    pub leave_moved: f64,
    /// The lower bound of `leave_moved`: 1 / nodes.
    pub leave_optimal: f64,
}

impl BalanceRow {
    /// `join_moved / join_optimal`: 1.0 is the minimum possible.
    pub fn join_ratio(&self) -> f64 {
        self.join_moved / self.join_optimal
    }
    /// `leave_moved / leave_optimal`: 1.0 is the minimum possible.
    pub fn leave_ratio(&self) -> f64 {
        self.leave_moved / self.leave_optimal
    }
}

/// `n` members `node1..=nodeN` of weight 1, status UP, on distinct hosts,
/// spread round-robin over zones `zone-a`, `zone-b`, `zone-c`.
pub fn synthetic_members(n: usize) -> Vec<Member> {
    (1..=n)
        .map(|i| {
            let id = format!("node{i}");
            Member {
                id: NodeId::new(id.clone()).expect("node<i> is a valid node id"),
                zone: format!("zone-{}", ["a", "b", "c"][(i - 1) % 3]),
                host: format!("host-{id}"),
                weight: 1,
                status: NodeStatus::Up,
            }
        })
        .collect()
}

/// One row per scheme and node count: `partitions` rows use a ring of Q =
/// `partitions` (default N and zone redundancy), `tokens` rows the seed's
/// 150 tokens per node.
///
/// # Errors
/// Whatever [`Ring::build`] returns for `partitions` (e.g. not a power of
/// two).
pub fn balance_report(node_counts: &[usize], partitions: u32) -> Result<Vec<BalanceRow>> {
    let config = RingSettings {
        partitions,
        ..RingSettings::default()
    };
    let mut rows = Vec::new();
    for &n in node_counts.iter().filter(|&&n| n >= 2) {
        let members = synthetic_members(n);
        let joined = synthetic_members(n + 1);
        let leaves: Vec<Vec<Member>> = (0..n)
            .map(|k| {
                let mut m = members.clone();
                m.remove(k);
                m
            })
            .collect();
        let fair = 1.0 / n as f64;

        let ring = Ring::build(config, &members)?;
        let balance = members
            .iter()
            .map(|m| ring.ownership_share(&m.id) / fair)
            .fold(0.0, f64::max);
        let join = Ring::owner_change_fraction(&ring, &Ring::build(config, &joined)?);
        let mut leave = 0.0;
        for m in &leaves {
            leave += Ring::owner_change_fraction(&ring, &Ring::build(config, m)?);
        }
        rows.push(row("partitions", n, balance, join, leave / n as f64));

        let tokens = TokenRing::build(&members)?;
        let balance = tokens
            .shares()
            .iter()
            .map(|(_, s)| s / fair)
            .fold(0.0, f64::max);
        let join = TokenRing::moved_fraction(&tokens, &TokenRing::build(&joined)?);
        let mut leave = 0.0;
        for m in &leaves {
            leave += TokenRing::moved_fraction(&tokens, &TokenRing::build(m)?);
        }
        rows.push(row("tokens", n, balance, join, leave / n as f64));
    }
    Ok(rows)
}

fn row(scheme: &'static str, n: usize, balance: f64, join: f64, leave: f64) -> BalanceRow {
    BalanceRow {
        scheme,
        nodes: n,
        balance,
        join_moved: join,
        join_optimal: 1.0 / (n + 1) as f64,
        leave_moved: leave,
        leave_optimal: 1.0 / n as f64,
    }
}

/// Renders rows as a Markdown table (for docs/benchmarks.md).
pub fn render_table(rows: &[BalanceRow]) -> String {
    let mut out = String::from(
        "| scheme | nodes | balance (max/fair) | join moved | join / optimum | leave moved | leave / optimum |\n\
         |---|---:|---:|---:|---:|---:|---:|\n",
    );
    for r in rows {
        out.push_str(&format!(
            "| {} | {} | {:.3} | {:.4} | {:.3} | {:.4} | {:.3} |\n",
            r.scheme,
            r.nodes,
            r.balance,
            r.join_moved,
            r.join_ratio(),
            r.leave_moved,
            r.leave_ratio()
        ));
    }
    out
}
