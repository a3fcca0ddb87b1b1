//! `status` and `explain`: what this node knows, as kvctl shows it. The
//! core gives membership, placement and the scorer's numbers; gossip gives
//! the addresses and progress nodes publish.

use kv_gossip::keys;
use kv_replication::{Cluster, Core};
use kv_router::ExcludeReason;
use kv_wire::{ExplainReplica, ExplainReport, NodeReport, StatusReport};

use crate::membership::{GossipMembership, published};

/// Membership and ring as this node sees them: every ring member and every
/// node gossip knows (including ones that left).
pub fn status(cluster: &Cluster, gossip: &GossipMembership) -> StatusReport {
    let ring = cluster.ring();
    let view = gossip.gossip_view();
    let me = cluster.id();
    let mut nodes: Vec<NodeReport> = Vec::new();
    for member in ring.members() {
        let state = view.members.get(&member.id);
        let addr = if member.id == *me {
            gossip.client_addr().to_string()
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
            transfer: published(state, keys::TRANSFER),
            resp: published(state, keys::RESP_ADDR),
            admin: published(state, keys::ADMIN_ADDR),
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
            alive: state.alive || id == me,
            ring_share: 0.0,
            transfer: published(Some(state), keys::TRANSFER),
            resp: published(Some(state), keys::RESP_ADDR),
            admin: published(Some(state), keys::ADMIN_ADDR),
        });
    }
    nodes.sort_by(|a, b| a.id.cmp(&b.id));
    StatusReport {
        node: me.to_string(),
        ring_version: ring.version(),
        partitions: ring.partitions(),
        replicas: u8::try_from(ring.config().replicas).unwrap_or(u8::MAX),
        nodes,
    }
}

/// How a read of `key` would be routed from this node, with the scores.
pub fn explain(core: &Core, gossip: &GossipMembership, key: &[u8]) -> ExplainReport {
    let cluster = core.cluster();
    let explanation = core.coordinator().explain(key);
    let placement = cluster.placement();
    let view = gossip.gossip_view();
    let replicas = explanation
        .preference
        .iter()
        .map(|id| {
            let r = explanation.ranked.iter().find(|r| r.id == *id);
            let member = placement
                .target
                .members()
                .iter()
                .chain(placement.current.members().iter())
                .find(|m| m.id == *id);
            ExplainReplica {
                id: id.to_string(),
                addr: if id == cluster.id() {
                    gossip.client_addr().to_string()
                } else {
                    view.members
                        .get(id)
                        .map_or_else(String::new, |s| s.info.client_addr.to_string())
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
        node: cluster.id().to_string(),
        hash: explanation.hash,
        partition: explanation.partition,
        ring_version: explanation.ring_version,
        replicas,
        read_order: explanation
            .ranked
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
