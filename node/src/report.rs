//! `status` and `explain`: what this node knows, for kvctl.

use kv_router::{ExcludeReason, Op};
use kv_types::key_hash;
use kv_wire::{ExplainReplica, ExplainReport, NodeReport, StatusReport};

use crate::cluster::Cluster;
use crate::scoring::Scoring;

/// Membership and ring as this node sees them: every ring member and every
/// node gossip knows (including ones that left).
pub fn status(cluster: &Cluster) -> StatusReport {
    let ring = cluster.ring();
    let view = cluster.view();
    let me = cluster.me();
    let mut nodes: Vec<NodeReport> = Vec::new();
    for member in ring.members() {
        let state = view.members.get(&member.id);
        let addr = if member.id == me.id {
            me.client_addr.to_string()
        } else {
            state.map_or_else(String::new, |s| s.info.client_addr.to_string())
        };
        nodes.push(NodeReport {
            id: member.id.to_string(),
            addr,
            zone: member.zone.clone(),
            host: member.host.clone(),
            status: member.status.as_str().to_string(),
            alive: cluster.is_alive(&member.id),
            ring_share: ring.ownership_share(&member.id),
            transfer: transfer_of(state),
            resp: published(state, crate::front::RESP_ADDR),
            admin: published(state, crate::front::ADMIN_ADDR),
        });
    }
    for (id, state) in &view.members {
        if ring.members().iter().any(|m| m.id == *id) {
            continue;
        }
        nodes.push(NodeReport {
            id: id.to_string(),
            addr: state.info.client_addr.to_string(),
            zone: state.info.zone.clone(),
            host: state.info.host.clone(),
            status: state.info.status.as_str().to_string(),
            alive: state.alive,
            ring_share: 0.0,
            transfer: transfer_of(Some(state)),
            resp: published(Some(state), crate::front::RESP_ADDR),
            admin: published(Some(state), crate::front::ADMIN_ADDR),
        });
    }
    nodes.sort_by(|a, b| a.id.cmp(&b.id));
    StatusReport {
        node: me.id.to_string(),
        ring_version: ring.version(),
        partitions: ring.partitions(),
        replicas: u8::try_from(ring.config().replicas).unwrap_or(u8::MAX),
        nodes,
    }
}

/// A node's streaming progress as it publishes it in gossip.
fn transfer_of(state: Option<&kv_gossip::MemberState>) -> String {
    state
        .and_then(|s| s.extra.get(crate::transfer::GOSSIP_KEY))
        .cloned()
        .unwrap_or_default()
}

/// A gossip key a node published (its RESP or admin address), or "".
fn published(state: Option<&kv_gossip::MemberState>, key: &str) -> String {
    state
        .and_then(|s| s.extra.get(key))
        .cloned()
        .unwrap_or_default()
}

/// How a read of `key` would be routed from this node, with the scores.
pub fn explain(cluster: &Cluster, scoring: &Scoring, key: &[u8]) -> ExplainReport {
    let placement = cluster.placement();
    let ring = placement.target.clone();
    let view = cluster.view();
    let hash = key_hash(key);
    let partition = ring.partition_of(hash);
    // The current holders, then (while the partition moves) its pending new
    // owners; a stable cluster lists exactly its N replicas.
    let preference = placement.replicas(partition).all();
    let ranked = scoring.rank(cluster, &preference, Op::Get);
    let replicas = preference
        .iter()
        .map(|id| {
            let r = ranked.iter().find(|r| r.id == *id);
            let state = view.members.get(id);
            let member = ring
                .members()
                .iter()
                .chain(placement.current.members().iter())
                .find(|m| m.id == *id);
            ExplainReplica {
                id: id.to_string(),
                addr: if *id == cluster.me().id {
                    cluster.me().client_addr.to_string()
                } else {
                    state.map_or_else(String::new, |s| s.info.client_addr.to_string())
                },
                zone: member.map_or_else(String::new, |m| m.zone.clone()),
                status: member.map_or("UNKNOWN", |m| m.status.as_str()).to_string(),
                alive: cluster.is_alive(id),
                score: r.map_or(0.0, |r| r.score),
                latency_ms: r.and_then(|r| r.latency.used_us).map(|us| us / 1000.0),
                excluded: r.and_then(|r| r.excluded).map(describe),
            }
        })
        .collect();
    ExplainReport {
        node: cluster.me().id.to_string(),
        hash,
        partition,
        ring_version: ring.version(),
        replicas,
        read_order: ranked
            .iter()
            .filter(|r| !matches!(r.excluded, Some(ExcludeReason::Dead)))
            .map(|r| r.id.to_string())
            .collect(),
    }
}

fn describe(reason: ExcludeReason) -> String {
    match reason {
        ExcludeReason::Dead => "dead (failure detector)".into(),
        ExcludeReason::BreakerOpen { .. } => "circuit breaker open".into(),
        ExcludeReason::ProbeInFlight => "half-open, probe in flight".into(),
        ExcludeReason::FailureRate { rate, requests } => {
            format!("{:.0}% of {requests} recent requests failed", rate * 100.0)
        }
    }
}
