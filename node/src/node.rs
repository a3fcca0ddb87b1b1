//! Assembling a node from its parts, and taking it apart on SIGTERM.
//!
//! Start: certificates, storage (and the incarnation of its data dir),
//! the persisted ring, the QUIC endpoint, gossip. Shutdown (SIGTERM or
//! SIGINT): stop accepting requests, let in-flight ones finish (their
//! replica calls included), finish background replication, leave gossip,
//! close connections, flush storage.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{Context, ensure};
use kv_gossip::{GossipConfig, Membership, NodeInfo, Publisher, QuicTransport};
use kv_router::{Ring, RingConfig};
use kv_storage::{ReadCache, SledConfig, SledEngine, Storage};
use kv_tls::{Role, TlsFiles};
use kv_transport::{Endpoint, TransportConfig};
use kv_types::{Actor, NodeStatus};
use tokio::sync::{Semaphore, mpsc};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::{info, warn};

use crate::antientropy::{AntiEntropy, AntiEntropyConfig};
use crate::cluster::{Cluster, RING_META, STATUS_META};
use crate::config::NodeConfig;
use crate::coordinator::{Coordinator, Quorums};
use crate::handler::NodeHandler;
use crate::handoff::{Handoff, HandoffConfig, HandoffStats};
use crate::peers::Peers;
use crate::replica::{DotFloor, Replica};
use crate::scoring::Scoring;
use crate::transfer::{Transfer, TransferConfig};

/// Metadata key of the data directory's incarnation.
const INCARNATION_META: &str = "incarnation";

/// How long shutdown waits for in-flight requests and background work.
const DRAIN_DEADLINE: Duration = Duration::from_secs(10);

