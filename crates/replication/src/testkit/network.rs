//! An in-memory [`Network`]: replica calls between cores in one process,
//! with faults per ordered pair of nodes.
//!
//! A call from `a` to `b` goes through the link `a -> b` (its request) and
//! `b -> a` (its answer). A link can be cut (nothing passes), delayed (each
//! message waits, plus a seeded jitter that reorders them), or lossy (each
//! message is dropped with a probability, drawn from the network's seeded
//! [`Rng`]). A paused node neither receives nor sends until it is resumed
//! (its calls wait); a crashed node refuses connections; a crashed node's
//! leftover tasks send nothing (an endpoint of an earlier life of a node is
//! refused). As with QUIC, a call whose request or answer is lost ends as
//! [`CallError::Unknown`] (the caller cannot tell whether it executed; it
//! ends when the loss is drawn, not at its deadline); a call to a crashed
//! or unknown node fails at once as [`CallError::NotSent`].
//!
//! `NotSent` is a promise the coordinator acts on (it has the next replica
//! coordinate the write instead): it is answered only for a call that
//! never reached the receiver's service, never for one whose answer was
//! lost after the receiver crashed (simulation seed 1674: such a write was
//! coordinated a second time, so one write had two dots).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use futures::future::BoxFuture;
use kv_types::{NodeId, Object};
use tokio::sync::Notify;

use crate::network::{
    CallError, Coordinate, Envelope, HintCopy, Network, ReplaceIf, Reply, ScanPage, ScanRequest,
    TransferStatus,
};
use crate::{PeerService, Result, Rng};

/// Faults of one direction between two nodes.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Link {
    /// Nothing passes.
    pub cut: bool,
    /// Every message waits this long.
    pub delay: Duration,
    /// Every message is dropped with this probability (0.0..=1.0).
    pub loss: f64,
    /// Every message waits a further uniform draw from `0..jitter` (from
    /// the network's seeded [`Rng`]), so messages overtake each other.
    pub jitter: Duration,
}

/// The shared in-memory network of a test cluster.
#[derive(Clone)]
pub struct MemoryNetwork {
    inner: Arc<Inner>,
}

struct Inner {
    /// Each running node's receiving side. Held weakly: its node owns it,
    /// and every node's core holds an endpoint of this network (through
    /// its `Peers`), so a strong reference here would be a cycle
    /// (network -> service -> transfer -> peers -> endpoint -> network)
    /// that keeps every core of a dropped cluster alive.
    services: Mutex<BTreeMap<NodeId, Weak<PeerService>>>,
    /// The life of each node's current endpoint: calls from an endpoint of
    /// an earlier life (a crashed core's leftover tasks) are refused.
    lives: Mutex<BTreeMap<NodeId, u64>>,
    links: Mutex<BTreeMap<(NodeId, NodeId), Link>>,
    /// The faults of every link without faults of its own (the
    /// simulation's base latency); [`MemoryNetwork::heal`] keeps it.
    default_link: Mutex<Link>,
    crashed: Mutex<BTreeSet<NodeId>>,
    /// Paused nodes.
    paused: Mutex<BTreeSet<NodeId>>,
    /// Woken at every resume, so waiting calls look again. A `Notify`
    /// wakes its waiters in a fixed order; a `watch` channel would not
    /// (it spreads waiters over shards drawn at random), and the
    /// simulation must replay a seed exactly.
    resumed: Notify,
    rng: Rng,
    /// Calls delivered to a replica (executed or executing).
    delivered: AtomicU64,
}

impl MemoryNetwork {
    /// An empty network whose losses draw from `seed`.
    pub fn new(seed: u64) -> Self {
        MemoryNetwork {
            inner: Arc::new(Inner {
                services: Mutex::new(BTreeMap::new()),
                lives: Mutex::new(BTreeMap::new()),
                links: Mutex::new(BTreeMap::new()),
                default_link: Mutex::new(Link::default()),
                crashed: Mutex::new(BTreeSet::new()),
                paused: Mutex::new(BTreeSet::new()),
                resumed: Notify::new(),
                rng: Rng::seeded(seed),
                delivered: AtomicU64::new(0),
            }),
        }
    }

    /// Makes `id` reachable, served by `service` (again, after a crash).
    /// The network does not keep `service` alive: the caller owns it (a
    /// service that is dropped refuses connections, as a stopped node).
    pub fn register(&self, id: &NodeId, service: &Arc<PeerService>) {
        lock(&self.inner.services).insert(id.clone(), Arc::downgrade(service));
        lock(&self.inner.crashed).remove(id);
    }

    /// The network as node `from` uses it; endpoints handed out earlier
    /// for `from` (a previous life of the node) stop carrying calls.
    pub fn endpoint(&self, from: &NodeId) -> Arc<dyn Network> {
        let mut lives = lock(&self.inner.lives);
        let life = lives.entry(from.clone()).or_default();
        *life += 1;
        Arc::new(Endpoint {
            net: self.clone(),
            from: from.clone(),
            life: *life,
        })
    }

