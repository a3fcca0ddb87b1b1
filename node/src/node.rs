//! Assembling a node from its parts, and taking it apart on SIGTERM.
//!
//! Start: certificates, storage, the replication core (on the storage,
//! with the QUIC network and gossip membership as its seams), the front
//! doors (bound before gossip, so a port conflict stops the node before
//! it joins), the QUIC endpoint, gossip, then the background services.
//! Shutdown (SIGTERM or SIGINT): stop accepting requests, let in-flight
//! ones finish (their replica calls included), finish background
//! replication, leave gossip, close connections, flush and close storage
//! (sled saves its key count and digests for the next start). SIGHUP reloads
//! the certificate, key and CA bundle ([`crate::certs`]) and changes
//! nothing else.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{Context, ensure};
use kv_gossip::{Membership, NodeInfo, Publisher, QuicTransport};
use kv_replication::{Clock, Core, CoreParts, Rng};
use kv_storage::{ReadCache, SledEngine, Storage};
use kv_transport::{Endpoint, GossipDatagram, TransportSettings};
use kv_types::Member;
use tokio::sync::{Semaphore, mpsc};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::{info, warn};

use crate::certs::NodeCerts;
use crate::config::NodeConfig;
use crate::front::{FrontDeps, FrontDoors, RunningFrontDoors};
use crate::handler::NodeHandler;
use crate::membership::GossipMembership;
use crate::network::QuicNetwork;

/// How long shutdown waits for in-flight requests and background work.
const DRAIN_DEADLINE: Duration = Duration::from_secs(10);

/// Environment variable that skews this node's wall clock by a number of
/// milliseconds (positive: ahead), through the core's [`Clock`]. For tests
/// and chaos runs only (clock skew); a node started with it logs a
/// warning. At most 30 days either way.
pub const CLOCK_OFFSET_ENV: &str = "KV_TEST_CLOCK_OFFSET_MS";

/// The node's clock: the system's, skewed by [`CLOCK_OFFSET_ENV`] when set.
fn node_clock() -> anyhow::Result<Clock> {
    let clock = Clock::system();
    let Ok(text) = std::env::var(CLOCK_OFFSET_ENV) else {
        return Ok(clock);
    };
    let offset: i64 = text.trim().parse().with_context(|| {
        format!("{CLOCK_OFFSET_ENV}={text:?} is not a whole number of milliseconds")
    })?;
    ensure!(
        offset.unsigned_abs() <= 30 * 24 * 3600 * 1000,
        "{CLOCK_OFFSET_ENV}={offset} is more than 30 days"
    );
    warn!(
        offset_ms = offset,
        "this node's wall clock is skewed by {CLOCK_OFFSET_ENV} (for tests and chaos runs only)"
    );
    clock.set_offset_ms(offset);
    Ok(clock)
}

