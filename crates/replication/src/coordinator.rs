//! Every node is a coordinator: it turns a client's GET, PUT or DELETE into
//! calls to the key's N replicas and answers once R (or W) of them did.
//!
//! - [`get`]: ask the best R replicas (more when one fails), merge causally,
//!   read-repair stale replicas in the background.
//! - [`put`]: one replica applies the write under its own actor (a fresh
//!   dot: only a replica holding the key's clock may issue one), then the
//!   result is replicated to the others ([`copies`]); success after W
//!   durable copies.
//!
//! Outcomes are honest: fewer than W copies is never success.
//! [`Error::Unavailable`] is answered only when no replica stored anything;
//! otherwise a shortfall is [`Error::Indeterminate`].

mod copies;
mod get;
mod put;

pub use put::{ClientWrite, WriteMode};

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use kv_router::Op;
use kv_types::{NodeId, Object, key_hash};
use tokio_util::task::TaskTracker;

use crate::rate::TokenBucket;
use crate::scoring::DecisionRecord;
use crate::{Cluster, Error, Peers, Quorums, Result, Scoring};

/// How long after startup a request waits for the membership to show enough
/// live replicas (gossip needs a few rounds to find the peers).
const STARTUP_GRACE: Duration = Duration::from_secs(15);

/// The longest one request waits for that.
const STARTUP_WAIT: Duration = Duration::from_secs(3);

/// The result of a quorum read.
#[derive(Clone, Debug, PartialEq)]
pub struct Read {
    /// The causal merge of what the replicas answered: every sibling, with
    /// its tombstones and write times.
    pub object: Object,
    /// The opaque causal context covering everything read (pass it to the
    /// next write of the key).
    pub context: Vec<u8>,
}

impl Read {
    /// The live values (no tombstones); empty when deleted or absent.
    pub fn values(&self) -> Vec<Vec<u8>> {
        self.object.live_values().map(<[u8]>::to_vec).collect()
    }

    /// Whether the key is absent or deleted ("not found").
    pub fn is_deleted(&self) -> bool {
        self.object.is_deleted()
    }
}

/// The result of a quorum write.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Written {
    /// The opaque causal context of the new version.
    pub context: Vec<u8>,
}

/// How this node would route a request for a key, with the router's
/// inputs and numbers.
#[derive(Clone, Debug, PartialEq)]
pub struct Explanation {
    /// xxh3 hash of the key.
    pub hash: u64,
    /// Partition of the key.
    pub partition: u32,
    /// Version of the target ring (what `kvctl status` shows).
    pub ring_version: u64,
    /// The current holders, then (while the partition moves) its pending
    /// new owners; a stable cluster lists exactly its N replicas.
    pub preference: Vec<NodeId>,
    /// The decision, with its settings, inputs and draw.
    pub record: DecisionRecord,
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
    /// The read back-fills to pending owners this coordinator may send.
    back_fills: TokenBucket,
    /// Back-fills sent and skipped (over their rate) since the start.
    back_fills_sent: AtomicU64,
    back_fills_skipped: AtomicU64,
}

impl Coordinator {
    /// A coordinator over `peers` that sends at most `back_fills_per_sec`
    /// read back-fills a second to pending owners (see [`Self::read`]).
    pub fn new(
        cluster: Arc<Cluster>,
        peers: Arc<Peers>,
        scoring: Arc<Scoring>,
        quorums: Quorums,
        background: TaskTracker,
        back_fills_per_sec: u32,
    ) -> Self {
        Coordinator {
            cluster,
            peers,
            scoring,
            quorums,
            background,
            back_fills: TokenBucket::new(back_fills_per_sec),
            back_fills_sent: AtomicU64::new(0),
            back_fills_skipped: AtomicU64::new(0),
        }
    }

    /// Read back-fills to pending owners `(sent, skipped over their rate)`
    /// since the node started.
    pub fn back_fills(&self) -> (u64, u64) {
        (
            self.back_fills_sent.load(Ordering::Relaxed),
            self.back_fills_skipped.load(Ordering::Relaxed),
        )
    }

    /// The default quorums and deadlines.
    pub fn quorums(&self) -> &Quorums {
        &self.quorums
    }

    /// How a request `op` for `key` would be routed from this node (not
    /// logged: nothing is sent).
    pub fn explain(&self, key: &[u8], op: Op) -> Explanation {
        let placement = self.cluster.placement();
        let hash = key_hash(key);
        let partition = placement.target.partition_of(hash);
        let preference = placement.replicas(partition).all();
        let r = match op {
            Op::Get => self.quorums.r,
            Op::Put => 1,
        };
        let record = self.scoring.decide(&self.cluster, &preference, op, key, r);
        Explanation {
            hash,
            partition,
            ring_version: placement.target.version(),
            preference,
            record,
        }
    }

    /// Right after this node starts, the membership has not yet told it
    /// which peers are alive: wait (at most [`STARTUP_WAIT`]) until
    /// `needed` replicas of the key look alive, instead of answering
    /// "unavailable" for a cluster that is fine. Does nothing once the node
    /// has been up for [`STARTUP_GRACE`].
    async fn await_startup_view(&self, preference: &[NodeId], needed: usize) {
        let deadline = self.cluster.clock().now() + STARTUP_WAIT;
        while self.cluster.uptime() < STARTUP_GRACE
            && self.cluster.clock().now() < deadline
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
    fn quorum(&self, requested: Option<u8>, default: usize, n: usize, name: &str) -> Result<usize> {
        let q = requested.map_or(default, usize::from);
        if q == 0 || q > n {
            return Err(Error::invalid(format!(
                "{name}={q} is not possible: this key has {n} replicas (N); use 1..={n}"
            )));
        }
        Ok(q)
    }
}

/// Comma-separated node ids ("none" for none).
fn list(ids: &[NodeId]) -> String {
    if ids.is_empty() {
        return "none".into();
    }
    ids.iter()
        .map(NodeId::as_str)
        .collect::<Vec<_>>()
        .join(", ")
}
