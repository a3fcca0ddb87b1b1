//! [`TestCluster`]: real `kvnode` processes in a temporary directory, and
//! their life (start, kill, stop, restart). Looking at them is in
//! `observe.rs`.

use std::net::UdpSocket;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use kv_types::NodeId;
use tokio::sync::{Mutex, MutexGuard};

use crate::bins::{self, Binaries};
use crate::config::{self, NodePlan, Settings};
use crate::process::NodeProcess;

/// Held by every live [`TestCluster`]: one cluster at a time per process.
/// A tokio lock, so that a panicking test releases it without poisoning
/// and a test future holding it stays `Send`.
static ONE_CLUSTER_AT_A_TIME: Mutex<()> = Mutex::const_new(());

/// Set this environment variable to keep a cluster's directory (configs,
/// data, logs) after the test; its path is printed.
const KEEP_VAR: &str = "KV_TESTS_KEEP";

/// Options of a [`TestCluster`]; [`ClusterBuilder::start`] starts it.
#[derive(Clone, Debug)]
pub struct ClusterBuilder {
    /// Number of member nodes.
    nodes: usize,
    /// Zones the nodes are spread over, round robin.
    zones: usize,
    /// `storage.sync_writes` of every node.
    sync_writes: bool,
    /// Config overrides applied after the harness defaults.
    overrides: Settings,
    /// Where the nodes' data directories go (`None`: in the cluster's
    /// temporary directory).
    data_root: Option<PathBuf>,
    /// Environment variables of one node's process, by index (from 1).
    node_env: Vec<(usize, String, String)>,
}

impl ClusterBuilder {
    /// Puts each node's data directory at `root/<node id>` instead of in
    /// the cluster's temporary directory (a small filesystem of the test's
    /// own, for example). The test owns `root` and cleans it up.
    pub fn data_root(mut self, root: &Path) -> Self {
        self.data_root = Some(root.to_path_buf());
        self
    }

    /// Spreads the nodes over `zones` zones (default 3), round robin.
    pub fn zones(mut self, zones: usize) -> Self {
        self.zones = zones.max(1);
        self
    }

    /// Sets `storage.sync_writes` on every node (default true).
    pub fn sync_writes(mut self, on: bool) -> Self {
        self.sync_writes = on;
        self
    }

    /// Sets `key = value` in `[section]` of every node's config (`""` is
    /// the top level); `value` is a TOML literal such as `3000` or
    /// `"json"`. Replaces the harness default of that key, if any.
    pub fn setting(mut self, section: &str, key: &str, value: &str) -> Self {
        self.overrides
            .entry(section.to_string())
            .or_default()
            .insert(key.to_string(), value.to_string());
        self
    }

    /// Sets the environment variable `key` to `value` for node `index`'s
    /// process (from 1), at every start: for example
    /// `KV_TEST_CLOCK_OFFSET_MS` to skew its wall clock.
    pub fn node_env(mut self, index: usize, key: &str, value: &str) -> Self {
        self.node_env
            .push((index, key.to_string(), value.to_string()));
        self
    }

    /// Anti-entropy that reaches every key within about 1.3 s: an exchange
    /// every 20 ms over 64 partitions (it visits one partition per
    /// interval; with the default 1024 a round takes 20 s), for tests that
    /// wait for what anti-entropy does.
    pub fn fast_anti_entropy(self) -> Self {
        self.setting("anti_entropy", "interval_ms", "20")
            .setting("replication", "partitions", "64")
    }

    /// Hints that live `max_age_secs`, with handoff passes every 100 ms:
    /// tombstone purge and clock compaction wait until hints have expired
    /// (a day by default).
    pub fn short_hints(self, max_age_secs: u64) -> Self {
        self.setting("handoff", "max_age_secs", &max_age_secs.to_string())
            .setting("handoff", "interval_ms", "100")
    }

