//! The gauges sampled when `/metrics` is scraped: admission queues, ring
//! and liveness, the router's scores, hints, anti-entropy progress and
//! storage figures, read from the node's parts at that moment.

use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Instant;

use kv_replication::Core;
use kv_router::Op;
use kv_types::NodeId;
use metrics::{counter, gauge};
use tokio::sync::Semaphore;

use crate::membership::GossipMembership;

/// What the scrape-time gauges are read from.
pub struct Sources {
    /// The replication core (membership, scorer, storage, cache, handoff,
    /// anti-entropy, replica admission).
    pub core: Arc<Core>,
    /// Gossip (the addresses `/status` shows).
    pub gossip: Arc<GossipMembership>,
    /// Client admission slots, and their bound.
    pub client_slots: (Arc<Semaphore>, usize),
    /// The node's certificate (`/status` shows it).
    pub certs: Arc<crate::certs::NodeCerts>,
    /// When the node started.
    pub started: Instant,
}

impl Sources {
    /// Sets every sampled gauge to its current value. Storage figures come
    /// from the blocking pool (sled walks its files for their size).
    pub async fn sample(&self) {
        let core = &self.core;
        let (slots, limit) = &self.client_slots;
        let service = core.service();
        for (kind, used, limit) in [
            (
                "client",
                limit.saturating_sub(slots.available_permits()),
                *limit,
            ),
            ("peer", service.in_flight(), service.capacity()),
        ] {
            gauge!("kv_requests_in_flight", "kind" => kind).set(used as f64);
            gauge!("kv_requests_in_flight_limit", "kind" => kind).set(limit as f64);
        }
        counter!("kv_replica_not_owner_total").absolute(service.strays().received());
        counter!("kv_ring_version_mismatches_total").absolute(core.cluster().ring_mismatches());
        let cluster = core.cluster();
        let ring = cluster.ring();
        let members: Vec<NodeId> = ring.members().iter().map(|m| m.id.clone()).collect();
        gauge!("kv_ring_members").set(members.len() as f64);
        let alive = members.iter().filter(|id| cluster.is_alive(id)).count();
        gauge!("kv_nodes_alive").set(alive as f64);
        gauge!("kv_uptime_seconds").set(self.started.elapsed().as_secs_f64());
        let cache = core.replica().cache().stats();
        counter!("kv_cache_hits_total").absolute(cache.hits);
        counter!("kv_cache_misses_total").absolute(cache.misses);
        gauge!("kv_cache_hit_ratio").set(cache.hit_ratio());
        gauge!("kv_cache_entries").set(cache.entries as f64);
        gauge!("kv_cache_bytes").set(cache.bytes as f64);
        for (op, name) in [(Op::Get, "get"), (Op::Put, "put")] {
            let record = core.scoring().decide(cluster, &members, op, b"", 1);
            for (s, c) in record.decision.scored.iter().zip(&record.inputs.candidates) {
                let peer = s.id.to_string();
                gauge!("kv_router_score", "peer" => peer.clone(), "op" => name).set(s.score);
                if let Some(us) = s.latency_us {
                    gauge!("kv_router_latency_seconds", "peer" => peer.clone(), "op" => name)
                        .set(us / 1e6);
                }
                if let Some(d) = s.dimensions {
                    for (dim, v) in [
                        ("load", d.load),
                        ("latency", d.latency),
                        ("hit", d.hit),
                        ("availability", d.availability),
                    ] {
                        gauge!("kv_router_dimension", "peer" => peer.clone(), "op" => name, "dimension" => dim)
                            .set(v);
                    }
                }
                for a in &s.penalties {
                    let rule = format!("{:?}", a.rule).to_lowercase();
                    gauge!("kv_router_penalty", "peer" => peer.clone(), "op" => name, "rule" => rule)
                        .set(a.factor);
                }
                if op == Op::Get {
                    gauge!("kv_router_failure_rate", "peer" => peer.clone()).set(c.failure_rate());
                    gauge!("kv_router_in_flight", "peer" => peer.clone())
                        .set(f64::from(c.in_flight));
                    gauge!("kv_router_excluded", "peer" => peer).set(if s.excluded.is_some() {
                        1.0
                    } else {
                        0.0
                    });
                }
            }
        }
        let (sent, won, denied) = core.scoring().hedges();
        counter!("kv_hedges_total", "outcome" => "sent").absolute(sent);
        counter!("kv_hedges_total", "outcome" => "won").absolute(won);
        counter!("kv_hedges_total", "outcome" => "denied").absolute(denied);
        let handoff = core.handoff().stats();
        counter!("kv_hints_delivered_total").absolute(handoff.delivered.load(Relaxed));
        counter!("kv_hints_dropped_total").absolute(handoff.dropped.load(Relaxed));
        let anti_entropy = core.anti_entropy();
        let repair = anti_entropy.report();
        gauge!("kv_anti_entropy_running").set(if repair.running { 1.0 } else { 0.0 });
        gauge!("kv_anti_entropy_partitions_done").set(repair.partitions_done as f64);
        gauge!("kv_anti_entropy_partitions_total").set(repair.partitions_total as f64);
        counter!("kv_anti_entropy_keys_repaired_total").absolute(repair.keys_repaired);
        counter!("kv_anti_entropy_segments_differing_total").absolute(repair.segments_differing);
        counter!("kv_anti_entropy_exchanges_total")
            .absolute(anti_entropy.progress().exchanges.load(Relaxed));
        counter!("kv_anti_entropy_failures_total")
            .absolute(anti_entropy.progress().failures.load(Relaxed));
        let (sent, skipped) = core.coordinator().back_fills();
        counter!("kv_back_fills_total", "outcome" => "sent").absolute(sent);
        counter!("kv_back_fills_total", "outcome" => "skipped").absolute(skipped);
        let transfer = core.transfer();
        counter!("kv_transfer_objects_received_total").absolute(transfer.objects_received());
        counter!("kv_transfer_segments_reconciled_total").absolute(transfer.segments_reconciled());
        let scrub = core.scrub().stats();
        counter!("kv_storage_scrub_checked_total").absolute(scrub.records_checked.load(Relaxed));
        counter!("kv_storage_scrub_corrupt_total").absolute(scrub.corrupt_found.load(Relaxed));
        counter!("kv_storage_scrub_repaired_total").absolute(scrub.repaired.load(Relaxed));
        let storage = core.replica().storage().clone();
        let Ok((stats, hints)) =
            tokio::task::spawn_blocking(move || (storage.stats(), storage.hint_count())).await
        else {
            return;
        };
        gauge!("kv_hints_pending").set(hints as f64);
        gauge!("kv_storage_bytes_on_disk").set(stats.bytes_on_disk as f64);
        gauge!("kv_storage_keys").set(stats.keys as f64);
        counter!("kv_storage_writes_total").absolute(stats.writes);
        counter!("kv_storage_flushes_total").absolute(stats.flushes);
        gauge!("kv_storage_writes_per_flush").set(stats.writes_per_flush);
        counter!("kv_storage_corrupt_quarantined_total").absolute(stats.corrupt_quarantined);
        gauge!("kv_storage_failed").set(if stats.failed { 1.0 } else { 0.0 });
        gauge!("kv_storage_disk_full").set(if stats.disk_full { 1.0 } else { 0.0 });
        if let Some(free) = stats.free_bytes {
            gauge!("kv_storage_free_bytes").set(free as f64);
        }
    }
}
