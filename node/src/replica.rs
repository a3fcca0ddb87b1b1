//! This node as a replica: reads, coordinated writes (a fresh dot of this
//! node's actor) and merges of other coordinators' objects, all on local
//! storage.
//!
//! Point reads and writes run on the async worker: sled answers them from
//! its page cache and log buffer (a page missing from the cache costs one
//! disk read on the worker: size `[storage] cache_capacity_bytes` to the hot
//! set), and a write waits for its group-commit flush through
//! [`kv_storage::Durable`], a future, instead of a parked thread. Measured
//! in `docs/benchmarks.md`: two thread hand-offs per request were the
//! largest cost of a GET. Scans, hints and metadata writes, which may be
//! long or fsync on the calling thread, run on the blocking pool.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use kv_storage::{ReadCache, Storage};
use kv_types::{Actor, NodeId, Object, Sibling, VersionVector};
use kv_wire::{ErrorKind, PeerRequest, Response, WireError};

/// Local replica operations.
pub struct Replica {
    storage: Arc<dyn Storage>,
    /// This node's clock actor: node id + the incarnation of its data dir.
    actor: Actor,
    /// Sibling cap per key (SPEC item 6).
    max_siblings: usize,
    /// Hints held at most; beyond, new ones are refused (SPEC item 5).
    max_hints: u64,
    /// Counts hints refused because the store was full.
    handoff: Arc<crate::handoff::HandoffStats>,
    /// Read cache: hits are answered without the blocking pool.
    cache: Arc<ReadCache>,
    /// The counter floor of this node's actor (see [`DotFloor`]).
    floor: Arc<DotFloor>,
}

/// Metadata key of the dot-counter lease.
const DOT_LEASE_META: &str = "dot_lease";

/// Counters reserved per lease write.
const DOT_LEASE: u64 = 1_000_000;

/// Merges of a transferred page run between two yields of the worker
/// ([`Replica::replicate_page`]): a few milliseconds of work at most.
const PAGE_YIELD_EVERY: usize = 64;

/// The counter floor of this node's actor (Riak's fix for kv679 leases a
/// per-vnode counter the same way): every new event of a key whose clock
/// has no current value of this actor starts above every counter the actor
/// issued before, for any key, so a purged key never gets a dot it had
/// before. Persisted as a lease: counters below the stored lease end may
/// have been issued, so a restart starts from it.
pub struct DotFloor {
    issued: AtomicU64,
    lease_end: Mutex<u64>,
}

impl DotFloor {
    /// Loads the lease of this data directory and takes a new one.
    ///
    /// # Errors
    /// When the lease cannot be read or persisted.
    pub fn load(storage: &dyn Storage) -> kv_storage::Result<Self> {
        let start = storage
            .get_meta(DOT_LEASE_META)?
            .and_then(|b| <[u8; 8]>::try_from(b.as_slice()).ok())
            .map_or(0, u64::from_be_bytes);
        let end = start + DOT_LEASE;
        storage.put_meta(DOT_LEASE_META, &end.to_be_bytes())?;
        Ok(DotFloor {
            issued: AtomicU64::new(start),
            lease_end: Mutex::new(end),
        })
    }

    /// The floor for the next event.
    fn current(&self) -> u64 {
        self.issued.load(Ordering::Acquire)
    }

    /// Notes that `counter` was issued; whether the lease must be extended
    /// now (then call [`DotFloor::record`], which writes it durably).
    fn note(&self, counter: u64) -> bool {
        self.issued.fetch_max(counter, Ordering::AcqRel);
        let end = self.lease_end.lock().unwrap_or_else(|p| p.into_inner());
        counter + DOT_LEASE / 2 >= *end
    }

    /// Records that `counter` was issued, extending the lease (durably)
    /// well before it is reached.
    fn record(&self, storage: &dyn Storage, counter: u64) -> kv_storage::Result<()> {
        self.issued.fetch_max(counter, Ordering::AcqRel);
        let mut end = self.lease_end.lock().unwrap_or_else(|p| p.into_inner());
        if counter + DOT_LEASE / 2 >= *end {
            let next = counter + DOT_LEASE;
            storage.put_meta(DOT_LEASE_META, &next.to_be_bytes())?;
            *end = next;
        }
        Ok(())
    }
}

