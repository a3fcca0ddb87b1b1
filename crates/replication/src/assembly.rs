//! One node's replication core, put together from its parts: what the
//! `kvnode` binary runs, and what tests and the simulation build several
//! of in one process.

use std::sync::Arc;
use std::time::Duration;

use kv_router::{Ring, RouterSettings};
use kv_storage::{ReadCache, Storage};
use kv_types::{Actor, Member, NodeStatus};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::warn;

use crate::antientropy::AntiEntropy;
use crate::cluster::{RING_META, STATUS_META};
use crate::datadir;
use crate::handoff::{Handoff, HandoffStats};
use crate::membership::{Announcement, Membership};
use crate::network::Network;
use crate::offload::offload;
use crate::plan::{self, Plan};
use crate::replica::{DotFloor, Replica, ReplicaParts};
use crate::scrub::Scrub;
use crate::strays::Strays;
use crate::transfer::Transfer;
use crate::{
    Clock, Cluster, Coordinator, Error, PeerService, Peers, Reporter, Result, Rng, Scoring,
    Settings,
};

/// What a node's core is built from.
pub struct CoreParts {
    /// This node: id, zone, host, weight (its status comes from storage,
    /// or from `join` the first time).
    pub me: Member,
    /// Start as JOINING when the data directory is new (else UP: a new
    /// cluster). A restart resumes the status it had.
    pub join: bool,
    /// The storage engine.
    pub storage: Arc<dyn Storage>,
    /// The read cache in front of it.
    pub cache: Arc<ReadCache>,
    /// Replica calls to other nodes.
    pub network: Arc<dyn Network>,
    /// The membership view and announcements.
    pub membership: Arc<dyn Membership>,
    /// The node's clock.
    pub clock: Arc<Clock>,
    /// The node's randomness.
    pub rng: Arc<Rng>,
    /// Tunables.
    pub settings: Settings,
    /// The router's settings.
    pub router: RouterSettings,
    /// The cluster's id (`cluster_id`), recorded in the data directory
    /// with this node's id: a directory of another node or cluster is
    /// refused.
    pub cluster_id: String,
    /// Rebuild: take a new incarnation even though the data directory's
    /// incarnation or identity record is missing or damaged, and refill
    /// from the replicas (see `datadir`). Never overrides a directory of
    /// another node or cluster.
    pub rebuild: bool,
}

/// One node's replication core.
pub struct Core {
    cluster: Arc<Cluster>,
    replica: Arc<Replica>,
    peers: Arc<Peers>,
    scoring: Arc<Scoring>,
    coordinator: Arc<Coordinator>,
    service: Arc<PeerService>,
    handoff: Arc<Handoff>,
    transfer: Arc<Transfer>,
    anti_entropy: Arc<AntiEntropy>,
    scrub: Arc<Scrub>,
    reporter: Arc<Reporter>,
    /// Work that outlives a request (copies beyond W, read repair).
    background: TaskTracker,
}

