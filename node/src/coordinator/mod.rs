//! Every node is a coordinator: it turns a client's GET, PUT or DELETE into
//! calls to the key's N replicas and answers once R (or W) of them did.
//!
//! - [`get`]: ask the best R replicas (more when one fails), merge causally,
//!   read-repair stale replicas in the background.
//! - [`put`]: one replica applies the write under its own actor (a fresh
//!   dot: only a replica holding the key's clock may issue one), then the
//!   result is replicated to the others; success after W durable copies.
//!
//! Outcomes are honest (SPEC item 5): fewer than W copies is never success.
//! "Unavailable" is answered only when no replica stored anything;
//! otherwise a shortfall is "indeterminate".

mod get;
mod put;

#[allow(unused_imports)] // used by the RESP front door
pub use put::WriteMode;

use std::sync::Arc;
use std::time::Duration;

use kv_types::NodeId;
use kv_wire::{ErrorKind, Response, WireError};
use tokio_util::task::TaskTracker;

use crate::cluster::Cluster;
use crate::peers::Peers;
use crate::scoring::Scoring;

/// How long after startup a request waits for gossip to show enough live
/// replicas (gossip needs a few rounds to find the peers).
const STARTUP_GRACE: Duration = Duration::from_secs(15);

/// The longest one request waits for that.
const STARTUP_WAIT: Duration = Duration::from_secs(3);

/// Default quorums and deadlines of the coordinator.
#[derive(Clone, Debug)]
pub struct Quorums {
    /// Default R.
    pub r: usize,
    /// Default W.
    pub w: usize,
    /// Deadline of a whole request.
    pub request_timeout: Duration,
    /// Deadline of one replica call.
    pub replica_timeout: Duration,
}

/// The coordinator of this node.
pub struct Coordinator {
    cluster: Arc<Cluster>,
    peers: Arc<Peers>,
    scoring: Arc<Scoring>,
    quorums: Quorums,
    /// Work that outlives a request (replication beyond W, read repair);
    /// shutdown waits for it.
    background: TaskTracker,
}

impl Coordinator {
    /// A coordinator over `peers`.
    pub fn new(
        cluster: Arc<Cluster>,
        peers: Arc<Peers>,
        scoring: Arc<Scoring>,
        quorums: Quorums,
        background: TaskTracker,
    ) -> Self {
        Coordinator {
            cluster,
            peers,
            scoring,
            quorums,
            background,
        }
    }

    /// The default quorums and deadlines.
    pub fn quorums(&self) -> &Quorums {
        &self.quorums
    }

    fn error(&self, kind: ErrorKind, message: String) -> Response {
        Response::Error(WireError {
            kind,
            message,
            node: self.cluster.me().id.to_string(),
        })
    }

    /// Right after this node starts, gossip has not yet told it which peers
    /// are alive: wait (at most [`STARTUP_WAIT`]) until `needed` replicas of
    /// the key look alive, instead of answering "unavailable" for a cluster
    /// that is fine. Does nothing once the node has been up for
    /// [`STARTUP_GRACE`].
    async fn await_startup_view(&self, preference: &[NodeId], needed: usize) {
        let deadline = tokio::time::Instant::now() + STARTUP_WAIT;
        while self.cluster.uptime() < STARTUP_GRACE
            && tokio::time::Instant::now() < deadline
            && preference
                .iter()
                .filter(|id| self.cluster.is_alive(id))
                .count()
                < needed
        {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Resolves a per-request quorum override against the key's replica
    /// count.
    fn quorum(
        &self,
        requested: Option<u8>,
        default: usize,
        n: usize,
        name: &str,
    ) -> Result<usize, Response> {
        let q = requested.map_or(default, usize::from);
        if q == 0 || q > n {
            return Err(self.error(
                ErrorKind::Invalid,
                format!("{name}={q} is not possible: this key has {n} replicas (N); use 1..={n}"),
            ));
        }
        Ok(q)
    }
}

/// Milliseconds since the Unix epoch (0 if the clock is before 1970).
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}
