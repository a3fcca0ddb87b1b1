//! The runtime settings a node derives from its [`NodeConfig`]: the
//! replication core's ([`kv_replication::Settings`]), gossip's and the
//! storage engine's. Derived values (the tombstone grace, the compaction
//! age) are computed here, once.

use std::time::Duration;

use kv_replication::{AntiEntropySettings, HandoffSettings, Quorums, Settings, TransferSettings};
use kv_router::RingSettings;

use super::NodeConfig;

/// How long a copy received for a key this node does not own waits for the
/// node's view to catch up before handoff passes it to the owners: several
/// gossip convergence times.
const STRAY_GRACE: Duration = Duration::from_secs(30);

/// Time between checks for partitions to pull.
const TRANSFER_INTERVAL: Duration = Duration::from_secs(1);

/// Pages of one pull stream per second at most (each up to 500 objects);
/// the node-wide brake is `[transfer] objects_per_sec`.
const TRANSFER_PAGES_PER_SEC: u32 = 200;

impl NodeConfig {
    /// The replication core's settings.
    ///
    /// The tombstone grace and the clock-compaction age are never shorter
    /// than hints live ([`NodeConfig::hint_lifetime`]), or a late hint would
    /// bring a superseded value back to replicas with nothing left to
    /// supersede it.
    pub fn replication_settings(&self) -> Settings {
        let r = &self.replication;
        let replica_timeout = self.replica_timeout();
        Settings {
            ring: RingSettings {
                partitions: r.partitions,
                replicas: r.n,
                zone_redundancy: r.zone_redundancy,
            },
            quorums: Quorums {
                r: r.r,
                w: r.w,
                request_timeout: self.request_timeout(),
                replica_timeout,
            },
            max_siblings: r.max_siblings,
            max_peer_requests: self.limits.max_peer_requests,
            handoff: HandoffSettings {
                interval: Duration::from_millis(self.handoff.interval_ms),
                rate_per_sec: self.handoff.rate_per_sec,
                max_hints: self.handoff.max_hints,
                max_age: Duration::from_secs(self.handoff.max_age_secs),
                timeout: replica_timeout,
                stray_grace: STRAY_GRACE,
            },
            anti_entropy: AntiEntropySettings {
                interval: Duration::from_millis(self.anti_entropy.interval_ms),
                keys_per_sec: self.anti_entropy.keys_per_sec,
                timeout: replica_timeout,
                tombstone_grace: Duration::from_secs(self.anti_entropy.tombstone_grace_secs)
                    .max(self.hint_lifetime()),
                compaction_age: self.hint_lifetime(),
            },
            transfer: TransferSettings {
                interval: TRANSFER_INTERVAL,
                pages_per_sec: TRANSFER_PAGES_PER_SEC,
                objects_per_sec: self.transfer.objects_per_sec,
                back_fills_per_sec: self.transfer.back_fills_per_sec,
                timeout: replica_timeout.max(Duration::from_secs(10)),
            },
            scrub: kv_replication::ScrubSettings {
                interval: Duration::from_secs(self.storage.scrub_interval_secs),
                timeout: replica_timeout,
            },
        }
    }

    /// The storage engine's settings.
    pub fn sled_settings(&self) -> kv_storage::SledSettings {
        kv_storage::SledSettings {
            cache_capacity_bytes: self.storage.cache_capacity_mb << 20,
            sync_writes: self.storage.sync_writes,
            commit_window_us: self.storage.commit_window_us,
            min_free_bytes: self.storage.min_free_bytes,
            ..kv_storage::SledSettings::default()
        }
    }

    /// Gossip's settings; `generation` must grow across restarts (the start
    /// time in ms is used).
    pub fn gossip_settings(&self, generation: u64) -> kv_gossip::GossipSettings {
        kv_gossip::GossipSettings {
            cluster_id: self.cluster_id.clone(),
            gossip_addr: self.advertise(),
            seeds: self.seeds.clone(),
            interval: Duration::from_millis(self.gossip.interval_ms),
            phi_threshold: self.gossip.phi_threshold,
            dead_node_grace: Duration::from_secs(24 * 3600),
            generation,
        }
    }

    /// How long after a write a hint may still hold it: `handoff.max_age_secs`
    /// (a hint is dropped at the first handoff pass after it) plus two
    /// handoff periods, plus the deadlines within which a write's copies,
    /// and so its hints, are made. Anti-entropy waits this long before it
    /// compacts a clock or purges a tombstone, so no hint can still carry a
    /// value they superseded (Cassandra's rule that hints expire before
    /// `gc_grace_seconds`).
    pub fn hint_lifetime(&self) -> Duration {
        Duration::from_secs(self.handoff.max_age_secs)
            + 2 * Duration::from_millis(self.handoff.interval_ms)
            + self.request_timeout()
            + self.replica_timeout()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::MINIMAL;

    fn config(extra: &str) -> NodeConfig {
        toml::from_str(&format!("{MINIMAL}\n{extra}")).unwrap()
    }

    #[test]
    fn tombstones_and_retired_clock_entries_outlive_every_hint() {
        // A late hint must find the tombstone that superseded its value.
        let c =
            config("[anti_entropy]\ntombstone_grace_secs = 60\n[handoff]\nmax_age_secs = 7200\n")
                .replication_settings()
                .anti_entropy;
        assert!(c.tombstone_grace > Duration::from_secs(7200));
        assert!(c.compaction_age > Duration::from_secs(7200));
        // A grace longer than hints live is kept as configured.
        let c = config(
            "[anti_entropy]\ntombstone_grace_secs = 864000\n[handoff]\nmax_age_secs = 3600\n",
        )
        .replication_settings()
        .anti_entropy;
        assert_eq!(c.tombstone_grace, Duration::from_secs(864_000));
        assert!(c.compaction_age > Duration::from_secs(3600));
        assert!(c.compaction_age < Duration::from_secs(864_000));
    }

    #[test]
    fn the_core_gets_the_configured_quorums_and_limits() {
        let s = config("[replication]\nr = 1\nw = 3\n[limits]\nmax_peer_requests = 7\n")
            .replication_settings();
        assert_eq!((s.quorums.r, s.quorums.w), (1, 3));
        assert_eq!(s.max_peer_requests, 7);
        assert_eq!(s.ring.partitions, 1024);
    }
}