    /// Makes the certificates and configs, starts every node and waits
    /// until the cluster has converged ([`TestCluster::wait_converged`]).
    /// Waits first for any other cluster of this process to be dropped.
    ///
    /// # Errors
    /// Missing binaries, file system or certificate failures, a node that
    /// exits, or no convergence within [`crate::DEADLINE`].
    pub async fn start(self) -> anyhow::Result<TestCluster> {
        let lock = ONE_CLUSTER_AT_A_TIME.lock().await;
        if self.nodes == 0 {
            bail!("a cluster needs at least one node");
        }
        let bins = bins::locate()?;
        let root = tempfile::Builder::new()
            .prefix("kv-tests-")
            .tempdir()
            .context("cannot create a temporary directory")?;
        let certs = root.path().join("certs");
        let ids = (1..=self.nodes)
            .map(|i| NodeId::new(format!("node{i}")))
            .collect::<Result<Vec<_>, _>>()?;
        kv_tls::init(&certs, &ids).context("cannot make the cluster's certificates")?;
        let ports = free_ports(self.nodes)?;
        let seeds: Vec<String> = ports.iter().take(3).map(|p| endpoint(*p)).collect();
        let mut cluster = TestCluster {
            bins,
            nodes: Vec::new(),
            certs,
            seeds,
            sync_writes: self.sync_writes,
            overrides: self.overrides,
            data_root: self.data_root,
            root: Some(root),
            _lock: lock,
        };
        for (i, (id, port)) in ids.into_iter().zip(ports).enumerate() {
            let index = i + 1;
            let zone = config::zone_of(index, self.zones);
            let host = config::host_of(index, self.nodes);
            let certs = cluster.certs.clone();
            cluster.add_node(id, true, port, certs, zone, host)?;
        }
        for (index, key, value) in &self.node_env {
            if let Some(node) = cluster.nodes.get_mut(index.saturating_sub(1)) {
                node.env.push((key.clone(), value.clone()));
            }
        }
        for index in 1..=self.nodes {
            cluster.spawn(index)?;
        }
        // The cluster is dropped on the way out of a failed start, before
        // the test panics: its logs go into the error instead.
        for index in 1..=self.nodes {
            let mut retries = 0;
            while let Err(e) = cluster.wait_serving(index).await {
                // The ports were free when picked, but another socket may
                // take one before the node binds it: pick others and retry.
                if retries < PORT_RETRIES && cluster.node(index)?.lost_port_race() {
                    retries += 1;
                    cluster.repick_ports(index)?;
                    cluster.spawn(index)?;
                    continue;
                }
                bail!("{e:#}\n{}", cluster.log_tails());
            }
        }
        if let Err(e) = cluster.wait_converged().await {
            bail!("{e:#}\n{}", cluster.log_tails());
        }
        Ok(cluster)
    }
}

/// A cluster of real `kvnode` processes on 127.0.0.1, in a temporary
/// directory (`certs/`, `nodeN/{config.toml,data/,log}`). Nodes are
/// numbered from 1 (`node1` is index 1), like their ids.
///
/// Dropping it SIGKILLs and reaps every node, prints the tail of every
/// log when the test is panicking, and deletes the directory.
pub struct TestCluster {
    /// The binaries it runs.
    pub(crate) bins: Binaries,
    /// Members first (index 1..=n), then extra nodes.
    pub(crate) nodes: Vec<NodeProcess>,
    /// The cluster's certificate directory.
    pub(crate) certs: PathBuf,
    /// Endpoints of the first three members.
    seeds: Vec<String>,
    /// `storage.sync_writes` of its nodes.
    sync_writes: bool,
    /// Config overrides of its nodes.
    overrides: Settings,
    /// Where data directories go, when not in the cluster's directory.
    data_root: Option<PathBuf>,
    /// The directory; `None` only once dropped.
    root: Option<tempfile::TempDir>,
    /// Declared last: released after the nodes are dead.
    _lock: MutexGuard<'static, ()>,
}

impl TestCluster {
    /// Options for a cluster of `nodes` members.
    pub fn builder(nodes: usize) -> ClusterBuilder {
        ClusterBuilder {
            nodes,
            zones: 3,
            sync_writes: true,
            overrides: Settings::new(),
            data_root: None,
            node_env: Vec::new(),
        }
    }

    /// Starts a converged cluster of `nodes` members with the defaults.
    ///
    /// # Errors
    /// See [`ClusterBuilder::start`].
    pub async fn start(nodes: usize) -> anyhow::Result<TestCluster> {
        Self::builder(nodes).start().await
    }

    /// The cluster's directory.
    pub fn dir(&self) -> &Path {
        self.root
            .as_ref()
            .map_or(Path::new("/nonexistent"), |r| r.path())
    }

    /// The cluster's certificate directory (`ca.pem`, node, `client` and
    /// `admin` certificates).
    pub fn certs_dir(&self) -> &Path {
        &self.certs
    }

    /// Node indices of the members, running or not (1..=n).
    pub fn members(&self) -> Vec<usize> {
        self.indices(|n| n.member)
    }

