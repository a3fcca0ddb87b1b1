//! The node's configuration file (TOML), field by field.
//!
//! `node/kvnode.example.toml` is the committed, fully commented example;
//! `scripts/cluster` generates files of the same shape. Unknown keys are an
//! error (a typo must not silently fall back to a default), and every value is
//! checked by [`NodeConfig::validate`] before the node starts.
//!
//! Command-line flags ([`Overrides`]) replace keys of the file, so one shared
//! file serves several nodes (`docker/kvnode.toml` serves every container of
//! `docker-compose.yml`); with every required key given as a flag the file may
//! be omitted altogether.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, bail, ensure};

mod router;
mod settings;

use kv_types::NodeId;
pub use router::RouterConfig;
use serde::Deserialize;

/// Largest config file read, in bytes.
const MAX_CONFIG_BYTES: u64 = 1 << 20;

/// Keys every configuration must have, each with the flag that sets it.
const REQUIRED: [(&str, &str); 6] = [
    ("id", "--id"),
    ("data_dir", "--data-dir"),
    ("listen", "--listen"),
    ("zone", "--zone"),
    ("host", "--host"),
    ("certs.dir", "--certs-dir"),
];

/// Values given on the command line that replace (or supply) keys of the
/// config file. `None` leaves the file's value alone.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Overrides {
    /// `id`.
    pub id: Option<String>,
    /// `listen`.
    pub listen: Option<SocketAddr>,
    /// `advertise`.
    pub advertise: Option<SocketAddr>,
    /// `client_advertise`.
    pub client_advertise: Option<SocketAddr>,
    /// `zone`.
    pub zone: Option<String>,
    /// `host`.
    pub host: Option<String>,
    /// `seeds` (the whole list).
    pub seeds: Option<Vec<String>>,
    /// `data_dir`.
    pub data_dir: Option<PathBuf>,
    /// `certs.dir`.
    pub certs_dir: Option<PathBuf>,
    /// `worker_threads`.
    pub worker_threads: Option<usize>,
    /// `log.format`.
    pub log_format: Option<String>,
    /// `resp.advertise`.
    pub resp_advertise: Option<SocketAddr>,
    /// `admin.advertise`.
    pub admin_advertise: Option<SocketAddr>,
}

impl Overrides {
    /// Writes every given value into `table`, the parsed config file (or an
    /// empty table when there is none).
    ///
    /// # Errors
    /// A path that is not UTF-8, a number too large for TOML, or a file
    /// whose `certs`/`log` key is not a table.
    fn apply(&self, table: &mut toml::Table) -> anyhow::Result<()> {
        use toml::Value;
        let text = |s: &String| Value::String(s.clone());
        let addr = |a: &SocketAddr| Value::String(a.to_string());
        let path = |flag: &str, p: &PathBuf| -> anyhow::Result<Value> {
            p.to_str()
                .map(|s| Value::String(s.to_owned()))
                .with_context(|| format!("{flag} {} is not valid UTF-8", p.display()))
        };
        let top: [(&str, Option<Value>); 8] = [
            ("id", self.id.as_ref().map(text)),
            ("listen", self.listen.as_ref().map(addr)),
            ("advertise", self.advertise.as_ref().map(addr)),
            ("client_advertise", self.client_advertise.as_ref().map(addr)),
            ("zone", self.zone.as_ref().map(text)),
            ("host", self.host.as_ref().map(text)),
            (
                "seeds",
                self.seeds
                    .as_ref()
                    .map(|s| Value::Array(s.iter().map(text).collect())),
            ),
            (
                "data_dir",
                self.data_dir
                    .as_ref()
                    .map(|p| path("--data-dir", p))
                    .transpose()?,
            ),
        ];
        for (key, value) in top {
            if let Some(value) = value {
                table.insert(key.to_owned(), value);
            }
        }
        if let Some(n) = self.worker_threads {
            let n = i64::try_from(n).context("--worker-threads is too large")?;
            table.insert("worker_threads".to_owned(), Value::Integer(n));
        }
        if let Some(dir) = &self.certs_dir {
            sub_table(table, "certs")?.insert("dir".to_owned(), path("--certs-dir", dir)?);
        }
        if let Some(format) = &self.log_format {
            sub_table(table, "log")?.insert("format".to_owned(), text(format));
        }
        for (section, value) in [
            ("resp", &self.resp_advertise),
            ("admin", &self.admin_advertise),
        ] {
            if let Some(a) = value {
                sub_table(table, section)?.insert("advertise".to_owned(), addr(a));
            }
        }
        Ok(())
    }