    /// Whether `life` is the current life of `id`, and `id` is not crashed.
    fn sender_alive(&self, id: &NodeId, life: u64) -> bool {
        lock(&self.inner.lives).get(id) == Some(&life) && !lock(&self.inner.crashed).contains(id)
    }

    /// Whether `id` is registered and its service still lives.
    fn serves(&self, id: &NodeId) -> bool {
        lock(&self.inner.services)
            .get(id)
            .is_some_and(|s| s.strong_count() > 0)
    }

    /// Sets the faults of the link `from -> to`.
    pub fn set_link(&self, from: &NodeId, to: &NodeId, link: Link) {
        lock(&self.inner.links).insert((from.clone(), to.clone()), link);
    }

    /// Sets what every link without faults of its own does (a base
    /// latency, for example), now and after every [`Self::heal`].
    pub fn set_default_link(&self, link: Link) {
        *lock(&self.inner.default_link) = link;
    }

    /// Cuts both directions between `a` and `b`.
    pub fn cut(&self, a: &NodeId, b: &NodeId) {
        for (x, y) in [(a, b), (b, a)] {
            self.update_link(x, y, |l| l.cut = true);
        }
    }

    /// Cuts every link between the two groups (both directions).
    pub fn partition(&self, left: &[NodeId], right: &[NodeId]) {
        for a in left {
            for b in right {
                self.cut(a, b);
            }
        }
    }

    /// Removes every fault of every link (the default link stays).
    pub fn heal(&self) {
        lock(&self.inner.links).clear();
    }

    fn update_link(&self, from: &NodeId, to: &NodeId, f: impl FnOnce(&mut Link)) {
        let default = *lock(&self.inner.default_link);
        let mut links = lock(&self.inner.links);
        f(links.entry((from.clone(), to.clone())).or_insert(default));
    }

    fn link(&self, from: &NodeId, to: &NodeId) -> Link {
        let found = lock(&self.inner.links)
            .get(&(from.clone(), to.clone()))
            .copied();
        found.unwrap_or_else(|| *lock(&self.inner.default_link))
    }

    /// Freezes `id`: calls to and from it wait until [`Self::resume`].
    pub fn pause(&self, id: &NodeId) {
        lock(&self.inner.paused).insert(id.clone());
    }

    /// Unfreezes `id`.
    pub fn resume(&self, id: &NodeId) {
        lock(&self.inner.paused).remove(id);
        self.inner.resumed.notify_waiters();
    }

    /// Crashes `id`: calls to it are refused until it is registered again.
    pub fn crash(&self, id: &NodeId) {
        lock(&self.inner.crashed).insert(id.clone());
        lock(&self.inner.services).remove(id);
    }

    /// Calls delivered to a replica so far.
    pub fn delivered(&self) -> u64 {
        self.inner.delivered.load(Ordering::Relaxed)
    }

    /// Waits until neither `a` nor `b` is paused.
    async fn unpaused(&self, a: &NodeId, b: &NodeId) {
        loop {
            let resumed = self.inner.resumed.notified();
            tokio::pin!(resumed);
            resumed.as_mut().enable();
            {
                let paused = lock(&self.inner.paused);
                if !paused.contains(a) && !paused.contains(b) {
                    return;
                }
            }
            resumed.await;
        }
    }