    /// Node indices of the members whose process is running.
    pub fn running(&self) -> Vec<usize> {
        self.indices(|n| n.member && n.is_started())
    }

    /// The id of node `index`.
    ///
    /// # Errors
    /// When there is no such node.
    pub fn id(&self, index: usize) -> anyhow::Result<NodeId> {
        Ok(self.node(index)?.id.clone())
    }

    /// The index of the node with id `id`.
    ///
    /// # Errors
    /// When no node has that id.
    pub fn index_of(&self, id: &str) -> anyhow::Result<usize> {
        let i = self.nodes.iter().position(|n| n.id.as_str() == id);
        i.map(|i| i + 1)
            .with_context(|| format!("no node {id} in this cluster"))
    }

    /// `127.0.0.1:PORT` of node `index`.
    ///
    /// # Errors
    /// When there is no such node.
    pub fn endpoint(&self, index: usize) -> anyhow::Result<String> {
        Ok(self.node(index)?.endpoint.clone())
    }

    /// SIGKILLs node `index` and reaps it. Other nodes notice only through
    /// their failure detectors: see [`TestCluster::wait_dead`].
    ///
    /// # Errors
    /// When the node is not running.
    pub fn kill(&self, index: usize) -> anyhow::Result<()> {
        self.node(index)?.kill()
    }

    /// SIGSTOPs node `index`: the process stays, frozen (what `docker
    /// pause` does to a container), until [`TestCluster::resume`].
    ///
    /// # Errors
    /// When the node is not running or kill(1) fails.
    pub fn pause(&self, index: usize) -> anyhow::Result<()> {
        self.node(index)?.signal("STOP")
    }

    /// SIGCONTs node `index` after [`TestCluster::pause`].
    ///
    /// # Errors
    /// When the node is not running or kill(1) fails.
    pub fn resume(&self, index: usize) -> anyhow::Result<()> {
        self.node(index)?.signal("CONT")
    }

    /// SIGHUPs node `index`, which reloads its certificate, key and
    /// `ca.pem`, and waits until it logs the outcome: its line, and
    /// whether the reload took effect (`false`: the node kept what it had
    /// loaded before; the line says why).
    ///
    /// # Errors
    /// When the node is not running, exits, or logs no outcome within
    /// [`crate::DEADLINE`].
    pub async fn reload(&self, index: usize) -> anyhow::Result<ReloadOutcome> {
        let node = self.node(index)?;
        let before = node.reload_lines().len();
        node.signal("HUP")?;
        let what = format!("{} to log the outcome of its certificate reload", node.id);
        crate::poll::poll(&what, crate::DEADLINE, async || {
            if let Some(exited) = node.exited() {
                return Err(crate::poll::Step::Never(exited));
            }
            let lines = node.reload_lines();
            match lines.get(before) {
                Some(line) => Ok(ReloadOutcome {
                    reloaded: line.contains(crate::process::RELOADED),
                    line: line.clone(),
                }),
                None => Err(crate::poll::Step::NotYet(format!(
                    "{} reload lines logged, {before} before the SIGHUP",
                    lines.len()
                ))),
            }
        })
        .await
    }

    /// SIGTERMs node `index` and waits until it has shut down gracefully.
    ///
    /// # Errors
    /// When it is not running, or does not exit cleanly in 30 s.
    pub async fn stop(&self, index: usize) -> anyhow::Result<()> {
        self.node(index)?.stop().await
    }

    /// Starts node `index` again, with the same config and data directory,
    /// and waits until it answers `status` (not until others see it: see
    /// [`TestCluster::wait_alive`]).
    ///
    /// # Errors
    /// When it is running already, exits, or does not answer in time.
    pub async fn start_node(&self, index: usize) -> anyhow::Result<()> {
        self.spawn(index)?;
        self.wait_serving(index).await
    }

    /// Starts a node beside the initial members: id `id`, certificates
    /// from `certs` (which must hold `ca.pem`, `<id>.pem`, `<id>.key` and,
    /// for [`TestCluster::status`], a `client` certificate; another CA's
    /// directory makes a stranger), seeds pointing at this cluster, zone-a.
    /// Returns its index. It is killed with the cluster, but it is not in
    /// [`TestCluster::members`], so the waits and [`TestCluster::kvctl`]
    /// ignore it.
    ///
    /// # Errors
    /// As for [`TestCluster::start_node`].
    pub async fn start_extra_node(&mut self, id: &str, certs: &Path) -> anyhow::Result<usize> {
        let id = NodeId::new(id)?;
        let port = free_ports(1)?.first().copied().context("no free port")?;
        let index = self.nodes.len() + 1;
        let host = format!("host-{index}");
        self.add_node(id, false, port, certs.to_path_buf(), "zone-a".into(), host)?;
        self.start_node(index).await?;
        Ok(index)
    }