    /// True when no flag overrides anything.
    fn is_empty(&self) -> bool {
        *self == Overrides::default()
    }
}

/// The table `[name]` of `table`, created if missing.
fn sub_table<'a>(table: &'a mut toml::Table, name: &str) -> anyhow::Result<&'a mut toml::Table> {
    match table
        .entry(name.to_owned())
        .or_insert_with(|| toml::Value::Table(toml::Table::new()))
    {
        toml::Value::Table(t) => Ok(t),
        _ => bail!("`{name}` must be a table ([{name}])"),
    }
}

/// The whole configuration of one `kvnode` process.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeConfig {
    /// Stable node id (a lowercase DNS label, e.g. `node1`); also the name of
    /// its certificate files.
    pub id: NodeId,
    /// Directory of the sled database (created if missing).
    pub data_dir: PathBuf,
    /// UDP address the QUIC endpoint binds: clients, peers and gossip.
    pub listen: SocketAddr,
    /// Address peers reach this node at. Default: `listen` (which must then
    /// not be an unspecified address such as 0.0.0.0).
    #[serde(default)]
    pub advertise: Option<SocketAddr>,
    /// Address clients (kvctl) reach this node at, shown by `kvctl status`.
    /// Default: `advertise`.
    #[serde(default)]
    pub client_advertise: Option<SocketAddr>,
    /// Failure domain label (availability zone).
    pub zone: String,
    /// Physical machine label; several nodes may share one.
    pub host: String,
    /// Relative capacity (1..=1000): partitions are claimed in proportion.
    #[serde(default = "default_weight")]
    pub weight: u32,
    /// `HOST:PORT` of seed nodes to find the cluster (this node's own address
    /// may be listed).
    #[serde(default)]
    pub seeds: Vec<String>,
    /// Nodes with a different cluster id ignore each other's gossip.
    #[serde(default = "default_cluster_id")]
    pub cluster_id: String,
    /// Tokio worker threads; 0 means one per core. The local 5-node cluster
    /// on 2 cores uses 1 per node (design.md, Runtime sizing).
    #[serde(default)]
    pub worker_threads: usize,
    /// Certificate files.
    pub certs: CertsConfig,
    /// Replication and quorum settings.
    #[serde(default)]
    pub replication: ReplicationConfig,
    /// Gossip and failure detection.
    #[serde(default)]
    pub gossip: GossipConfig,
    /// Storage engine.
    #[serde(default)]
    pub storage: StorageConfig,
    /// Admission limits.
    #[serde(default)]
    pub limits: LimitsConfig,
    /// Hinted handoff.
    #[serde(default)]
    pub handoff: HandoffConfig,
    /// Anti-entropy.
    #[serde(default)]
    pub anti_entropy: AntiEntropyConfig,
    /// Streaming partitions to new owners (joins and drains).
    #[serde(default)]
    pub transfer: TransferConfig,
    /// Logging.
    #[serde(default)]
    pub log: LogConfig,
    /// The RESP (Redis protocol) listener.
    #[serde(default)]
    pub resp: crate::resp::RespConfig,
    /// The HTTP admin endpoint (metrics, status, health).
    #[serde(default)]
    pub admin: crate::admin::AdminConfig,
    /// The KV-aware router.
    #[serde(default)]
    pub router: RouterConfig,
}

/// Where the node's certificates are.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CertsConfig {
    /// Directory holding `ca.pem`, `<id>.pem` and `<id>.key` (as written by
    /// `kvctl certs init`).
    pub dir: PathBuf,
}