impl Replica {
    /// A replica writing dots as `actor`.
    pub fn new(
        storage: Arc<dyn Storage>,
        actor: Actor,
        max_siblings: usize,
        max_hints: u64,
        handoff: Arc<crate::handoff::HandoffStats>,
        cache: Arc<ReadCache>,
        floor: Arc<DotFloor>,
    ) -> Self {
        Replica {
            storage,
            actor,
            max_siblings,
            max_hints,
            handoff,
            cache,
            floor,
        }
    }

    /// The read cache (its figures go to gossip and metrics).
    pub fn cache(&self) -> &Arc<ReadCache> {
        &self.cache
    }

    /// The locally stored object of `key`.
    pub async fn get(&self, key: Vec<u8>) -> Result<Option<Object>, WireError> {
        if let Some(object) = self.cache.lookup(&key) {
            return Ok(Some(object));
        }
        let stored = self
            .storage
            .get(&key)
            .map_err(|e| storage_error(self.actor.node.as_str(), e))?;
        if let Some(object) = &stored {
            self.cache.fill(&key, object);
        }
        Ok(stored)
    }

    /// Applies a client write under this node's actor and makes it durable:
    /// the result supersedes what `context` saw and keeps every concurrent
    /// version as a sibling.
    ///
    /// With `overwrite`, the write also supersedes everything stored here
    /// for the key (its own clock is added to the context).
    pub async fn coordinate(
        &self,
        key: Vec<u8>,
        data: Option<Vec<u8>>,
        context: VersionVector,
        overwrite: bool,
        written_at_ms: u64,
    ) -> Result<Object, WireError> {
        let actor = &self.actor;
        let max = self.max_siblings;
        let floor = &self.floor;
        let sibling = Sibling {
            data,
            written_at_ms,
        };
        let (written, durable) = self
            .storage
            .update_deferred(&key, &mut |stored| {
                let stored = stored.cloned().unwrap_or_default();
                let seen = if overwrite {
                    context.merge(&stored.join())
                } else {
                    context.clone()
                };
                let next = stored.update_with_floor(&seen, actor, sibling.clone(), floor.current());
                if next.sibling_count() > max {
                    return Err(kv_storage::Error::Rejected(format!(
                        "the write would leave {} siblings, over the cap of {max}: read the key and write with its context to resolve them",
                        next.sibling_count()
                    )));
                }
                Ok(next)
            })
            .map_err(|e| storage_error(self.actor.node.as_str(), e))?;
        durable
            .await
            .map_err(|e| storage_error(self.actor.node.as_str(), e))?;
        let issued = written.counter_of(&self.actor);
        if self.floor.note(issued) {
            let (storage, floor) = (self.storage.clone(), self.floor.clone());
            self.blocking(move || floor.record(storage.as_ref(), issued))
                .await?;
        }
        self.cache.observe_write(&key, &written);
        Ok(written)
    }

    /// Merges another coordinator's object into the local one, durably.
    pub async fn replicate(&self, key: Vec<u8>, object: Object) -> Result<Object, WireError> {
        let node = self.actor.node.as_str();
        let (merged, durable) = self
            .storage
            .merge_deferred(&key, &object)
            .map_err(|e| storage_error(node, e))?;
        durable.await.map_err(|e| storage_error(node, e))?;
        self.cache.observe_write(&key, &merged);
        Ok(merged)
    }