    /// One message over `from -> to`: false when it is lost.
    async fn carry(&self, from: &NodeId, to: &NodeId) -> bool {
        let link = self.link(from, to);
        if link.cut {
            return false;
        }
        let mut wait = link.delay;
        if !link.jitter.is_zero() {
            let nanos = u64::try_from(link.jitter.as_nanos())
                .unwrap_or(u64::MAX)
                .max(1);
            wait += Duration::from_nanos(self.inner.rng.next_u64() % nanos);
        }
        if !wait.is_zero() {
            tokio::time::sleep(wait).await;
        }
        if link.loss > 0.0 {
            let draw = (self.inner.rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
            if draw < link.loss {
                return false;
            }
        }
        self.unpaused(from, to).await;
        true
    }

    /// Delivers one call from `from` to `to`, running `serve` on the
    /// receiver's service, within the envelope's deadline.
    async fn deliver<T: Send + 'static>(
        &self,
        (from, life): (&NodeId, u64),
        to: &NodeId,
        envelope: Envelope,
        serve: impl FnOnce(Arc<PeerService>) -> BoxFuture<'static, Result<T>> + Send,
    ) -> std::result::Result<Reply<T>, CallError> {
        let refused = || CallError::NotSent {
            node: to.clone(),
            reason: "connection refused (the node is down)".into(),
        };
        if lock(&self.inner.crashed).contains(to) {
            return Err(refused());
        }
        if !self.sender_alive(from, life) {
            return Err(CallError::NotSent {
                node: to.clone(),
                reason: "the sending node crashed".into(),
            });
        }
        // Set once the request reached the receiver's service: from then
        // on the call may have executed, whatever happens to the receiver.
        let reached = AtomicBool::new(false);
        let exchange = async {
            if !self.carry(from, to).await || !self.sender_alive(from, life) {
                return None;
            }
            // Looked up on arrival: a node that crashed meanwhile is gone.
            let service = lock(&self.inner.services).get(to)?.upgrade()?;
            reached.store(true, Ordering::Relaxed);
            self.inner.delivered.fetch_add(1, Ordering::Relaxed);
            let ring_version = service.ring_version();
            let answer = serve(service.clone()).await;
            let feedback = service.feedback();
            if !self.carry(to, from).await || !self.sender_alive(from, life) {
                return None;
            }
            Some((answer, ring_version, feedback))
        };
        match tokio::time::timeout(envelope.timeout, exchange).await {
            Ok(Some((Ok(value), ring_version, feedback))) => Ok(Reply {
                value,
                ring_version,
                feedback: Some(feedback),
            }),
            Ok(Some((Err(e), _, _))) => Err(CallError::Replica(e)),
            // Lost on the way to a node that is down now: it never ran.
            Ok(None) if !reached.load(Ordering::Relaxed) && !self.serves(to) => Err(refused()),
            // Otherwise it may have run (an answer lost after the receiver
            // crashed included).
            Ok(None) | Err(_) => Err(CallError::Unknown {
                node: to.clone(),
                reason: format!("no answer within {} ms", envelope.timeout.as_millis()),
            }),
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The network as one node uses it.
struct Endpoint {
    net: MemoryNetwork,
    from: NodeId,
    /// Which life of `from` this endpoint belongs to.
    life: u64,
}

type Answer<T> = std::result::Result<Reply<T>, CallError>;

#[async_trait::async_trait]
impl Network for Endpoint {
    async fn get(&self, to: &NodeId, envelope: Envelope, key: Vec<u8>) -> Answer<Option<Object>> {
        self.net
            .deliver((&self.from, self.life), to, envelope, move |s| {
                Box::pin(async move { s.get(&key).await })
            })
            .await
    }

    async fn coordinate(
        &self,
        to: &NodeId,
        envelope: Envelope,
        write: Coordinate,
    ) -> Answer<Object> {
        let id = envelope.request_id;
        self.net
            .deliver((&self.from, self.life), to, envelope, move |s| {
                Box::pin(async move { s.coordinate(id, write).await })
            })
            .await
    }

    async fn replicate(
        &self,
        to: &NodeId,
        envelope: Envelope,
        key: Vec<u8>,
        object: Object,
    ) -> Answer<()> {
        let from = self.from.clone();
        self.net
            .deliver((&self.from, self.life), to, envelope, move |s| {
                let ring = envelope.ring_version;
                Box::pin(async move { s.replicate(&from, ring, &key, &object).await })
            })
            .await
    }

    async fn store_hint(&self, to: &NodeId, envelope: Envelope, hint: HintCopy) -> Answer<()> {
        self.net
            .deliver((&self.from, self.life), to, envelope, move |s| {
                Box::pin(async move { s.store_hint(hint).await })
            })
            .await
    }

    async fn segment_digests(
        &self,
        to: &NodeId,
        envelope: Envelope,
        first: u32,
        count: u32,
    ) -> Answer<Vec<u64>> {
        self.net
            .deliver((&self.from, self.life), to, envelope, move |s| {
                Box::pin(async move { s.segment_digests(first, count).await })
            })
            .await
    }

    async fn key_digests(
        &self,
        to: &NodeId,
        envelope: Envelope,
        from_hash: u64,
        to_hash: u64,
    ) -> Answer<Vec<(Vec<u8>, u64)>> {
        self.net
            .deliver((&self.from, self.life), to, envelope, move |s| {
                Box::pin(async move { s.key_digests(from_hash, to_hash).await })
            })
            .await
    }

    async fn scan(
        &self,
        to: &NodeId,
        envelope: Envelope,
        request: ScanRequest,
    ) -> Answer<ScanPage> {
        self.net
            .deliver((&self.from, self.life), to, envelope, move |s| {
                Box::pin(async move { s.scan(request).await })
            })
            .await
    }

    async fn partition_stats(
        &self,
        to: &NodeId,
        envelope: Envelope,
        partitions: Vec<u32>,
        q: u32,
    ) -> Answer<Vec<(u32, u64, u64)>> {
        self.net
            .deliver((&self.from, self.life), to, envelope, move |s| {
                Box::pin(async move { s.partition_stats(partitions, q).await })
            })
            .await
    }

    async fn transfer_status(&self, to: &NodeId, envelope: Envelope) -> Answer<TransferStatus> {
        self.net
            .deliver((&self.from, self.life), to, envelope, move |s| {
                Box::pin(async move { Ok(s.transfer_status()) })
            })
            .await
    }

    async fn replace_if(
        &self,
        to: &NodeId,
        envelope: Envelope,
        request: ReplaceIf,
    ) -> Answer<bool> {
        self.net
            .deliver((&self.from, self.life), to, envelope, move |s| {
                Box::pin(async move { s.replace_if(request).await })
            })
            .await
    }
}