/// Replication settings. `n` and `partitions` are cluster-wide: every node
/// must use the same values.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ReplicationConfig {
    /// Replicas per key (N). Default 3.
    pub n: usize,
    /// Default read quorum (R); a request may override it. Default 2.
    pub r: usize,
    /// Default write quorum (W); a request may override it. Default 2.
    pub w: usize,
    /// Ring partitions (Q), a power of two fixed at cluster creation.
    /// Default 1024.
    pub partitions: u32,
    /// Zones a preference list spans at least. Default 2.
    pub zone_redundancy: usize,
    /// Sibling cap per key; a write that would exceed it is refused.
    /// Default 16.
    pub max_siblings: usize,
    /// Deadline of a whole client request at its coordinator, ms. Default
    /// 5000.
    pub request_timeout_ms: u64,
    /// Deadline of one replica call, ms. Default 2000.
    pub replica_timeout_ms: u64,
}

impl Default for ReplicationConfig {
    fn default() -> Self {
        ReplicationConfig {
            n: 3,
            r: 2,
            w: 2,
            partitions: 1024,
            zone_redundancy: 2,
            max_siblings: kv_types::limits::DEFAULT_MAX_SIBLINGS,
            request_timeout_ms: 5000,
            replica_timeout_ms: 2000,
        }
    }
}

/// Gossip settings.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct GossipConfig {
    /// Time between gossip rounds, ms. Default 500.
    pub interval_ms: u64,
    /// Phi-accrual threshold above which a node is considered dead.
    /// Default 8.0: with 500 ms rounds a silent node is declared dead after
    /// roughly 5-10 s.
    pub phi_threshold: f64,
}

impl Default for GossipConfig {
    fn default() -> Self {
        GossipConfig {
            interval_ms: 500,
            phi_threshold: 8.0,
        }
    }
}

/// Storage engine settings.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct StorageConfig {
    /// sled page cache, MiB. Default 16 (kept small on purpose, design.md, Storage).
    pub cache_capacity_mb: u64,
    /// Acknowledge writes only once flushed to disk. Default true; false
    /// risks losing acknowledged writes on a crash.
    pub sync_writes: bool,
    /// The LRU read cache in front of sled, MiB (0 disables it). Default 64.
    pub read_cache_mb: u64,
    /// Group-commit window, microseconds (0..=100000, default 1000): while
    /// writes are concurrent a flush waits this long for more to join it
    /// (`kv_storage::SledSettings::commit_window_us`).
    pub commit_window_us: u64,
    /// Free-space reserve, bytes (0 disables it; default 256 MiB, at most
    /// [`MAX_MIN_FREE_BYTES`], and smaller than the filesystem holding the
    /// data directory, checked at open): below it, writes are refused
    /// with "disk full on NODE" and reads go on
    /// (`kv_storage::SledSettings::min_free_bytes`).
    pub min_free_bytes: u64,
    /// Length of one background scrub pass over every stored record,
    /// seconds (0 turns the scrub off; otherwise 60..=31536000, default
    /// 86400). The pass is spread evenly over the interval: one 1/256
    /// slice of the key-hash space every `scrub_interval_secs / 256`.
    /// Damaged records found are rewritten from the key's other replicas.
    pub scrub_interval_secs: u64,
}

/// Upper bound of `[storage] min_free_bytes`: 1 TiB.
pub const MAX_MIN_FREE_BYTES: u64 = 1 << 40;

impl Default for StorageConfig {
    fn default() -> Self {
        StorageConfig {
            cache_capacity_mb: 16,
            sync_writes: true,
            read_cache_mb: 64,
            commit_window_us: kv_storage::SledSettings::default().commit_window_us,
            min_free_bytes: kv_storage::DEFAULT_MIN_FREE_BYTES,
            scrub_interval_secs: 86_400,
        }
    }
}

/// Bounds on concurrent work; beyond them requests get a fast
/// "overloaded" error.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LimitsConfig {
    /// Client requests (get/put/delete/...) in flight. Default 512.
    pub max_client_requests: usize,
    /// Replica requests from other nodes in flight. Default 2048 (kept
    /// separate so that clients cannot starve replication).
    pub max_peer_requests: usize,
}

impl Default for LimitsConfig {
    fn default() -> Self {
        LimitsConfig {
            max_client_requests: 512,
            max_peer_requests: 2048,
        }
    }
}

