//! `status`, `certs`, `explain` and `ring`: what this node knows, as kvctl
//! and routing clients read it. The core gives membership, placement, load
//! reports and the scorer's numbers; gossip gives the addresses and
//! progress nodes publish.

use kv_gossip::keys;
use kv_replication::{Cluster, Core};
use kv_router::{Exclusion, Op};
use kv_wire::{
    CertsReport, ExplainReplica, ExplainReport, MemberLoad, NodeCert, NodeReport, RingMember,
    RingReport, RingReportV2, StatusReport,
};

use crate::certs::{CertSummary, NodeCerts};
use crate::membership::{GossipMembership, published};

/// Membership and ring as this node sees them: every ring member and every
/// node gossip knows (including ones that left: status `LEFT`, also for a
/// node an admin removed, whatever it last gossiped itself).
pub fn status(core: &Core, gossip: &GossipMembership) -> StatusReport {
    let cluster: &Cluster = core.cluster();
    let ring = cluster.ring();
    let view = gossip.gossip_view();
    let me = cluster.id();
    let mut nodes: Vec<NodeReport> = Vec::new();
    for member in ring.members() {
        let state = view.members.get(&member.id);
        nodes.push(NodeReport {
            id: member.id.to_string(),
            addr: client_addr(gossip, &view, me, &member.id),
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
    let removed = cluster.removed();
    for (id, state) in &view.members {
        if ring.members().iter().any(|m| m.id == *id) {
            continue;
        }
        // A removed node is LEFT everywhere (its own last word was
        // probably UP: it was down when removed).
        let status = if removed.contains(id) {
            kv_types::NodeStatus::Left
        } else {
            state.info.status
        };
        nodes.push(NodeReport {
            id: id.to_string(),
            addr: state.info.client_addr.to_string(),
            zone: state.info.zone.clone(),
            host: state.info.host.clone(),
            status: status.as_str().to_string(),
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
        mode: core.scoring().mode().as_str().to_string(),
    }
}

/// Every node's certificate as this node knows it: its own as loaded
/// last, the others' (every node gossip knows) as they gossip them, by id.
pub fn certs(core: &Core, gossip: &GossipMembership, certs: &NodeCerts) -> CertsReport {
    let me = core.cluster().id();
    let entry = |id: String, summary: CertSummary| NodeCert {
        id,
        not_after: summary.not_after,
        ca: summary.ca,
        trusted: summary.trusted,
    };
    let mut nodes = vec![entry(me.to_string(), certs.summary())];
    for (id, state) in &gossip.gossip_view().members {
        if id == me {
            continue;
        }
        let state = Some(state);
        let summary = CertSummary::from_gossip(
            &published(state, keys::CERT_NOT_AFTER),
            &published(state, keys::CERT_CA),
            &published(state, keys::TRUSTED_CAS),
        );
        nodes.push(entry(id.to_string(), summary));
    }
    nodes.sort_by(|a, b| a.id.cmp(&b.id));
    CertsReport {
        node: me.to_string(),
        nodes,
    }
}

/// The client address of `id`: this node's own, or the one `id` gossips
/// (empty when it is not in the gossip view).
fn client_addr(
    gossip: &GossipMembership,
    view: &kv_gossip::View,
    me: &kv_types::NodeId,
    id: &kv_types::NodeId,
) -> String {
    if id == me {
        gossip.client_addr().to_string()
    } else {
        view.members
            .get(id)
            .map_or_else(String::new, |s| s.info.client_addr.to_string())
    }
}

/// What a routing client needs to send each request to a replica of its
/// key: the ring (as persisted), each member's client address, liveness and
/// latest load report (this node's own, fresh), and the routing mode.
pub fn ring(core: &Core, gossip: &GossipMembership) -> RingReport {
    ring_of(core, gossip, &core.cluster().view())
}

/// [`ring`] with each member's process generation as this node's view
/// has it (its own too: the view lists this node).
pub fn ring_v2(core: &Core, gossip: &GossipMembership) -> RingReportV2 {
    // One view for liveness and generations alike.
    let view = core.cluster().view();
    let ring = ring_of(core, gossip, &view);
    let generations = ring
        .members
        .iter()
        .map(|m| {
            let id = kv_types::NodeId::new(m.id.as_str()).ok()?;
            view.members.get(&id)?.generation
        })
        .collect();
    RingReportV2 { ring, generations }
}

/// [`ring`] from the view `view` of this node's cluster.
fn ring_of(core: &Core, gossip: &GossipMembership, view: &kv_replication::View) -> RingReport {
    let cluster: &Cluster = core.cluster();
    let ring = cluster.ring();
    let gossiped = gossip.gossip_view();
    let me = cluster.id();
    let now = cluster.clock().now();
    let mut hints: std::collections::BTreeMap<&kv_types::NodeId, u64> = Default::default();
    for peer in view.members.values() {
        for (owner, count) in peer.report.iter().flat_map(|(r, _)| r.hints.iter()) {
            // Counts come from other nodes' reports: saturate, never
            // overflow.
            let total = hints.entry(owner).or_default();
            *total = total.saturating_add(*count);
        }
    }
    let load = |r: &kv_replication::LoadReport, age: std::time::Duration| MemberLoad {
        age_ms: u64::try_from(age.as_millis()).unwrap_or(u64::MAX),
        cpu: r.cpu.clamp(0.0, 1.0),
        queue: r.queue,
        backlog: r.backlog,
        hit_ratio: r.hit_ratio.clamp(0.0, 1.0),
        repair: r.repair,
        hot_keys: r
            .hot_keys
            .iter()
            .take(kv_wire::message::ring::MAX_HOT_KEYS)
            .copied()
            .collect(),
    };
    let members = ring
        .members()
        .iter()
        .take(kv_wire::message::ring::MAX_RING_MEMBERS)
        .map(|member| {
            let peer = view.members.get(&member.id);
            let mine = member.id == *me;
            let addr = client_addr(gossip, &gossiped, me, &member.id);
            let report = if mine {
                Some(load(&core.reporter().report(), std::time::Duration::ZERO))
            } else {
                peer.and_then(|p| p.report.as_ref())
                    .map(|(r, at)| load(r, now.saturating_duration_since(*at)))
            };
            RingMember {
                id: member.id.to_string(),
                addr,
                zone: member.zone.clone(),
                host: member.host.clone(),
                status: member.status.as_str().to_string(),
                alive: mine || view.is_alive(&member.id),
                suspect: peer.is_some_and(|p| p.suspect),
                hints_pending: hints.get(&member.id).copied().unwrap_or(0),
                report,
            }
        })
        .collect();
    RingReport {
        node: me.to_string(),
        ring_version: cluster.ring_version(),
        placement: ring.to_bytes(),
        members,
        mode: core.scoring().mode().as_str().to_string(),
    }
}

/// How a request `op` for `key` would be routed from this node, with every
/// input and number of the decision.
pub fn explain(core: &Core, gossip: &GossipMembership, key: &[u8], op: Op) -> ExplainReport {
    let cluster = core.cluster();
    let explanation = core.coordinator().explain(key, op);
    let placement = cluster.placement();
    let view = gossip.gossip_view();
    let decision = &explanation.record.decision;
    let replicas = explanation
        .preference
        .iter()
        .map(|id| {
            let scored = decision.scored.iter().find(|s| s.id == *id);
            let member = placement
                .target
                .members()
                .iter()
                .chain(placement.current.members().iter())
                .find(|m| m.id == *id);
            ExplainReplica {
                id: id.to_string(),
                addr: client_addr(gossip, &view, cluster.id(), id),
                zone: member.map_or_else(String::new, |m| m.zone.clone()),
                status: member.map_or("UNKNOWN", |m| m.status.as_str()).to_string(),
                alive: cluster.is_alive(id),
                score: scored.map_or(0.0, |s| s.score),
                latency_ms: scored.and_then(|s| s.latency_us).map(|us| us / 1000.0),
                excluded: scored
                    .and_then(|s| s.excluded.as_ref())
                    .map(Exclusion::to_string),
            }
        })
        .collect();
    ExplainReport {
        node: cluster.id().to_string(),
        hash: explanation.hash,
        partition: explanation.partition,
        ring_version: explanation.ring_version,
        replicas,
        read_order: decision.order.iter().map(ToString::to_string).collect(),
        mode: decision.mode.as_str().to_string(),
        op: match op {
            Op::Get => "get",
            Op::Put => "put",
        }
        .to_string(),
        decision: serde_json::to_string(&explanation.record).unwrap_or_default(),
    }
}
