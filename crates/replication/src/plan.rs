//! Plans of membership changes: before anything moves, which partitions,
//! how many keys and bytes go to which node (`kvctl drain --dry-run`,
//! `kvctl plan join`).
//!
//! A plan compares the current ring (data holders now) with the target
//! ring the change would produce; a node receives every partition of which
//! it becomes a target replica without being a current one. Keys and bytes
//! are counted by one live current holder of each such partition (a scan of
//! that partition: plans are cheap next to the move they describe).

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use kv_types::{Member, NodeId, NodeStatus};
use tracing::debug;

use crate::placement::Placement;
use crate::{Cluster, Error, Peers, Result};

/// The id a hypothetical joining node gets in a join plan.
pub const PLANNED_ID: &str = "planned-node";

/// How long a holder may take to count its partitions.
const STATS_TIMEOUT: Duration = Duration::from_secs(30);

/// What a membership change moves.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    /// What the plan is for, e.g. `drain node3` or `join zone-b weight 1`.
    pub change: String,
    /// Whether it was only computed (dry run, plan) or started.
    pub started: bool,
    /// Partitions whose replicas change.
    pub partitions: u64,
    /// Per destination node: what it receives.
    pub moves: Vec<PlannedMove>,
}

/// What one node receives in a [`Plan`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlannedMove {
    /// Receiving node.
    pub to: NodeId,
    /// Nodes it receives from (the partitions' current holders).
    pub from: Vec<NodeId>,
    /// Partitions it gains.
    pub partitions: u64,
    /// Keys in them (as the current holders count them).
    pub keys: u64,
    /// Bytes in them (encoded records).
    pub bytes: u64,
}

/// What draining this node would move.
///
/// # Errors
/// [`Error::Internal`] when no ring can be built without this node.
pub async fn drain(cluster: &Cluster, peers: &Peers, started: bool) -> Result<Plan> {
    let me = cluster.id().clone();
    let mut members = cluster.members();
    for m in &mut members {
        if m.id == me {
            m.status = NodeStatus::Draining;
        }
    }
    plan(cluster, peers, &members, format!("drain {me}"), started).await
}

/// What a node joining in `zone` with `weight` would move.
///
/// # Errors
/// [`Error::Internal`] when no ring can be built with it.
pub async fn join(cluster: &Cluster, peers: &Peers, zone: &str, weight: u32) -> Result<Plan> {
    let mut members = cluster.members();
    members.push(Member {
        id: NodeId::new(PLANNED_ID).map_err(|e| Error::Internal(e.to_string()))?,
        zone: zone.to_string(),
        host: PLANNED_ID.to_string(),
        weight,
        status: NodeStatus::Joining,
    });
    let change = format!("join {zone} weight {weight}");
    plan(cluster, peers, &members, change, false).await
}

async fn plan(
    cluster: &Cluster,
    peers: &Peers,
    members: &[Member],
    change: String,
    started: bool,
) -> Result<Plan> {
    let now = cluster.placement();
    let after = Placement::build(*now.target.config(), members)
        .map_err(|e| Error::Internal(format!("cannot build the ring after {change}: {e}")))?;
    let q = now.current.partitions();
    // Partition -> nodes that gain it.
    let mut gains: BTreeMap<u32, Vec<NodeId>> = BTreeMap::new();
    for p in 0..q {
        let holders = now.current.preference_list(p);
        let gained: Vec<NodeId> = after
            .target
            .preference_list(p)
            .iter()
            .filter(|id| !holders.contains(id))
            .cloned()
            .collect();
        if !gained.is_empty() {
            gains.insert(p, gained);
        }
    }
    let sizes = sizes(cluster, peers, &now, gains.keys().copied().collect()).await;
    let mut moves: BTreeMap<NodeId, (BTreeSet<NodeId>, u64, u64, u64)> = BTreeMap::new();
    for (p, gained) in &gains {
        let (keys, bytes) = sizes.get(p).copied().unwrap_or((0, 0));
        for to in gained {
            let entry = moves.entry(to.clone()).or_default();
            entry
                .0
                .extend(now.current.preference_list(*p).iter().cloned());
            entry.1 += 1;
            entry.2 += keys;
            entry.3 += bytes;
        }
    }
    Ok(Plan {
        change,
        started,
        partitions: gains.len() as u64,
        moves: moves
            .into_iter()
            .map(|(to, (from, partitions, keys, bytes))| PlannedMove {
                to,
                from: from.into_iter().collect(),
                partitions,
                keys,
                bytes,
            })
            .collect(),
    })
}

/// Keys and bytes of each partition, counted by a live current holder
/// (this node when it holds it).
async fn sizes(
    cluster: &Cluster,
    peers: &Peers,
    now: &Placement,
    partitions: Vec<u32>,
) -> BTreeMap<u32, (u64, u64)> {
    let me = cluster.id();
    let mut by_holder: BTreeMap<NodeId, Vec<u32>> = BTreeMap::new();
    for p in partitions {
        let holders = now.current.preference_list(p);
        let holder = if holders.contains(me) {
            Some(me.clone())
        } else {
            holders.iter().find(|id| cluster.is_alive(id)).cloned()
        };
        if let Some(h) = holder {
            by_holder.entry(h).or_default().push(p);
        }
    }
    let q = now.current.partitions();
    let mut out = BTreeMap::new();
    for (holder, partitions) in by_holder {
        match peers
            .partition_stats(&holder, partitions, q, STATS_TIMEOUT)
            .await
        {
            Ok(stats) => {
                for (p, keys, bytes) in stats {
                    out.insert(p, (keys, bytes));
                }
            }
            Err(e) => debug!(%holder, error = %e, "no partition sizes from this holder"),
        }
    }
    out
}