    /// As [`TestCluster::start_extra_node`], with `key = value` in
    /// `[section]` of this node's config only (`""` is the top level), e.g.
    /// another `cluster_id`.
    ///
    /// # Errors
    /// As [`TestCluster::start_extra_node`].
    pub async fn start_extra_node_with(
        &mut self,
        id: &str,
        certs: &Path,
        (section, key, value): (&str, &str, &str),
    ) -> anyhow::Result<usize> {
        let id = NodeId::new(id)?;
        let port = free_ports(1)?.first().copied().context("no free port")?;
        let index = self.nodes.len() + 1;
        let host = format!("host-{index}");
        let shared = self.overrides.clone();
        self.overrides
            .entry(section.to_string())
            .or_default()
            .insert(key.to_string(), value.to_string());
        let added = self.add_node(id, false, port, certs.to_path_buf(), "zone-a".into(), host);
        self.overrides = shared;
        added?;
        self.start_node(index).await?;
        Ok(index)
    }

    pub(crate) fn node(&self, index: usize) -> anyhow::Result<&NodeProcess> {
        index
            .checked_sub(1)
            .and_then(|i| self.nodes.get(i))
            .with_context(|| format!("no node {index}: nodes are 1..={}", self.nodes.len()))
    }

    fn indices(&self, keep: impl Fn(&NodeProcess) -> bool) -> Vec<usize> {
        (1..=self.nodes.len())
            .filter(|&i| keep(&self.nodes[i - 1]))
            .collect()
    }

    /// Writes the config of a new node and records it (not started).
    pub(crate) fn add_node(
        &mut self,
        id: NodeId,
        member: bool,
        port: u16,
        certs: PathBuf,
        zone: String,
        host: String,
    ) -> anyhow::Result<()> {
        let index = self.nodes.len() + 1;
        let dir = self.dir().join(id.as_str());
        let data_dir = match &self.data_root {
            Some(root) => root.join(id.as_str()),
            None => dir.join("data"),
        };
        // The node's own directory (config, log) exists even when its data
        // lives under another root.
        for d in [&dir, &data_dir] {
            std::fs::create_dir_all(d).with_context(|| format!("cannot create {}", d.display()))?;
        }
        let tcp = free_tcp_ports(2)?;
        let (resp_port, admin_port) = (tcp[0], tcp[1]);
        let plan = NodePlan {
            index,
            id: id.as_str(),
            port,
            data_dir: &data_dir,
            certs_dir: &certs,
            zone,
            host,
            seeds: &self.seeds,
            resp_port,
            admin_port,
        };
        let mut node = NodeProcess::new(id.clone(), member, endpoint(port), &dir, certs.clone());
        node.data = data_dir.clone();
        node.resp = endpoint(resp_port);
        node.admin = endpoint(admin_port);
        let text = config::render(&plan, self.sync_writes, &self.overrides);
        std::fs::write(&node.config, text)
            .with_context(|| format!("cannot write {}", node.config.display()))?;
        self.nodes.push(node);
        Ok(())
    }

    /// Gives node `index` new QUIC, RESP and admin ports (after it lost a
    /// race for one of them), in its config, in every config's seed list
    /// and in the cluster's own records.
    fn repick_ports(&mut self, index: usize) -> anyhow::Result<()> {
        let udp = free_ports(1)?;
        let tcp = free_tcp_ports(2)?;
        let node = self.node(index)?;
        let old = [node.endpoint.clone(), node.resp.clone(), node.admin.clone()];
        let new = [endpoint(udp[0]), endpoint(tcp[0]), endpoint(tcp[1])];
        for other in &self.nodes {
            let text = std::fs::read_to_string(&other.config)
                .with_context(|| format!("cannot read {}", other.config.display()))?;
            let mut updated = text.clone();
            for (o, n) in old.iter().zip(&new) {
                updated = updated.replace(&format!("\"{o}\""), &format!("\"{n}\""));
            }
            if updated != text {
                std::fs::write(&other.config, updated)
                    .with_context(|| format!("cannot write {}", other.config.display()))?;
            }
        }
        for seed in &mut self.seeds {
            if *seed == old[0] {
                seed.clone_from(&new[0]);
            }
        }
        let node = &mut self.nodes[index - 1];
        eprintln!(
            "kv-tests: {} lost a port race ({}); retrying on {}",
            node.id,
            old.join(", "),
            new.join(", ")
        );
        [node.endpoint, node.resp, node.admin] = new;
        Ok(())
    }