/// Runs a node until SIGTERM or SIGINT, then shuts it down gracefully.
///
/// # Errors
/// Startup failures (certificates, storage, binding); a clean shutdown is
/// `Ok`.
pub async fn run(config: NodeConfig, join: bool) -> anyhow::Result<()> {
    let files = TlsFiles::in_dir(&config.certs.dir, config.id.as_str());
    let creds = kv_tls::load(&files).context("cannot load the node's certificates")?;
    let identity = creds.identity();
    ensure!(
        identity.role == Role::Node && identity.name == config.id.as_str(),
        "{} is a {} certificate for {:?}, not a node certificate for {}",
        files.cert.display(),
        identity.role.as_str(),
        identity.name,
        config.id
    );

    let data_dir = config.data_dir.clone();
    let sled_config = SledConfig {
        cache_capacity_bytes: config.storage.cache_capacity_mb << 20,
        sync_writes: config.storage.sync_writes,
        commit_window_us: config.storage.commit_window_us,
        ..SledConfig::default()
    };
    let engine = tokio::task::spawn_blocking(move || SledEngine::open(&data_dir, sled_config))
        .await?
        .with_context(|| format!("cannot open storage in {}", config.data_dir.display()))?;
    let storage: Arc<dyn Storage> = Arc::new(engine);
    let incarnation = incarnation(storage.as_ref())?;
    let actor = Actor {
        node: config.id.clone(),
        incarnation,
    };
    let persisted = match storage.get_meta(RING_META)? {
        Some(bytes) => match Ring::from_bytes(&bytes) {
            Ok(ring) => Some(ring),
            Err(e) => {
                warn!(error = %e, "ignoring the persisted ring");
                None
            }
        },
        None => None,
    };

    let status = initial_status(storage.as_ref(), join)?;
    let me = NodeInfo {
        id: config.id.clone(),
        client_addr: config.client_advertise(),
        zone: config.zone.clone(),
        host: config.host.clone(),
        weight: config.weight,
        status,
    };
    let ring_config = RingConfig {
        partitions: config.replication.partitions,
        replicas: config.replication.n,
        zone_redundancy: config.replication.zone_redundancy,
    };
    let cluster = Arc::new(Cluster::new(me, ring_config, storage.clone(), persisted)?);
    let handoff_stats = Arc::new(HandoffStats::default());
    let replica = Arc::new(Replica::new(
        storage.clone(),
        actor,
        config.replication.max_siblings,
        config.handoff.max_hints,
        handoff_stats.clone(),
        Arc::new(ReadCache::new(config.storage.read_cache_mb << 20)),
        Arc::new(DotFloor::load(storage.as_ref()).context("cannot lease dot counters")?),
    ));
    let scoring = Arc::new(Scoring::new(config.id.clone())?);
    let peers = Arc::new(Peers::new(
        cluster.clone(),
        replica.clone(),
        scoring.clone(),
    ));
    let background = TaskTracker::new();
    let coordinator = Arc::new(Coordinator::new(
        cluster.clone(),
        peers.clone(),
        scoring.clone(),
        Quorums {
            r: config.replication.r,
            w: config.replication.w,
            request_timeout: config.request_timeout(),
            replica_timeout: config.replica_timeout(),
        },
        background.clone(),
    ));
    let anti_entropy = Arc::new(AntiEntropy::new(
        cluster.clone(),
        peers.clone(),
        replica.clone(),
        storage.clone(),
        AntiEntropyConfig::from_config(&config),
        incarnation,
    ));
    let handoff = Arc::new(Handoff::new(
        cluster.clone(),
        peers.clone(),
        storage.clone(),
        HandoffConfig {
            interval: Duration::from_millis(config.handoff.interval_ms),
            rate_per_sec: config.handoff.rate_per_sec,
            max_age: Duration::from_secs(config.handoff.max_age_secs),
            timeout: config.replica_timeout(),
        },
        handoff_stats,
    ));
    let transfer = Arc::new(Transfer::new(
        cluster.clone(),
        peers.clone(),
        replica.clone(),
        storage.clone(),
        TransferConfig {
            interval: Duration::from_secs(1),
            pages_per_sec: 200,
            timeout: config.replica_timeout().max(Duration::from_secs(10)),
        },
    ));
    let client_slots = Arc::new(Semaphore::new(config.limits.max_client_requests));
    let peer_slots = Arc::new(Semaphore::new(config.limits.max_peer_requests));
    let front = crate::front::FrontDoors::bind(
        &config,
        &cluster,
        &coordinator,
        &scoring,
        &storage,
        &handoff.stats,
        &anti_entropy,
        (&client_slots, &peer_slots),
        replica.cache(),
    )
    .await?;
    let handler = Arc::new(NodeHandler {
        cluster: cluster.clone(),
        coordinator,
        replica: replica.clone(),
        scoring,
        anti_entropy: anti_entropy.clone(),
        transfer: transfer.clone(),
        peers: peers.clone(),
        client_slots,
        peer_slots,
    });

    let (gossip_tx, gossip_rx) = mpsc::channel(1024);
    let endpoint = Endpoint::bind(
        config.listen,
        &creds,
        TransportConfig::default(),
        handler,
        gossip_tx,
    )
    .context("cannot start the QUIC endpoint")?;
    peers.set_endpoint(endpoint.clone());
    let transport = QuicTransport::new(endpoint.clone(), gossip_rx);
    let gossip = GossipConfig {
        cluster_id: config.cluster_id.clone(),
        gossip_addr: config.advertise(),
        seeds: config.seeds.clone(),
        interval: Duration::from_millis(config.gossip.interval_ms),
        phi_threshold: config.gossip.phi_threshold,
        dead_node_grace: Duration::from_secs(24 * 3600),
        generation: SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64),
    };
    let membership = Membership::start(gossip, cluster.me(), &transport)
        .await
        .context("cannot start gossip")?;
    membership
        .publish(INCARNATION_KEY, &format!("{incarnation:016x}"))
        .await;
    let stop = CancellationToken::new();
    let followers = TaskTracker::new();
    cluster.spawn_follower(membership.subscribe(), &followers, stop.clone());
    handoff.spawn(&followers, stop.clone());
    anti_entropy.spawn(&followers, stop.clone());
    transfer.clone().spawn(&followers, stop.clone());
    spawn_cache_reporter(
        replica.cache().clone(),
        membership.publisher(),
        &followers,
        stop.clone(),
    );
    spawn_status_publisher(
        &cluster,
        &transfer,
        membership.publisher(),
        &followers,
        stop.clone(),
    );
    let front = front.start(&peers, &membership).await;
    info!(
        node = %config.id,
        listen = %config.listen,
        advertise = %config.advertise(),
        zone = %config.zone,
        incarnation = format!("{incarnation:016x}"),
        "kvnode ready"
    );

    wait_for_signal().await;
    info!("shutting down: finishing in-flight requests");
    front.stop_accepting();
    endpoint.stop_accepting();
    endpoint.drain(DRAIN_DEADLINE).await;
    front.drain(DRAIN_DEADLINE).await;
    background.close();
    if tokio::time::timeout(DRAIN_DEADLINE, background.wait())
        .await
        .is_err()
    {
        warn!("background replication still running at shutdown; anti-entropy will finish it");
    }
    stop.cancel();
    followers.close();
    followers.wait().await;
    membership.shutdown().await;
    endpoint.close().await;
    tokio::task::spawn_blocking(move || storage.flush())
        .await?
        .context("final flush failed")?;
    info!("stopped");
    Ok(())
}