/// Runs a node until SIGTERM or SIGINT, then shuts it down gracefully.
///
/// With `rebuild`, a damaged database or a data directory whose
/// incarnation or identity record is lost is taken anyway (see
/// `kvnode --help`).
///
/// # Errors
/// Startup failures (certificates, storage, binding); a data directory
/// refused (another node's or cluster's; damaged or without its metadata
/// and no `rebuild`), naming the path; a clean shutdown is `Ok`.
pub async fn run(config: NodeConfig, join: bool, rebuild: bool) -> anyhow::Result<()> {
    // First, so that a SIGHUP sent while the node starts is a reload once
    // it runs, not the end of the process (SIGHUP's default action).
    let mut signals = Signals::listen();
    let (certs, creds) = NodeCerts::load(&config)?;
    let certs = Arc::new(certs);
    let storage = open_storage(&config, rebuild).await?;
    let gossip = GossipMembership::new(config.client_advertise(), config.gossip.phi_threshold);
    let network = QuicNetwork::new(gossip.clone());
    let core = open_core(&config, join, rebuild, &storage, &network, &gossip).await?;
    let client_slots = Arc::new(Semaphore::new(config.limits.max_client_requests));
    let front = FrontDoors::bind(
        &config,
        FrontDeps {
            core: core.clone(),
            gossip: gossip.clone(),
            client_slots: client_slots.clone(),
            certs: certs.clone(),
        },
    )
    .await?;
    let handler = Arc::new(NodeHandler {
        core: core.clone(),
        gossip: gossip.clone(),
        client_slots,
        certs: certs.clone(),
    });
    let (gossip_tx, gossip_rx) = mpsc::channel(1024);
    let endpoint = Endpoint::bind(
        config.listen,
        &creds,
        TransportSettings::default(),
        handler,
        gossip_tx,
    )
    .context("cannot start the QUIC endpoint")?;
    network.set_endpoint(endpoint.clone());
    let membership = start_gossip(&config, &core, &endpoint, gossip_rx).await?;
    let publisher = membership.publisher();
    certs.publish(&publisher).await;
    let (stop, followers) = (CancellationToken::new(), TaskTracker::new());
    gossip.attach(&membership, &followers, stop.clone()).await;
    core.spawn(&followers, &stop);
    spawn_cpu_sampler(&core, &followers, stop.clone());
    let front = front.start(&membership).await;
    info!(
        node = %config.id,
        listen = %config.listen,
        advertise = %config.advertise(),
        zone = %config.zone,
        incarnation = format!("{:016x}", core.incarnation()),
        "kvnode ready"
    );

    signals.serve(&certs, &endpoint, &publisher).await;
    shut_down(Running {
        core,
        storage,
        endpoint,
        front,
        membership,
        followers,
        stop,
    })
    .await
}

/// The sled engine in the data directory. A database sled reports
/// damaged is refused, or with `rebuild` moved aside (renamed
/// `DATA_DIR.damaged-UNIXSECS`, never deleted) and replaced by an empty one.
async fn open_storage(config: &NodeConfig, rebuild: bool) -> anyhow::Result<Arc<dyn Storage>> {
    let (data_dir, settings) = (config.data_dir.clone(), config.sled_settings());
    let open = {
        let (data_dir, settings) = (data_dir.clone(), settings.clone());
        tokio::task::spawn_blocking(move || SledEngine::open(&data_dir, settings)).await?
    };
    let engine = match open {
        Err(e @ kv_storage::Error::Damaged { .. }) if !rebuild => {
            anyhow::bail!(
                "refusing to start: {e}. Its data cannot be trusted and will not be served as this \
                 node's. Start with --rebuild to move {} aside (kept) and refill this node from \
                 its replicas",
                data_dir.display()
            )
        }
        Err(e @ kv_storage::Error::Damaged { .. }) => {
            let stamp = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_secs());
            let mut aside = data_dir.clone().into_os_string();
            aside.push(format!(".damaged-{stamp}"));
            let aside = std::path::PathBuf::from(aside);
            std::fs::rename(&data_dir, &aside).with_context(|| {
                format!(
                    "{e}; --rebuild cannot move it aside to {} (move it yourself and start again)",
                    aside.display()
                )
            })?;
            std::fs::create_dir_all(&data_dir)
                .with_context(|| format!("cannot create {}", data_dir.display()))?;
            warn!(
                damaged = %aside.display(),
                error = %e,
                "rebuild: the damaged database was moved aside; starting empty"
            );
            tokio::task::spawn_blocking(move || SledEngine::open(&data_dir, settings)).await?
        }
        other => other,
    }
    .with_context(|| format!("cannot open storage in {}", config.data_dir.display()))?;
    Ok(Arc::new(engine))
}