    /// The tail of every node's log, each under a header line.
    fn log_tails(&self) -> String {
        let tails: Vec<String> = self
            .nodes
            .iter()
            .map(|node| {
                format!(
                    "----- {} ({}): last lines of {} -----\n{}",
                    node.id,
                    node.endpoint,
                    node.log.display(),
                    node.log_tail()
                )
            })
            .collect();
        tails.join("\n")
    }

    fn spawn(&self, index: usize) -> anyhow::Result<()> {
        self.node(index)?.spawn(&self.bins.kvnode)
    }
}

impl Drop for TestCluster {
    fn drop(&mut self) {
        for node in &self.nodes {
            let _ = node.kill();
        }
        if std::thread::panicking() {
            eprintln!("{}", self.log_tails());
        }
        if std::env::var_os(KEEP_VAR).is_some()
            && let Some(root) = self.root.take()
        {
            eprintln!("kv-tests: kept {}", root.keep().display());
        }
    }
}

/// What a node did with a SIGHUP ([`TestCluster::reload`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReloadOutcome {
    /// Whether it took the files it read (`false`: it kept those it had).
    pub reloaded: bool,
    /// The line it logged about it.
    pub line: String,
}

/// Times a node that lost the race for one of its ports is retried on
/// fresh ones while a cluster starts.
const PORT_RETRIES: usize = 3;

/// `127.0.0.1:PORT`.
fn endpoint(port: u16) -> String {
    format!("127.0.0.1:{port}")
}

/// `count` distinct UDP ports of 127.0.0.1 that were free just now, for
/// nodes to bind (see [`pick_ports`]).
pub(crate) fn free_ports(count: usize) -> anyhow::Result<Vec<u16>> {
    pick_ports(count, |port| UdpSocket::bind(("127.0.0.1", port)).is_ok())
        .context("no free UDP port on 127.0.0.1")
}

/// `count` distinct TCP ports of 127.0.0.1 that were free just now (for the
/// RESP listener and the admin endpoint).
fn free_tcp_ports(count: usize) -> anyhow::Result<Vec<u16>> {
    pick_ports(count, |port| {
        std::net::TcpListener::bind(("127.0.0.1", port)).is_ok()
    })
    .context("no free TCP port on 127.0.0.1")
}

/// Ports for nodes are picked below the kernel's ephemeral range
/// (`net.ipv4.ip_local_port_range`): a port picked free there stays free
/// until the node binds it, whereas an ephemeral one can be handed to any
/// socket bound to port 0 meanwhile (the test's own QUIC clients bind one
/// per connection), and a node then fails to start.
const PICK_FROM: u16 = 20_000;

/// Picks `count` distinct ports that `is_free` accepts, from
/// [`PICK_FROM`] up to the start of the ephemeral range, starting at a
/// per-process offset and moving on from call to call, so consecutive
/// picks (and concurrent test processes) rarely meet.
fn pick_ports(count: usize, is_free: impl Fn(u16) -> bool) -> Option<Vec<u16>> {
    use std::sync::atomic::{AtomicU32, Ordering};
    static NEXT: AtomicU32 = AtomicU32::new(u32::MAX);
    let end = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse::<u16>().ok())
        .unwrap_or(32_768);
    if end <= PICK_FROM + 1_000 {
        return None;
    }
    let span = u32::from(end - PICK_FROM);
    let seed = std::process::id().wrapping_mul(7_919) % span;
    let _ = NEXT.compare_exchange(u32::MAX, seed, Ordering::Relaxed, Ordering::Relaxed);
    let mut out = Vec::with_capacity(count);
    for _ in 0..span {
        if out.len() == count {
            break;
        }
        let offset = NEXT.fetch_add(1, Ordering::Relaxed) % span;
        let port = PICK_FROM + u16::try_from(offset).ok()?;
        if !out.contains(&port) && is_free(port) {
            out.push(port);
        }
    }
    (out.len() == count).then_some(out)
}
