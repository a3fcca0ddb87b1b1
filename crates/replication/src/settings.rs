//! The runtime settings of the replication core, derived by the node from
//! its configuration file (`[replication]`, `[handoff]`, `[anti_entropy]`,
//! `[limits]`; see `node/kvnode.example.toml` for each key).

use std::time::Duration;

use kv_router::RingSettings;

/// Everything the core is tuned by.
#[derive(Clone, Debug)]
pub struct Settings {
    /// Q, N and the zone spread of the ring (cluster-wide).
    pub ring: RingSettings,
    /// Default quorums and deadlines of the coordinator.
    pub quorums: Quorums,
    /// Sibling cap per key: a write that would exceed it is refused.
    pub max_siblings: usize,
    /// Replica calls from other nodes served at once; beyond, they are
    /// answered "overloaded" (kept apart from client admission so clients
    /// cannot starve replication).
    pub max_peer_requests: usize,
    /// Hinted handoff.
    pub handoff: HandoffSettings,
    /// Anti-entropy, tombstone purge and clock compaction.
    pub anti_entropy: AntiEntropySettings,
    /// Streaming of partitions during joins and drains.
    pub transfer: TransferSettings,
    /// The background scrub of stored records.
    pub scrub: crate::ScrubSettings,
}

impl Default for Settings {
    fn default() -> Self {
        let quorums = Quorums::default();
        Settings {
            ring: RingSettings::default(),
            max_siblings: kv_types::limits::DEFAULT_MAX_SIBLINGS,
            max_peer_requests: 2048,
            handoff: HandoffSettings::default(),
            anti_entropy: AntiEntropySettings::default(),
            transfer: TransferSettings {
                timeout: quorums.replica_timeout.max(Duration::from_secs(10)),
                ..TransferSettings::default()
            },
            quorums,
            scrub: crate::ScrubSettings::default(),
        }
    }
}

/// Default quorums and deadlines of the coordinator.
#[derive(Clone, Debug)]
pub struct Quorums {
    /// Default R.
    pub r: usize,
    /// Default W.
    pub w: usize,
    /// Deadline of a whole client request.
    pub request_timeout: Duration,
    /// Deadline of one replica call.
    pub replica_timeout: Duration,
}

impl Default for Quorums {
    fn default() -> Self {
        Quorums {
            r: 2,
            w: 2,
            request_timeout: Duration::from_secs(5),
            replica_timeout: Duration::from_secs(2),
        }
    }
}

/// Hinted handoff (Dynamo section 4.6): bounded by count and age, paced.
#[derive(Clone, Debug)]
pub struct HandoffSettings {
    /// Time between passes over the hints.
    pub interval: Duration,
    /// Deliveries per second at most.
    pub rate_per_sec: u32,
    /// Hints held at most; beyond, new ones are refused (the coordinator
    /// tries the next fallback) and counted.
    pub max_hints: u64,
    /// Hints older than this are dropped (and counted): anti-entropy
    /// repairs what they carried.
    pub max_age: Duration,
    /// Deadline of one delivery.
    pub timeout: Duration,
    /// How long a copy this node received without owning its key (a
    /// coordinator routed with another ring) waits for this node's view to
    /// catch up before it is handed to the key's owners.
    pub stray_grace: Duration,
}

impl Default for HandoffSettings {
    fn default() -> Self {
        HandoffSettings {
            interval: Duration::from_secs(1),
            rate_per_sec: 500,
            max_hints: 100_000,
            max_age: Duration::from_secs(86_400),
            timeout: Duration::from_secs(2),
            stray_grace: Duration::from_secs(30),
        }
    }
}

/// Anti-entropy (Dynamo section 4.7) and the purges that need every
/// replica's agreement.
#[derive(Clone, Debug)]
pub struct AntiEntropySettings {
    /// Time between two scheduled partition exchanges.
    pub interval: Duration,
    /// Keys repaired per second at most.
    pub keys_per_sec: u32,
    /// Deadline of one call to a peer.
    pub timeout: Duration,
    /// Age after which a tombstone every replica holds may be purged; never
    /// shorter than hints live (the node derives it so).
    pub tombstone_grace: Duration,
    /// Age of a key's newest write after which retired actors may be
    /// compacted out of its clock: longer than hints live.
    pub compaction_age: Duration,
}

impl Default for AntiEntropySettings {
    fn default() -> Self {
        AntiEntropySettings {
            interval: Duration::from_millis(200),
            keys_per_sec: 1000,
            timeout: Duration::from_secs(2),
            tombstone_grace: Duration::from_secs(90_000),
            compaction_age: Duration::from_secs(90_000),
        }
    }
}

/// Streaming partitions to their new owners.
#[derive(Clone, Debug)]
pub struct TransferSettings {
    /// Time between checks for pending partitions.
    pub interval: Duration,
    /// Pages pulled per second at most by one stream (each up to 500
    /// objects).
    pub pages_per_sec: u32,
    /// Objects pulled per second at most by all of a node's streams
    /// together (at least 1).
    pub objects_per_sec: u32,
    /// Read back-fills to pending owners a coordinator sends per second
    /// at most; the rest are skipped (0: none).
    pub back_fills_per_sec: u32,
    /// Deadline of one call.
    pub timeout: Duration,
}

impl Default for TransferSettings {
    fn default() -> Self {
        TransferSettings {
            interval: Duration::from_secs(1),
            pages_per_sec: 200,
            objects_per_sec: 20_000,
            back_fills_per_sec: 100,
            timeout: Duration::from_secs(10),
        }
    }
}