/// The replication core on `storage`, calling peers through `network` and
/// learning the cluster through `gossip`.
async fn open_core(
    config: &NodeConfig,
    join: bool,
    rebuild: bool,
    storage: &Arc<dyn Storage>,
    network: &Arc<QuicNetwork>,
    gossip: &Arc<GossipMembership>,
) -> anyhow::Result<Arc<Core>> {
    let parts = CoreParts {
        me: Member {
            id: config.id.clone(),
            zone: config.zone.clone(),
            host: config.host.clone(),
            weight: config.weight,
            status: kv_types::NodeStatus::Up,
        },
        join,
        storage: storage.clone(),
        cache: Arc::new(ReadCache::new(config.storage.read_cache_mb << 20)),
        network: network.clone(),
        membership: gossip.clone(),
        clock: Arc::new(node_clock()?),
        rng: Arc::new(Rng::from_os()),
        settings: config.replication_settings(),
        router: config.router.settings(config.limits.max_peer_requests)?,
        cluster_id: config.cluster_id.clone(),
        rebuild,
    };
    let core = match Core::open(parts).await {
        Ok(core) => core,
        Err(kv_replication::Error::DataDir {
            message,
            rebuildable,
        }) => anyhow::bail!(
            "refusing to start on data directory {}: {message}{}",
            config.data_dir.display(),
            if rebuildable {
                ". Start with --rebuild to take a new incarnation and refill this node from its replicas"
            } else {
                ""
            }
        ),
        Err(e) => {
            return Err(anyhow::Error::new(e).context(format!(
                "cannot open the node on {}",
                config.data_dir.display()
            )));
        }
    };
    Ok(Arc::new(core))
}

/// Chitchat over the endpoint, announcing this node as it is now.
async fn start_gossip(
    config: &NodeConfig,
    core: &Core,
    endpoint: &Arc<Endpoint>,
    gossip_rx: mpsc::Receiver<GossipDatagram>,
) -> anyhow::Result<Membership> {
    let transport = QuicTransport::new(endpoint.clone(), gossip_rx);
    let generation = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    let me = NodeInfo {
        id: config.id.clone(),
        client_addr: config.client_advertise(),
        zone: config.zone.clone(),
        host: config.host.clone(),
        weight: config.weight,
        status: core.cluster().status(),
    };
    Membership::start(config.gossip_settings(generation), &me, &transport)
        .await
        .context("cannot start gossip")
}

/// Samples the process's CPU use every report period for the core's load
/// report (the router's load dimension): utime + stime from
/// `/proc/self/stat` (in USER_HZ ticks, 100 per second on Linux), over the
/// cores the process may use: the machine's, or fewer by its cgroup's CPU
/// quota (re-read every period: a cap set on a running node counts from
/// the next; `crate::cpu_quota`).
fn spawn_cpu_sampler(core: &Core, tasks: &TaskTracker, stop: CancellationToken) {
    let reporter = core.reporter().clone();
    let period = core.scoring().settings().report_period;
    let cores = std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get);
    tasks.spawn(async move {
        let mut tick = tokio::time::interval(period);
        let mut last: Option<(u64, std::time::Instant)> = None;
        loop {
            tokio::select! {
                _ = stop.cancelled() => break,
                _ = tick.tick() => {}
            }
            let Some(ticks) = cpu_ticks() else { continue };
            let now = std::time::Instant::now();
            if let Some((before, at)) = last {
                let used = ticks.saturating_sub(before) as f64 / USER_HZ;
                let usable = crate::cpu_quota::usable_cores(cores, crate::cpu_quota::quota_cores());
                let wall = now.duration_since(at).as_secs_f64() * usable;
                if wall > 0.0 {
                    reporter.set_cpu(used / wall);
                }
            }
            last = Some((ticks, now));
        }
    });
}

/// Clock ticks per second of `/proc` times (USER_HZ, 100 on Linux).
const USER_HZ: f64 = 100.0;

/// utime + stime of this process, in clock ticks.
fn cpu_ticks() -> Option<u64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // The command name may hold spaces: fields count after its ')'.
    let rest = stat.rsplit_once(')')?.1;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some(utime + stime)
}