impl Core {
    /// Opens the core on its storage: the data directory's identity and
    /// incarnation (created the first time, so a node that lost its data
    /// gets a new clock actor; checked afterwards, see `datadir`), its
    /// status, its persisted ring (an unreadable one is logged and
    /// ignored: gossip teaches the ring again) and its dot lease.
    ///
    /// # Errors
    /// [`Error::DataDir`] for a data directory of another node or cluster,
    /// or one holding data without a readable incarnation or identity
    /// (unless `rebuild`); a storage failure reading or writing that
    /// metadata; an unreadable stored status; invalid scorer settings.
    pub async fn open(parts: CoreParts) -> Result<Core> {
        let CoreParts {
            mut me,
            join,
            storage,
            cache,
            network,
            membership,
            clock,
            rng,
            settings,
            router,
            cluster_id,
            rebuild,
        } = parts;
        let id = me.id.clone();
        let (store, node) = (storage.clone(), id.clone());
        let fresh = rng.next_u64();
        let (incarnation, status, persisted, floor) = offload(move || {
            let failed = |e| Error::from_storage(&node, e);
            let incarnation = datadir::open(store.as_ref(), &node, &cluster_id, rebuild, fresh)
                .map_err(failed)??;
            let status = initial_status(store.as_ref(), join).map_err(failed)??;
            let persisted = persisted_ring(store.as_ref());
            let floor = DotFloor::load(store.as_ref()).map_err(failed)?;
            Ok::<_, Error>((incarnation, status, persisted, floor))
        })
        .await??;
        me.status = status;
        let cluster = Arc::new(Cluster::new(
            me,
            settings.ring,
            storage.clone(),
            membership.clone(),
            clock.clone(),
            persisted,
        )?);
        let stats = Arc::new(HandoffStats::default());
        let replica = Arc::new(Replica::new(ReplicaParts {
            storage,
            actor: Actor {
                node: id.clone(),
                incarnation,
            },
            max_siblings: settings.max_siblings,
            max_hints: settings.handoff.max_hints,
            handoff: stats.clone(),
            cache,
            floor: Arc::new(floor),
            clock: clock.clone(),
            rng: rng.clone(),
            membership: membership.clone(),
        }));
        let scoring = Arc::new(Scoring::new(
            router,
            id,
            cluster.me().zone.clone(),
            clock.clone(),
            rng.clone(),
        )?);
        let peers = Arc::new(Peers::new(
            cluster.clone(),
            replica.clone(),
            network,
            scoring.clone(),
            rng,
        ));
        let background = TaskTracker::new();
        let coordinator = Arc::new(Coordinator::new(
            cluster.clone(),
            peers.clone(),
            scoring.clone(),
            settings.quorums.clone(),
            background.clone(),
            settings.transfer.back_fills_per_sec,
        ));
        let strays = Arc::new(Strays::default());
        let transfer = Arc::new(Transfer::new(
            cluster.clone(),
            peers.clone(),
            replica.clone(),
            settings.transfer.clone(),
        ));
        let service = Arc::new(PeerService::new(
            cluster.clone(),
            replica.clone(),
            transfer.clone(),
            strays.clone(),
            settings.max_peer_requests,
        ));
        let handoff = Arc::new(Handoff::new(
            cluster.clone(),
            peers.clone(),
            replica.clone(),
            settings.handoff.clone(),
            stats,
            strays,
        ));
        let anti_entropy = Arc::new(AntiEntropy::new(
            cluster.clone(),
            peers.clone(),
            replica.clone(),
            settings.anti_entropy.clone(),
        ));
        let scrub = Arc::new(Scrub::new(
            cluster.clone(),
            peers.clone(),
            replica.clone(),
            settings.scrub.clone(),
        ));
        membership
            .announce(Announcement::Incarnation(incarnation))
            .await;
        let reporter = Arc::new(Reporter {
            cluster: cluster.clone(),
            replica: replica.clone(),
            service: service.clone(),
            handoff: handoff.clone(),
            anti_entropy: anti_entropy.clone(),
            scoring: scoring.clone(),
            cpu: std::sync::atomic::AtomicU64::new(0),
            hits: std::sync::Mutex::new(crate::report::HitWindow::default()),
        });
        scoring.set_own_report(reporter.report());
        Ok(Core {
            cluster,
            replica,
            peers,
            scoring,
            coordinator,
            service,
            handoff,
            transfer,
            anti_entropy,
            scrub,
            reporter,
            background,
        })
    }

    /// Starts the background services (membership follower, hinted
    /// handoff, anti-entropy, the scrub, transfer, the load reporter) on `tasks`,
    /// until `stop`.
    pub fn spawn(&self, tasks: &TaskTracker, stop: &CancellationToken) {
        self.cluster.spawn_follower(tasks, stop.clone());
        self.handoff.clone().spawn(tasks, stop.clone());
        self.anti_entropy.clone().spawn(tasks, stop.clone());
        self.scrub.clone().spawn(tasks, stop.clone());
        self.transfer.clone().spawn(tasks, stop.clone());
        self.reporter.clone().spawn(tasks, stop.clone());
    }

    /// The load reporter (the node sets its CPU figure).
    pub fn reporter(&self) -> &Arc<Reporter> {
        &self.reporter
    }