/// Publishes this node's status in gossip whenever it changes.
fn spawn_status_publisher(
    cluster: &Arc<Cluster>,
    transfer: &Arc<Transfer>,
    publisher: Publisher,
    tasks: &TaskTracker,
    stop: CancellationToken,
) {
    let mut status = cluster.subscribe_status();
    let mut progress = transfer.subscribe_progress();
    let mut removed = cluster.subscribe_removed();
    tasks.spawn(async move {
        loop {
            let now = *status.borrow_and_update();
            publisher.set_status(now).await;
            let text = progress.borrow_and_update().clone();
            publisher.publish(crate::transfer::GOSSIP_KEY, &text).await;
            let gone = removed.borrow_and_update().clone();
            for id in gone {
                publisher
                    .publish(&format!("{}{id}", crate::cluster::REMOVED_PREFIX), "1")
                    .await;
            }
            tokio::select! {
                _ = stop.cancelled() => break,
                changed = status.changed() => if changed.is_err() { break },
                changed = progress.changed() => if changed.is_err() { break },
                changed = removed.changed() => if changed.is_err() { break },
            }
        }
    });
}

/// Publishes the read cache's hit ratio and hot keys in gossip every
/// second (SPEC item 2: the router's cache-heat dimension reads them).
fn spawn_cache_reporter(
    cache: Arc<ReadCache>,
    publisher: Publisher,
    tasks: &TaskTracker,
    stop: CancellationToken,
) {
    tasks.spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        loop {
            tokio::select! {
                _ = stop.cancelled() => break,
                _ = tick.tick() => {}
            }
            let stats = cache.stats();
            publisher
                .publish(CACHE_HIT_RATIO_KEY, &format!("{:.3}", stats.hit_ratio()))
                .await;
            let hot: Vec<String> = cache
                .hot_keys(16)
                .iter()
                .map(|(hash, _)| format!("{hash:016x}"))
                .collect();
            publisher.publish(HOT_KEYS_KEY, &hot.join(",")).await;
        }
    });
}

/// Gossip key of this node's incarnation (hex): clocks of other nodes
/// treat its older incarnations as retired actors.
pub const INCARNATION_KEY: &str = "incarnation";

/// Gossip key of the read cache's hit ratio (0.000..1.000).
pub const CACHE_HIT_RATIO_KEY: &str = "cache_hit_ratio";

/// Gossip key of the 16 most read key hashes (hex, comma separated).
pub const HOT_KEYS_KEY: &str = "hot_keys";

/// This node's status at startup: the one it had (a restart resumes a join
/// or a drain), else JOINING with `--join`, else UP (a new cluster).
fn initial_status(storage: &dyn Storage, join: bool) -> anyhow::Result<NodeStatus> {
    if let Some(bytes) = storage.get_meta(STATUS_META)? {
        let text = String::from_utf8_lossy(&bytes);
        return text
            .parse::<NodeStatus>()
            .map_err(|e| anyhow::anyhow!("the stored status {text:?} is unreadable: {e}"));
    }
    let status = if join {
        NodeStatus::Joining
    } else {
        NodeStatus::Up
    };
    storage.put_meta(STATUS_META, status.as_str().as_bytes())?;
    Ok(status)
}

/// The incarnation of this data directory: created (random, durable) the
/// first time, so a node that lost its data gets a new clock actor.
fn incarnation(storage: &dyn Storage) -> anyhow::Result<u64> {
    if let Some(bytes) = storage.get_meta(INCARNATION_META)? {
        let raw: [u8; 8] = bytes.as_slice().try_into().map_err(|_| {
            anyhow::anyhow!("the stored incarnation is {} bytes, not 8", bytes.len())
        })?;
        return Ok(u64::from_be_bytes(raw));
    }
    let fresh: u64 = rand::random();
    storage.put_meta(INCARNATION_META, &fresh.to_be_bytes())?;
    info!(
        incarnation = format!("{fresh:016x}"),
        "new data directory: new incarnation"
    );
    Ok(fresh)
}

async fn wait_for_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = match signal(SignalKind::terminate()) {
        Ok(s) => s,
        Err(e) => {
            warn!(error = %e, "cannot listen for SIGTERM; only Ctrl-C stops the node");
            let _ = tokio::signal::ctrl_c().await;
            return;
        }
    };
    tokio::select! {
        _ = term.recv() => {}
        _ = tokio::signal::ctrl_c() => {}
    }
}