/// What a running node is made of, for shutdown.
struct Running {
    core: Arc<Core>,
    storage: Arc<dyn Storage>,
    endpoint: Arc<Endpoint>,
    front: RunningFrontDoors,
    membership: Membership,
    followers: TaskTracker,
    stop: CancellationToken,
}

/// Stops accepting, drains in-flight requests and background replication
/// (each within [`DRAIN_DEADLINE`]), leaves gossip, closes connections,
/// flushes and closes storage.
async fn shut_down(node: Running) -> anyhow::Result<()> {
    info!("shutting down: finishing in-flight requests");
    let started = std::time::Instant::now();
    let mut step = Step::new();
    node.front.stop_accepting();
    node.endpoint.stop_accepting();
    node.endpoint.drain(DRAIN_DEADLINE).await;
    step.done("transport drain");
    node.front.drain(DRAIN_DEADLINE).await;
    step.done("front door drain");
    if !node.core.finish_background(DRAIN_DEADLINE).await {
        warn!("background replication still running at shutdown; anti-entropy will finish it");
    }
    step.done("background replication");
    node.stop.cancel();
    node.followers.close();
    if tokio::time::timeout(DRAIN_DEADLINE, node.followers.wait())
        .await
        .is_err()
    {
        warn!("background tasks still running at shutdown; stopping without them");
    }
    step.done("background tasks");
    node.membership.shutdown().await;
    step.done("gossip");
    node.endpoint.close().await;
    step.done("connections closed");
    let storage = node.storage;
    // The final flush; sled also saves its key count and digests for the
    // next start (which then need not scan every record).
    tokio::task::spawn_blocking(move || storage.close())
        .await?
        .context("final flush failed")?;
    step.done("final flush");
    info!(elapsed_ms = started.elapsed().as_millis() as u64, "stopped");
    Ok(())
}

/// Times the steps of a shutdown: a step that took over a second is
/// logged (an operator waiting on a stop sees which one), the others at
/// debug level.
struct Step(std::time::Instant);

impl Step {
    fn new() -> Self {
        Step(std::time::Instant::now())
    }

    fn done(&mut self, what: &str) {
        let took = self.0.elapsed();
        if took >= Duration::from_secs(1) {
            info!(
                step = what,
                took_ms = took.as_millis() as u64,
                "slow shutdown step"
            );
        } else {
            tracing::debug!(
                step = what,
                took_ms = took.as_millis() as u64,
                "shutdown step"
            );
        }
        self.0 = std::time::Instant::now();
    }
}

/// The signals a running node answers: SIGTERM and SIGINT stop it,
/// SIGHUP reloads its certificates.
struct Signals {
    term: Option<tokio::signal::unix::Signal>,
    hup: Option<tokio::signal::unix::Signal>,
}

impl Signals {
    /// Starts listening (signals that arrive before [`Signals::serve`]
    /// are kept for it).
    fn listen() -> Self {
        use tokio::signal::unix::{SignalKind, signal};
        let term = signal(SignalKind::terminate())
            .inspect_err(
                |e| warn!(error = %e, "cannot listen for SIGTERM; only Ctrl-C stops the node"),
            )
            .ok();
        let hup = signal(SignalKind::hangup())
            .inspect_err(|e| warn!(error = %e, "cannot listen for SIGHUP; certificates reload only at a restart"))
            .ok();
        Signals { term, hup }
    }

    /// Reloads the certificates at every SIGHUP, until SIGTERM or SIGINT.
    async fn serve(&mut self, certs: &NodeCerts, endpoint: &Endpoint, publisher: &Publisher) {
        loop {
            let hup = async {
                match &mut self.hup {
                    Some(hup) => hup.recv().await,
                    None => std::future::pending().await,
                }
            };
            let term = async {
                match &mut self.term {
                    Some(term) => term.recv().await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                _ = term => return,
                _ = tokio::signal::ctrl_c() => return,
                Some(()) = hup => {
                    info!("SIGHUP: reloading the TLS certificate, key and CA bundle");
                    certs.reload(endpoint, publisher).await;
                }
            }
        }
    }
}