/// Hinted handoff settings (design.md, Replication: hints bounded by count and age,
/// delivery throttled).
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct HandoffConfig {
    /// Time between passes over the hints, ms. Default 1000.
    pub interval_ms: u64,
    /// Hint deliveries per second at most. Default 500.
    pub rate_per_sec: u32,
    /// Hints this node holds at most; beyond, it refuses new ones (the
    /// coordinator tries the next fallback) and counts them. Default 100000.
    pub max_hints: u64,
    /// Hints older than this are dropped and counted (anti-entropy repairs
    /// the key), seconds. Default 86400 (a day).
    pub max_age_secs: u64,
}

impl Default for HandoffConfig {
    fn default() -> Self {
        HandoffConfig {
            interval_ms: 1000,
            rate_per_sec: 500,
            max_hints: 100_000,
            max_age_secs: 86_400,
        }
    }
}

/// Anti-entropy settings (design.md, Replication: Merkle exchanges, throttled).
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AntiEntropyConfig {
    /// Time between two scheduled partition exchanges, ms. With Q=1024 and
    /// N=3 a node replicates about 600 partitions of a 5-node ring, so a
    /// full round takes about 600 x this. Default 200.
    pub interval_ms: u64,
    /// Keys repaired per second at most. Default 1000.
    pub keys_per_sec: u32,
    /// A tombstone older than this, held identically by every replica of
    /// its key, is purged (seconds). Default 3600. A replica that is down
    /// blocks the purge, so it cannot resurrect the key when it returns.
    /// The purge also waits until no hint can still hold a value the
    /// tombstone superseded (`NodeConfig::hint_lifetime`: with the default
    /// `handoff.max_age_secs` a day), so the effective grace is the longer
    /// of the two.
    pub tombstone_grace_secs: u64,
}

impl Default for AntiEntropyConfig {
    fn default() -> Self {
        AntiEntropyConfig {
            interval_ms: 200,
            keys_per_sec: 1000,
            tombstone_grace_secs: 3600,
        }
    }
}

/// Partition streaming settings (design.md, Membership: joins and drains
/// pull their partitions, throttled).
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TransferConfig {
    /// Objects a node pulls per second at most, all of its streams
    /// together: the brake that keeps a join or drain from taking the CPU
    /// the foreground requests need (Cassandra bounds what a node sends,
    /// `stream_throughput_outbound` in bytes; here the receiver bounds what
    /// it merges). A node joining a
    /// 5-node cluster of 1,000,000 keys at N = 3 pulls about 500,000
    /// objects: 25 s at the default. Default 20000.
    pub objects_per_sec: u32,
    /// While a partition moves, a read also sends what it found to the
    /// partition's pending new owners (a back-fill); each coordinator sends
    /// at most this many a second and skips the rest (their pull brings
    /// those keys anyway). 0 turns back-fills off. Default 100.
    pub back_fills_per_sec: u32,
}

impl Default for TransferConfig {
    fn default() -> Self {
        TransferConfig {
            objects_per_sec: 20_000,
            back_fills_per_sec: 100,
        }
    }
}

/// Log output.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LogConfig {
    /// `human` or `json`.
    pub format: String,
    /// A tracing filter, e.g. `info` or `info,kv_node=debug`; `RUST_LOG`
    /// overrides it.
    pub level: String,
}

impl Default for LogConfig {
    fn default() -> Self {
        LogConfig {
            format: "human".into(),
            level: "info".into(),
        }
    }
}

fn default_weight() -> u32 {
    1
}

fn default_cluster_id() -> String {
    "kvstore".into()
}

/// Reads a config file, refusing files over [`MAX_CONFIG_BYTES`].
fn read_bounded(path: &Path) -> anyhow::Result<String> {
    let meta = std::fs::metadata(path)
        .with_context(|| format!("cannot read config {}", path.display()))?;
    ensure!(
        meta.len() <= MAX_CONFIG_BYTES,
        "config {} is {} bytes; the limit is {MAX_CONFIG_BYTES}",
        path.display(),
        meta.len()
    );
    std::fs::read_to_string(path).with_context(|| format!("cannot read config {}", path.display()))
}

