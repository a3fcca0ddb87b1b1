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

use kv_types::{Member, NodeId, NodeStatus};
use kv_wire::{PeerRequest, PlanReport, PlannedMove, Response};
use tracing::debug;

use crate::cluster::Cluster;
use crate::peers::Peers;
use crate::placement::Placement;

/// The id a hypothetical joining node gets in a join plan.
pub const PLANNED_ID: &str = "planned-node";

/// What draining this node would move.
pub async fn drain(cluster: &Cluster, peers: &Peers, started: bool) -> anyhow::Result<PlanReport> {
    let me = cluster.me().id.clone();
    let mut members = cluster.members();
    for m in &mut members {
        if m.id == me {
            m.status = NodeStatus::Draining;
        }
    }
    plan(cluster, peers, &members, format!("drain {me}"), started).await
}

/// What a node joining in `zone` with `weight` would move.
pub async fn join(
    cluster: &Cluster,
    peers: &Peers,
    zone: &str,
    weight: u32,
) -> anyhow::Result<PlanReport> {
    let mut members = cluster.members();
    members.push(Member {
        id: NodeId::new(PLANNED_ID)?,
        zone: zone.to_string(),
        host: PLANNED_ID.to_string(),
        weight,
        status: NodeStatus::Joining,
    });
    plan(
        cluster,
        peers,
        &members,
        format!("join {zone} weight {weight}"),
        false,
    )
    .await
}

async fn plan(
    cluster: &Cluster,
    peers: &Peers,
    members: &[Member],
    change: String,
    started: bool,
) -> anyhow::Result<PlanReport> {
    let now = cluster.placement();
    let after = Placement::build(*now.target.config(), members)?;
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
    Ok(PlanReport {
        change,
        started,
        partitions: gains.len() as u64,
        moves: moves
            .into_iter()
            .map(|(to, (from, partitions, keys, bytes))| PlannedMove {
                to: to.to_string(),
                from: from.into_iter().map(|id| id.to_string()).collect(),
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
    let me = &cluster.me().id;
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
        let request = PeerRequest::PartitionStats { partitions, q };
        match peers
            .call(
                &holder,
                rand::random(),
                request,
                std::time::Duration::from_secs(30),
            )
            .await
        {
            Ok(Response::PartitionStats(stats)) => {
                for (p, keys, bytes) in stats {
                    out.insert(p, (keys, bytes));
                }
            }
            other => debug!(%holder, ?other, "no partition sizes from this holder"),
        }
    }
    out
}