    /// Merges a page of objects (a partition transfer's scan page) and
    /// waits for them durable together: one flush, or a few, for the page
    /// instead of one per key. Yields to other tasks every
    /// [`PAGE_YIELD_EVERY`] merges, which run on the calling worker.
    ///
    /// # Errors
    /// The first merge or flush that failed; the merges before it are
    /// applied (merging is idempotent: pulling the page again is safe).
    pub async fn replicate_page(&self, objects: Vec<(Vec<u8>, Object)>) -> Result<(), WireError> {
        let node = self.actor.node.as_str();
        let mut pending = Vec::with_capacity(objects.len());
        for (i, (key, object)) in objects.into_iter().enumerate() {
            if i > 0 && i % PAGE_YIELD_EVERY == 0 {
                tokio::task::yield_now().await;
            }
            let (merged, durable) = self
                .storage
                .merge_deferred(&key, &object)
                .map_err(|e| storage_error(node, e))?;
            pending.push((key, merged, durable));
        }
        for (key, merged, durable) in pending {
            durable.await.map_err(|e| storage_error(node, e))?;
            self.cache.observe_write(&key, &merged);
        }
        Ok(())
    }

    /// Holds `object` for `owner` (a replica that is down), durably, as a
    /// hint made at `created_at_ms` (ms since the Unix epoch; a time after
    /// this node's now counts as now, so a sender's clock cannot extend a
    /// hint's life).
    pub async fn store_hint(
        &self,
        owner: NodeId,
        key: Vec<u8>,
        object: Object,
        created_at_ms: u64,
    ) -> Result<(), WireError> {
        if self.storage.hint_count() >= self.max_hints {
            self.handoff
                .dropped
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            tracing::warn!(%owner, max = self.max_hints, "hint store full: hint refused");
            return Err(WireError {
                kind: ErrorKind::Overloaded,
                message: format!(
                    "this node already holds {} hints (the maximum); the coordinator tries another fallback",
                    self.max_hints
                ),
                node: self.actor.node.to_string(),
            });
        }
        let storage = self.storage.clone();
        let created = created_at_ms.min(crate::coordinator::now_ms());
        self.blocking(move || storage.put_hint(&owner, &key, &object, created))
            .await
    }

    /// The anti-entropy digests of `count` segments from `first`.
    pub async fn segment_digests(&self, first: u32, count: u32) -> Result<Vec<u64>, WireError> {
        let storage = self.storage.clone();
        self.blocking(move || Ok(storage.segment_digests(first, count)))
            .await
    }

    /// Every key with its digest in a hash range.
    pub async fn key_digests(&self, from: u64, to: u64) -> Result<Vec<(Vec<u8>, u64)>, WireError> {
        let storage = self.storage.clone();
        self.blocking(move || storage.key_digests(from, to)).await
    }

    /// Up to `limit` objects of a hash range in hash order, after `after`;
    /// and whether more follow. Corrupt records are skipped (logged by
    /// storage; anti-entropy repairs them).
    pub async fn scan(
        &self,
        from: u64,
        to: u64,
        after: Option<Vec<u8>>,
        limit: u32,
    ) -> Result<(Vec<(Vec<u8>, Object)>, bool), WireError> {
        let storage = self.storage.clone();
        self.blocking(move || {
            // Resume strictly after (hash, key) of the last key sent.
            let resume = after.map(|k| (kv_types::key_hash(&k), k));
            let start = resume.as_ref().map_or(from, |(h, _)| *h);
            let mut out = Vec::new();
            let mut more = false;
            for item in storage.scan(start, to) {
                let Ok((key, object)) = item else { continue };
                if let Some((h, k)) = &resume {
                    let here = (kv_types::key_hash(&key), key.as_slice());
                    if here <= (*h, k.as_slice()) {
                        continue;
                    }
                }
                if out.len() == limit as usize {
                    more = true;
                    break;
                }
                out.push((key, object));
            }
            Ok((out, more))
        })
        .await
    }