impl NodeConfig {
    /// Reads the config file at `path` (if any), applies the command-line
    /// `overrides`, and validates the result.
    ///
    /// # Errors
    /// Unreadable or oversized file, TOML errors (with line numbers when no
    /// flag overrides the file), a required key given neither in the file
    /// nor as a flag, and everything [`NodeConfig::validate`] refuses.
    pub fn load(path: Option<&Path>, overrides: &Overrides) -> anyhow::Result<Self> {
        let text = match path {
            Some(path) => read_bounded(path)?,
            None => String::new(),
        };
        let source = match path {
            Some(path) => format!("config {}", path.display()),
            None => "configuration from flags".to_owned(),
        };
        let mut table: toml::Table =
            toml::from_str(&text).with_context(|| format!("invalid {source}"))?;
        overrides.apply(&mut table)?;
        for (key, flag) in REQUIRED {
            let present = match key.split_once('.') {
                Some((outer, inner)) => table
                    .get(outer)
                    .and_then(toml::Value::as_table)
                    .is_some_and(|t| t.contains_key(inner)),
                None => table.contains_key(key),
            };
            ensure!(
                present,
                "{source}: `{key}` is missing: set it in the file or give {flag}"
            );
        }
        let config: NodeConfig = if overrides.is_empty() {
            // Straight from the text, so that errors carry line numbers.
            toml::from_str(&text).with_context(|| format!("invalid {source}"))?
        } else {
            toml::Value::Table(table)
                .try_into()
                .with_context(|| format!("invalid {source}"))?
        };
        config.validate()?;
        Ok(config)
    }

    /// Checks every value's range and the relations between them.
    ///
    /// # Errors
    /// A message naming the offending key.
    pub fn validate(&self) -> anyhow::Result<()> {
        kv_types::node::check_label("zone", &self.zone)?;
        kv_types::node::check_label("host", &self.host)?;
        ensure!(
            (1..=1000).contains(&self.weight),
            "weight must be in 1..=1000"
        );
        ensure!(
            !self.cluster_id.is_empty() && self.cluster_id.len() <= 64,
            "cluster_id must be 1..=64 characters"
        );
        ensure!(self.seeds.len() <= 64, "at most 64 seeds");
        ensure!(
            self.worker_threads <= 256,
            "worker_threads must be at most 256"
        );
        if self.advertise.is_none() && self.listen.ip().is_unspecified() {
            bail!(
                "listen is {} (unspecified): set `advertise` to the address peers reach this node at",
                self.listen
            );
        }
        let r = &self.replication;
        ensure!(
            (1..=7).contains(&r.n),
            "replication.n = {} is not possible: it must be in 1..=7",
            r.n
        );
        ensure!(
            (1..=r.n).contains(&r.r),
            "replication.r = {} is not possible with replication.n = {}: it must be in 1..={}",
            r.r,
            r.n,
            r.n
        );
        ensure!(
            (1..=r.n).contains(&r.w),
            "replication.w = {} is not possible with replication.n = {}: it must be in 1..={}",
            r.w,
            r.n,
            r.n
        );
        ensure!(
            r.partitions.is_power_of_two() && (8..=65536).contains(&r.partitions),
            "replication.partitions must be a power of two in 8..=65536"
        );
        ensure!(
            (1..=r.n).contains(&r.zone_redundancy),
            "replication.zone_redundancy = {} is not possible with replication.n = {}: it must be in 1..={}",
            r.zone_redundancy,
            r.n,
            r.n
        );
        ensure!(
            (1..=1000).contains(&r.max_siblings),
            "replication.max_siblings must be in 1..=1000"
        );
        ensure!(
            r.request_timeout_ms >= 10 && r.replica_timeout_ms >= 10,
            "timeouts must be at least 10 ms"
        );
        let g = &self.gossip;
        ensure!(
            (10..=60_000).contains(&g.interval_ms),
            "gossip.interval_ms must be in 10..=60000"
        );
        ensure!(
            g.phi_threshold > 0.0 && g.phi_threshold <= 100.0,
            "gossip.phi_threshold must be in (0, 100]"
        );
        ensure!(
            self.storage.cache_capacity_mb >= 1,
            "storage.cache_capacity_mb must be at least 1"
        );
        ensure!(
            self.storage.commit_window_us <= 100_000,
            "storage.commit_window_us must be at most 100000 (100 ms)"
        );
        ensure!(
            self.storage.min_free_bytes <= MAX_MIN_FREE_BYTES,
            "storage.min_free_bytes must be at most {MAX_MIN_FREE_BYTES} (1 TiB); 0 disables the reserve"
        );
        ensure!(
            self.storage.scrub_interval_secs == 0
                || (60..=31_536_000).contains(&self.storage.scrub_interval_secs),
            "storage.scrub_interval_secs must be 0 (off) or in 60..=31536000"
        );
        ensure!(
            self.limits.max_client_requests >= 1 && self.limits.max_peer_requests >= 1,
            "limits must be at least 1"
        );
        let h = &self.handoff;
        ensure!(
            (10..=600_000).contains(&h.interval_ms),
            "handoff.interval_ms must be in 10..=600000"
        );
        ensure!(
            h.rate_per_sec >= 1,
            "handoff.rate_per_sec must be at least 1"
        );
        ensure!(h.max_hints >= 1, "handoff.max_hints must be at least 1");
        ensure!(
            h.max_age_secs >= 1,
            "handoff.max_age_secs must be at least 1"
        );
        let a = &self.anti_entropy;
        ensure!(
            (10..=3_600_000).contains(&a.interval_ms),
            "anti_entropy.interval_ms must be in 10..=3600000"
        );
        ensure!(
            a.keys_per_sec >= 1,
            "anti_entropy.keys_per_sec must be at least 1"
        );
        ensure!(
            self.transfer.objects_per_sec >= 1,
            "transfer.objects_per_sec must be at least 1"
        );
        ensure!(
            matches!(self.log.format.as_str(), "human" | "json"),
            "log.format must be `human` or `json`"
        );
        self.resp.validate(r.n)?;
        self.router.settings(self.limits.max_peer_requests)?;
        ensure!(
            !(self.resp.enabled && self.admin.enabled && self.resp.listen == self.admin.listen),
            "resp.listen and admin.listen are both {}: give them different ports",
            self.resp.listen
        );
        Ok(())
    }