    /// Waits (at most `deadline`) for the copies and repairs still in
    /// flight; false when some were still running.
    pub async fn finish_background(&self, deadline: Duration) -> bool {
        self.background.close();
        tokio::time::timeout(deadline, self.background.wait())
            .await
            .is_ok()
    }

    /// The current incarnation of this node's clock actor: drawn when its
    /// data directory was created, and again whenever its replica repaired
    /// a damaged record (see [`Replica::retire_actor`]).
    pub fn incarnation(&self) -> u64 {
        self.replica.actor().incarnation
    }

    /// Membership, status and placement.
    pub fn cluster(&self) -> &Arc<Cluster> {
        &self.cluster
    }

    /// This node's replica (local reads, the read cache, storage).
    pub fn replica(&self) -> &Arc<Replica> {
        &self.replica
    }

    /// Calls to replicas.
    pub fn peers(&self) -> &Arc<Peers> {
        &self.peers
    }

    /// The scorer.
    pub fn scoring(&self) -> &Arc<Scoring> {
        &self.scoring
    }

    /// The coordinator of client requests.
    pub fn coordinator(&self) -> &Arc<Coordinator> {
        &self.coordinator
    }

    /// The receiving side of replica calls.
    pub fn service(&self) -> &Arc<PeerService> {
        &self.service
    }

    /// Hinted handoff.
    pub fn handoff(&self) -> &Arc<Handoff> {
        &self.handoff
    }

    /// Partition streaming.
    pub fn transfer(&self) -> &Arc<Transfer> {
        &self.transfer
    }

    /// Anti-entropy.
    pub fn anti_entropy(&self) -> &Arc<AntiEntropy> {
        &self.anti_entropy
    }

    /// The background scrub of stored records.
    pub fn scrub(&self) -> &Arc<Scrub> {
        &self.scrub
    }

    /// Starts draining this node (or, with `dry_run`, only plans it), and
    /// answers the plan.
    ///
    /// # Errors
    /// A refusal when this node is neither UP nor already draining; a
    /// storage failure persisting the new status.
    pub async fn drain(&self, dry_run: bool) -> Result<Plan> {
        let status = self.cluster.status();
        if !dry_run && status != NodeStatus::Up && status != NodeStatus::Draining {
            return Err(Error::invalid(format!(
                "{} is {status}: only an UP node can be drained",
                self.cluster.id()
            )));
        }
        let plan = plan::drain(&self.cluster, &self.peers, !dry_run).await?;
        if !dry_run && status == NodeStatus::Up {
            self.cluster.set_status(NodeStatus::Draining).await?;
        }
        Ok(plan)
    }

    /// What a node joining in `zone` with `weight` would move.
    ///
    /// # Errors
    /// When no ring can be built with the hypothetical node.
    pub async fn plan_join(&self, zone: &str, weight: u32) -> Result<Plan> {
        plan::join(&self.cluster, &self.peers, zone, weight).await
    }
}

/// This node's status at startup: the one it had (a restart resumes a join
/// or a drain), else JOINING with `join`, else UP (a new cluster). The
/// outer error is storage's, the inner one an unreadable record.
fn initial_status(storage: &dyn Storage, join: bool) -> kv_storage::Result<Result<NodeStatus>> {
    if let Some(bytes) = storage.get_meta(STATUS_META)? {
        let text = String::from_utf8_lossy(&bytes);
        return Ok(text.parse::<NodeStatus>().map_err(|e| {
            Error::invalid(format!("the stored status {text:?} is unreadable: {e}"))
        }));
    }
    let status = if join {
        NodeStatus::Joining
    } else {
        NodeStatus::Up
    };
    storage.put_meta(STATUS_META, status.as_str().as_bytes())?;
    Ok(Ok(status))
}

/// The ring this node last persisted, if it is readable.
fn persisted_ring(storage: &dyn Storage) -> Option<Ring> {
    match storage.get_meta(RING_META) {
        Ok(Some(bytes)) => match Ring::from_bytes(&bytes) {
            Ok(ring) => Some(ring),
            Err(e) => {
                warn!(error = %e, "ignoring the persisted ring");
                None
            }
        },
        Ok(None) => None,
        Err(e) => {
            warn!(error = %e, "ignoring the unreadable persisted ring");
            None
        }
    }
}