    /// Keys and encoded bytes stored per partition (a full scan of each).
    pub async fn partition_stats(
        &self,
        partitions: Vec<u32>,
        q: u32,
    ) -> Result<Vec<(u32, u64, u64)>, WireError> {
        let storage = self.storage.clone();
        self.blocking(move || {
            let shift = 64 - q.trailing_zeros();
            let mut out = Vec::with_capacity(partitions.len());
            for p in partitions {
                let first = u64::from(p) << shift;
                let last = first | (u64::MAX >> (64 - shift));
                let (mut keys, mut bytes) = (0u64, 0u64);
                for (key, object) in storage.scan(first, last).flatten() {
                    keys += 1;
                    let size = kv_types::codec::encode(&object).map_or(0, |b| b.len());
                    bytes += (key.len() + size) as u64;
                }
                out.push((p, keys, bytes));
            }
            Ok(out)
        })
        .await
    }

    /// Replaces the stored object of `key` with `replacement` (`None`
    /// deletes the record) only if it still equals `expected`; durable.
    /// Returns whether it was replaced.
    pub async fn replace_if(
        &self,
        key: Vec<u8>,
        expected: Object,
        replacement: Option<Object>,
    ) -> Result<bool, WireError> {
        self.cache.invalidate(&key);
        let storage = self.storage.clone();
        self.blocking(move || match replacement {
            None => storage.remove_if(&key, &expected),
            Some(replacement) => {
                let outcome = storage.update(&key, &mut |stored| {
                    if stored == Some(&expected) {
                        Ok(replacement.clone())
                    } else {
                        Err(kv_storage::Error::Rejected(
                            "changed since it was read".into(),
                        ))
                    }
                });
                match outcome {
                    Ok(_) => Ok(true),
                    Err(kv_storage::Error::Rejected(_)) => Ok(false),
                    Err(e) => Err(e),
                }
            }
        })
        .await
    }

    /// Serves a peer request.
    pub async fn handle(&self, request: PeerRequest) -> Response {
        let result = match request {
            PeerRequest::ReplicaGet { key } => self.get(key).await.map(Response::Object),
            PeerRequest::Coordinate {
                key,
                data,
                context,
                overwrite,
                written_at_ms,
            } => self
                .coordinate(key, data, context, overwrite, written_at_ms)
                .await
                .map(|o| Response::Object(Some(o))),
            PeerRequest::Replicate { key, object } => {
                self.replicate(key, object).await.map(|_| Response::Ack)
            }
            PeerRequest::StoreHint {
                owner,
                key,
                object,
                created_at_ms,
            } => match NodeId::new(owner) {
                Ok(owner) => self
                    .store_hint(owner, key, object, created_at_ms)
                    .await
                    .map(|()| Response::Ack),
                Err(e) => Err(WireError {
                    kind: ErrorKind::Invalid,
                    message: e.to_string(),
                    node: self.actor.node.to_string(),
                }),
            },
            PeerRequest::SegmentDigests { first, count } => self
                .segment_digests(first, count)
                .await
                .map(Response::Digests),
            PeerRequest::KeyDigests { from_hash, to_hash } => self
                .key_digests(from_hash, to_hash)
                .await
                .map(Response::KeyDigests),
            PeerRequest::Scan {
                from_hash,
                to_hash,
                after,
                limit,
            } => self
                .scan(from_hash, to_hash, after, limit)
                .await
                .map(|(objects, more)| Response::Objects { objects, more }),
            PeerRequest::PartitionStats { partitions, q } => self
                .partition_stats(partitions, q)
                .await
                .map(Response::PartitionStats),
            PeerRequest::ReplaceIf {
                key,
                expected,
                replacement,
            } => self
                .replace_if(key, expected, replacement)
                .await
                .map(Response::Replaced),
            // Answered by the handler, which knows the transfer state.
            PeerRequest::TransferStatus => Err(WireError {
                kind: ErrorKind::Invalid,
                message: "transfer status is not a replica operation".into(),
                node: self.actor.node.to_string(),
            }),
        };
        result.unwrap_or_else(Response::Error)
    }