    /// The address peers reach this node at.
    pub fn advertise(&self) -> SocketAddr {
        self.advertise.unwrap_or(self.listen)
    }

    /// The address clients reach this node at.
    pub fn client_advertise(&self) -> SocketAddr {
        self.client_advertise.unwrap_or_else(|| self.advertise())
    }

    /// Deadline of a whole client request.
    pub fn request_timeout(&self) -> Duration {
        Duration::from_millis(self.replication.request_timeout_ms)
    }

    /// Deadline of one replica call.
    pub fn replica_timeout(&self) -> Duration {
        Duration::from_millis(self.replication.replica_timeout_ms)
    }
}

/// The smallest valid config file, for unit tests here and in
/// [`settings`] (append sections to it).
#[cfg(test)]
pub(crate) const MINIMAL: &str = r#"
    id = "node1"
    data_dir = "/tmp/x"
    listen = "127.0.0.1:7001"
    zone = "z1"
    host = "h1"
    [certs]
    dir = "/tmp/certs"
"#;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_minimal_config_gets_the_defaults() {
        let c: NodeConfig = toml::from_str(MINIMAL).unwrap();
        c.validate().unwrap();
        assert_eq!(
            (c.replication.n, c.replication.r, c.replication.w),
            (3, 2, 2)
        );
        assert_eq!(c.advertise(), c.listen);
        assert_eq!(c.client_advertise(), c.listen);
    }

    #[test]
    fn the_committed_example_is_valid() {
        let text = include_str!("../kvnode.example.toml");
        let c: NodeConfig = toml::from_str(text).unwrap();
        c.validate().unwrap();
        // The example documents every router key with its default.
        assert_eq!(c.router, RouterConfig::default());
    }

    #[test]
    fn flags_override_and_supply_keys() {
        let dir = tempfile::tempdir().unwrap();
        let shared = dir.path().join("shared.toml");
        std::fs::write(
            &shared,
            "listen = \"0.0.0.0:7000\"\nworker_threads = 4\n[certs]\ndir = \"/certs\"\n[log]\nlevel = \"debug\"\n",
        )
        .unwrap();
        let flags = Overrides {
            id: Some("node2".into()),
            advertise: Some("10.0.0.2:7000".parse().unwrap()),
            client_advertise: Some("127.0.0.1:7102".parse().unwrap()),
            zone: Some("zone-b".into()),
            host: Some("host-2".into()),
            seeds: Some(vec!["10.0.0.1:7000".into(), "10.0.0.2:7000".into()]),
            data_dir: Some("/data".into()),
            worker_threads: Some(1),
            log_format: Some("json".into()),
            ..Overrides::default()
        };
        let c = NodeConfig::load(Some(&shared), &flags).unwrap();
        assert_eq!(c.id.as_str(), "node2");
        assert_eq!(c.listen.to_string(), "0.0.0.0:7000");
        assert_eq!(c.advertise().to_string(), "10.0.0.2:7000");
        assert_eq!(c.client_advertise().to_string(), "127.0.0.1:7102");
        assert_eq!(c.seeds.len(), 2);
        assert_eq!(c.worker_threads, 1);
        assert_eq!(c.certs.dir, PathBuf::from("/certs"));
        assert_eq!(
            (c.log.format.as_str(), c.log.level.as_str()),
            ("json", "debug")
        );

        // No file at all: every required key from flags.
        let only_flags = Overrides {
            listen: Some("127.0.0.1:7001".parse().unwrap()),
            certs_dir: Some("/certs".into()),
            ..flags.clone()
        };
        assert!(NodeConfig::load(None, &only_flags).is_ok());
        let missing = Overrides {
            zone: None,
            ..only_flags.clone()
        };
        let e = NodeConfig::load(None, &missing).unwrap_err().to_string();
        assert!(
            e.contains("`zone` is missing") && e.contains("--zone"),
            "{e}"
        );

        // Flags are validated like the file.
        let bad_id = Overrides {
            id: Some("Node 2".into()),
            ..only_flags.clone()
        };
        assert!(NodeConfig::load(None, &bad_id).is_err());
        let unspecified = Overrides {
            listen: Some("0.0.0.0:7001".parse().unwrap()),
            advertise: None,
            ..only_flags
        };
        assert!(NodeConfig::load(None, &unspecified).is_err());
    }

    #[test]
    fn a_file_alone_loads_with_line_numbers_on_errors() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("c.toml");
        std::fs::write(&file, MINIMAL).unwrap();
        let c = NodeConfig::load(Some(&file), &Overrides::default()).unwrap();
        assert_eq!(c.id.as_str(), "node1");
        std::fs::write(&file, format!("{MINIMAL}\n[replication]\nnn = 3\n")).unwrap();
        let e = format!(
            "{:#}",
            NodeConfig::load(Some(&file), &Overrides::default()).unwrap_err()
        );
        assert!(e.contains("line"), "{e}");
    }

    #[test]
    fn typos_and_bad_values_are_refused() {
        let typo = format!("{MINIMAL}\n[replication]\nnn = 3\n");
        assert!(toml::from_str::<NodeConfig>(&typo).is_err());
        let bad_w = format!("{MINIMAL}\n[replication]\nw = 4\n");
        let c: NodeConfig = toml::from_str(&bad_w).unwrap();
        let e = c.validate().unwrap_err().to_string();
        // The refusal names the value and N.
        assert_eq!(
            e,
            "replication.w = 4 is not possible with replication.n = 3: it must be in 1..=3"
        );
        let unspecified = MINIMAL.replace("127.0.0.1:7001", "0.0.0.0:7001");
        let c: NodeConfig = toml::from_str(&unspecified).unwrap();
        assert!(c.validate().is_err());
        let bad_id = MINIMAL.replace("node1", "Node 1");
        assert!(toml::from_str::<NodeConfig>(&bad_id).is_err());
    }
}