    async fn blocking<T: Send + 'static>(
        &self,
        f: impl FnOnce() -> kv_storage::Result<T> + Send + 'static,
    ) -> Result<T, WireError> {
        let node = self.actor.node.to_string();
        match tokio::task::spawn_blocking(f).await {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(e)) => Err(storage_error(&node, e)),
            Err(e) => Err(WireError {
                kind: ErrorKind::Internal,
                message: format!("storage task failed: {e}"),
                node,
            }),
        }
    }
}

fn storage_error(node: &str, e: kv_storage::Error) -> WireError {
    let kind = match &e {
        kv_storage::Error::Corrupt { .. } => ErrorKind::Corrupt,
        kv_storage::Error::Rejected(_) => ErrorKind::TooManySiblings,
        _ => ErrorKind::Internal,
    };
    WireError {
        kind,
        message: e.to_string(),
        node: node.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use kv_storage::MemoryEngine;
    use kv_types::NodeId;

    use super::*;

    fn replica(max: usize) -> Replica {
        let actor = Actor {
            node: NodeId::new("node1").unwrap(),
            incarnation: 7,
        };
        Replica::new(
            Arc::new(MemoryEngine::new()),
            actor,
            max,
            10,
            Default::default(),
            Arc::new(ReadCache::new(1 << 20)),
            Arc::new(DotFloor::load(&MemoryEngine::new()).unwrap()),
        )
    }

    #[tokio::test]
    async fn a_hint_keeps_the_age_it_is_given_but_never_a_future_one() {
        let r = replica(4);
        let owner = NodeId::new("node3").unwrap();
        let object = Object::new().update(
            &VersionVector::new(),
            &r.actor,
            Sibling {
                data: Some(b"v".to_vec()),
                written_at_ms: 1,
            },
        );
        // Passed on by a draining node: the hint's first creation time.
        r.store_hint(owner.clone(), b"old".to_vec(), object.clone(), 1_000)
            .await
            .unwrap();
        // A sender's clock ahead of ours cannot extend a hint's life.
        let far = crate::coordinator::now_ms() + 3_600_000;
        r.store_hint(owner, b"ahead".to_vec(), object, far)
            .await
            .unwrap();
        let stored: Vec<_> = r.storage.hints().map(Result::unwrap).collect();
        let created = |key: &[u8]| {
            stored
                .iter()
                .find(|h| h.key == key)
                .map(|h| h.created_at_ms)
                .unwrap()
        };
        assert_eq!(created(b"old"), 1_000);
        assert!(created(b"ahead") <= crate::coordinator::now_ms());
    }

    #[tokio::test]
    async fn blind_writes_become_siblings_up_to_the_cap() {
        let r = replica(2);
        let k = b"k".to_vec();
        let none = VersionVector::new();
        r.coordinate(k.clone(), Some(b"a".to_vec()), none.clone(), false, 1)
            .await
            .unwrap();
        let two = r
            .coordinate(k.clone(), Some(b"b".to_vec()), none.clone(), false, 2)
            .await
            .unwrap();
        assert_eq!(two.sibling_count(), 2);
        let err = r
            .coordinate(k.clone(), Some(b"c".to_vec()), none.clone(), false, 3)
            .await
            .unwrap_err();
        assert_eq!(err.kind, ErrorKind::TooManySiblings);
        // Nothing was written by the refused write; a resolving write works.
        let stored = r.get(k.clone()).await.unwrap().unwrap();
        assert_eq!(stored, two);
        let one = r
            .coordinate(k.clone(), Some(b"c".to_vec()), stored.join(), false, 4)
            .await
            .unwrap();
        assert_eq!(one.live_values().collect::<Vec<_>>(), vec![&b"c"[..]]);
        // An overwrite supersedes what this replica holds, without a context;
        // a blind write does not.
        let two = r
            .coordinate(k.clone(), Some(b"d".to_vec()), none.clone(), false, 5)
            .await
            .unwrap();
        assert_eq!(two.sibling_count(), 2);
        let over = r
            .coordinate(k, Some(b"e".to_vec()), none, true, 6)
            .await
            .unwrap();
        assert_eq!(over.live_values().collect::<Vec<_>>(), vec![&b"e"[..]]);
    }
}
