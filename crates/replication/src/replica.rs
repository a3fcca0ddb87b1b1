//! This node as a replica: reads, coordinated writes (a fresh dot of this
//! node's actor) and merges of other coordinators' objects, all on local
//! storage.
//!
//! Point reads and writes run on the async worker: sled answers them from
//! its page cache and log buffer (a page missing from the cache costs one
//! disk read on the worker: size `[storage] cache_capacity_mb` to the hot
//! set), and a write waits for its group-commit flush through
//! [`kv_storage::Durable`], a future, instead of a parked thread. Measured
//! in `docs/benchmarks.md`: two thread hand-offs per request were the
//! largest cost of a GET. Scans, hints and metadata writes, which may be
//! long or fsync on the calling thread, run on the blocking pool
//! ([`crate::offload`]).

mod dot_floor;

pub use dot_floor::DotFloor;

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use kv_router::RingSettings;
use kv_storage::{ReadCache, Storage};
use kv_types::{Actor, NodeId, Object, Sibling};

use crate::handoff::HandoffStats;
use crate::network::{Coordinate, HintCopy, ReplaceIf, ScanPage, ScanRequest};
use crate::offload::offload;
use crate::{Clock, Error, Refusal, Result};

/// Merges of a transferred page run between two yields of the worker
/// ([`Replica::replicate_page`]): a few milliseconds of work at most.
const PAGE_YIELD_EVERY: usize = 64;

/// Local replica operations.
pub struct Replica {
    storage: Arc<dyn Storage>,
    /// This node's clock actor: node id + the incarnation of its data dir.
    actor: Actor,
    /// Sibling cap per key.
    max_siblings: usize,
    /// Hints held at most; beyond, new ones are refused.
    max_hints: u64,
    /// Counts hints refused because the store was full.
    handoff: Arc<HandoffStats>,
    /// Read cache: hits are answered without touching storage.
    cache: Arc<ReadCache>,
    /// The counter floor of this node's actor (see [`DotFloor`]).
    floor: Arc<DotFloor>,
    clock: Arc<Clock>,
    /// The outcomes of recent coordinated writes by (request id, key): a
    /// request seen again is answered with its first outcome, never
    /// applied twice.
    recent: Mutex<Recent>,
}

/// Coordinated writes remembered for retries.
const RECENT_WRITES: usize = 4096;

/// The outcomes of the last [`RECENT_WRITES`] coordinated writes.
#[derive(Default)]
struct Recent {
    outcomes: HashMap<(u64, Vec<u8>), Object>,
    order: VecDeque<(u64, Vec<u8>)>,
}

impl Recent {
    fn get(&self, request_id: u64, key: &[u8]) -> Option<Object> {
        self.outcomes.get(&(request_id, key.to_vec())).cloned()
    }

    fn keep(&mut self, request_id: u64, key: &[u8], object: &Object) {
        let k = (request_id, key.to_vec());
        if self.outcomes.insert(k.clone(), object.clone()).is_none() {
            self.order.push_back(k);
        }
        while self.order.len() > RECENT_WRITES {
            if let Some(old) = self.order.pop_front() {
                self.outcomes.remove(&old);
            }
        }
    }
}

/// What a [`Replica`] is built from.
pub struct ReplicaParts {
    /// The node's storage engine.
    pub storage: Arc<dyn Storage>,
    /// The clock actor dots are issued under.
    pub actor: Actor,
    /// Sibling cap per key.
    pub max_siblings: usize,
    /// Hints held at most.
    pub max_hints: u64,
    /// Handoff counters (hints refused when full).
    pub handoff: Arc<HandoffStats>,
    /// The read cache.
    pub cache: Arc<ReadCache>,
    /// The actor's counter floor.
    pub floor: Arc<DotFloor>,
    /// The node's clock.
    pub clock: Arc<Clock>,
}

impl Replica {
    /// A replica writing dots as `parts.actor`.
    pub fn new(parts: ReplicaParts) -> Self {
        Replica {
            storage: parts.storage,
            actor: parts.actor,
            max_siblings: parts.max_siblings,
            max_hints: parts.max_hints,
            handoff: parts.handoff,
            cache: parts.cache,
            floor: parts.floor,
            clock: parts.clock,
            recent: Mutex::new(Recent::default()),
        }
    }

    /// The read cache (its figures go to gossip and metrics).
    pub fn cache(&self) -> &Arc<ReadCache> {
        &self.cache
    }

    /// The storage engine.
    pub fn storage(&self) -> &Arc<dyn Storage> {
        &self.storage
    }

    /// This node's clock actor.
    pub fn actor(&self) -> &Actor {
        &self.actor
    }

    fn node(&self) -> &NodeId {
        &self.actor.node
    }

    fn storage_error(&self, e: kv_storage::Error) -> Error {
        Error::from_storage(self.node(), e)
    }

    /// The locally stored object of `key`.
    ///
    /// # Errors
    /// [`Error::Corrupt`] for a record that fails its checks; a storage
    /// failure.
    pub async fn get(&self, key: &[u8]) -> Result<Option<Object>> {
        if let Some(object) = self.cache.lookup(key) {
            return Ok(Some(object));
        }
        let stored = self.storage.get(key).map_err(|e| self.storage_error(e))?;
        if let Some(object) = &stored {
            self.cache.fill(key, object);
        }
        Ok(stored)
    }

    /// Applies a client write under this node's actor and makes it durable:
    /// the result supersedes what the write's context saw and keeps every
    /// concurrent version as a sibling. With `overwrite`, it also
    /// supersedes everything stored here for the key. A request (id and
    /// key) this replica already applied is answered with its first
    /// outcome, not applied again (request id 0: no id).
    ///
    /// # Errors
    /// [`Refusal::TooManySiblings`] (nothing written); a storage failure.
    pub async fn coordinate(&self, request_id: u64, write: Coordinate) -> Result<Object> {
        if request_id != 0
            && let Some(first) = self.recent().get(request_id, &write.key)
        {
            return Ok(first);
        }
        let key = write.key.clone();
        let written = self.apply(write).await?;
        if request_id != 0 {
            self.recent().keep(request_id, &key, &written);
        }
        Ok(written)
    }

    fn recent(&self) -> std::sync::MutexGuard<'_, Recent> {
        self.recent.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Applies one coordinated write (see [`Replica::coordinate`]).
    async fn apply(&self, write: Coordinate) -> Result<Object> {
        let Coordinate {
            key,
            data,
            context,
            overwrite,
            written_at_ms,
        } = write;
        let (actor, max, floor) = (&self.actor, self.max_siblings, &self.floor);
        let sibling = Sibling {
            data,
            written_at_ms,
        };
        let mut refused_at = None;
        // A record that fails its checks reaches the closure as `None`,
        // like an absent one; but a replica whose record is damaged has
        // lost the key's clock, and a dot it issued now would cover (and
        // so discard) its own earlier dots that live on other replicas
        // (found by the simulation, seed 105). So the first write of a
        // key here makes sure the key is really absent first.
        let mut absent_checked = false;
        let applied = loop {
            let mut absent = false;
            let applied = self.storage.update_deferred(&key, &mut |stored| {
                if stored.is_none() && !absent_checked {
                    absent = true;
                    return Err(kv_storage::Error::Rejected("absent".into()));
                }
                let stored = stored.cloned().unwrap_or_default();
                let seen = if overwrite {
                    context.merge(&stored.join())
                } else {
                    context.clone()
                };
                let next = stored.update_with_floor(&seen, actor, sibling.clone(), floor.current());
                if next.sibling_count() > max {
                    refused_at = Some(next.sibling_count());
                    return Err(kv_storage::Error::Rejected("too many siblings".into()));
                }
                Ok(next)
            });
            if !absent {
                break applied;
            }
            match self.storage.get(&key) {
                Ok(_) => absent_checked = true,
                Err(e @ kv_storage::Error::Corrupt { .. }) => {
                    return Err(Error::Corrupt {
                        node: self.node().clone(),
                        message: format!(
                            "{e}: this replica lost the key's clock and issues no dot for it \
                             until it is repaired; another replica coordinates"
                        ),
                    });
                }
                Err(e) => return Err(self.storage_error(e)),
            }
        };
        let (written, durable) = match (applied, refused_at) {
            (Ok(applied), _) => applied,
            (Err(_), Some(count)) => {
                return Err(Error::Refused(Refusal::too_many_siblings(count, max)));
            }
            (Err(e), None) => return Err(self.storage_error(e)),
        };
        self.until_durable(&key, durable).await?;
        self.cache.observe_write(&key, &written);
        let issued = written.counter_of(&self.actor);
        if self.floor.note(issued) {
            let (storage, floor) = (self.storage.clone(), self.floor.clone());
            offload(move || floor.record(storage.as_ref(), issued))
                .await?
                .map_err(|e| self.storage_error(e))?;
        }
        Ok(written)
    }

    /// Merges another coordinator's object into the local one, durably;
    /// answers the merged object.
    ///
    /// # Errors
    /// A storage failure.
    pub async fn replicate(&self, key: &[u8], object: &Object) -> Result<Object> {
        let (merged, durable) = self
            .storage
            .merge_deferred(key, object)
            .map_err(|e| self.storage_error(e))?;
        self.until_durable(key, durable).await?;
        self.cache.observe_write(key, &merged);
        Ok(merged)
    }

    /// Waits until an applied write of `key` is durable. When that fails
    /// the write stays applied (or not: the engine may have reopened), so
    /// the cache forgets the key and the next read asks storage: a cached
    /// object older than what storage holds would be served, and compared
    /// by anti-entropy, forever (found by the simulation, seed 15).
    async fn until_durable(&self, key: &[u8], durable: kv_storage::Durable) -> Result<()> {
        durable.await.map_err(|e| {
            self.cache.invalidate(key);
            self.storage_error(e)
        })
    }

    /// Merges a page of objects (a partition transfer's scan page) and
    /// waits for them durable together: one flush, or a few, for the page
    /// instead of one per key. Yields to other tasks every
    /// 64 merges, which run on the calling worker.
    ///
    /// # Errors
    /// The first merge or flush that failed (every key whose flush failed
    /// is forgotten by the cache); the merges before it are
    /// applied (merging is idempotent: pulling the page again is safe).
    pub async fn replicate_page(&self, objects: Vec<(Vec<u8>, Object)>) -> Result<()> {
        let mut pending = Vec::with_capacity(objects.len());
        for (i, (key, object)) in objects.into_iter().enumerate() {
            if i > 0 && i % PAGE_YIELD_EVERY == 0 {
                tokio::task::yield_now().await;
            }
            let (merged, durable) = self
                .storage
                .merge_deferred(&key, &object)
                .map_err(|e| self.storage_error(e))?;
            pending.push((key, merged, durable));
        }
        let mut failed = None;
        for (key, merged, durable) in pending {
            match self.until_durable(&key, durable).await {
                Ok(()) => self.cache.observe_write(&key, &merged),
                Err(e) => {
                    failed.get_or_insert(e);
                }
            }
        }
        if let Some(e) = failed {
            return Err(e);
        }
        Ok(())
    }

    /// Holds a copy of a write for `hint.owner` (a replica that is down),
    /// durably. A creation time after this node's now counts as now, so a
    /// sender's clock cannot extend a hint's life.
    ///
    /// # Errors
    /// [`Error::Overloaded`] when this node already holds the maximum of
    /// hints (counted as dropped); a storage failure.
    pub async fn store_hint(&self, hint: HintCopy) -> Result<()> {
        if self.storage.hint_count() >= self.max_hints {
            self.handoff.dropped.fetch_add(1, Ordering::Relaxed);
            tracing::warn!(owner = %hint.owner, max = self.max_hints, "hint store full: hint refused");
            return Err(Error::Overloaded(format!(
                "{} already holds {} hints (the maximum); the coordinator tries another fallback",
                self.node(),
                self.max_hints
            )));
        }
        let created = hint.created_at_ms.min(self.clock.wall_ms());
        let storage = self.storage.clone();
        offload(move || storage.put_hint(&hint.owner, &hint.key, &hint.object, created))
            .await?
            .map_err(|e| self.storage_error(e))
    }

    /// The anti-entropy digests of `count` segments from `first`.
    ///
    /// # Errors
    /// Only when the blocking task fails.
    pub async fn segment_digests(&self, first: u32, count: u32) -> Result<Vec<u64>> {
        let storage = self.storage.clone();
        offload(move || storage.segment_digests(first, count)).await
    }

    /// Every key with its digest in a hash range.
    ///
    /// # Errors
    /// A storage failure.
    pub async fn key_digests(&self, from: u64, to: u64) -> Result<Vec<(Vec<u8>, u64)>> {
        let storage = self.storage.clone();
        offload(move || storage.key_digests(from, to))
            .await?
            .map_err(|e| self.storage_error(e))
    }

    /// Up to `request.limit` objects of a hash range in hash order, after
    /// `request.after`; and whether more follow. Corrupt records are
    /// skipped (logged by storage; anti-entropy repairs them).
    ///
    /// # Errors
    /// Only when the blocking task fails.
    pub async fn scan(&self, request: ScanRequest) -> Result<ScanPage> {
        let storage = self.storage.clone();
        offload(move || {
            // Resume strictly after (hash, key) of the last key sent.
            let resume = request.after.map(|k| (kv_types::key_hash(&k), k));
            let start = resume.as_ref().map_or(request.from_hash, |(h, _)| *h);
            let mut page = ScanPage::default();
            for item in storage.scan(start, request.to_hash) {
                let Ok((key, object)) = item else { continue };
                if let Some((h, k)) = &resume
                    && (kv_types::key_hash(&key), key.as_slice()) <= (*h, k.as_slice())
                {
                    continue;
                }
                if page.objects.len() == request.limit as usize {
                    page.more = true;
                    break;
                }
                page.objects.push((key, object));
            }
            page
        })
        .await
    }

    /// Keys and encoded bytes stored per partition of a ring of `q`
    /// partitions (a full scan of each).
    ///
    /// # Errors
    /// Only when the blocking task fails.
    pub async fn partition_stats(
        &self,
        partitions: Vec<u32>,
        q: u32,
    ) -> Result<Vec<(u32, u64, u64)>> {
        let storage = self.storage.clone();
        let ring = RingSettings {
            partitions: q,
            ..RingSettings::default()
        };
        offload(move || {
            partitions
                .into_iter()
                .map(|p| {
                    let (first, last) = ring.partition_range(p);
                    let (mut keys, mut bytes) = (0u64, 0u64);
                    for (key, object) in storage.scan(first, last).flatten() {
                        keys += 1;
                        let size = kv_types::codec::encode(&object).map_or(0, |b| b.len());
                        bytes += (key.len() + size) as u64;
                    }
                    (p, keys, bytes)
                })
                .collect()
        })
        .await
    }

    /// Replaces the stored object of a key with the replacement (`None`
    /// deletes the record) only if it still equals the expected one;
    /// durable. Answers whether it was replaced.
    ///
    /// # Errors
    /// A storage failure.
    pub async fn replace_if(&self, request: ReplaceIf) -> Result<bool> {
        let ReplaceIf {
            key,
            expected,
            replacement,
        } = request;
        self.cache.invalidate(&key);
        let storage = self.storage.clone();
        offload(move || match replacement {
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
        .await?
        .map_err(|e| self.storage_error(e))
    }
}

#[cfg(test)]
mod tests {
    use kv_storage::MemoryEngine;
    use kv_types::VersionVector;

    use super::*;

    fn replica(max: usize) -> Replica {
        let actor = Actor {
            node: NodeId::new("node1").unwrap(),
            incarnation: 7,
        };
        Replica::new(ReplicaParts {
            storage: Arc::new(MemoryEngine::new()),
            actor,
            max_siblings: max,
            max_hints: 10,
            handoff: Default::default(),
            cache: Arc::new(ReadCache::new(1 << 20)),
            floor: Arc::new(DotFloor::load(&MemoryEngine::new()).unwrap()),
            clock: Arc::new(Clock::system()),
        })
    }

    fn write(key: &[u8], value: &[u8], context: VersionVector, overwrite: bool) -> Coordinate {
        Coordinate {
            key: key.to_vec(),
            data: Some(value.to_vec()),
            context,
            overwrite,
            written_at_ms: 1,
        }
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
        let hint = |key: &[u8], created_at_ms| HintCopy {
            owner: owner.clone(),
            key: key.to_vec(),
            object: object.clone(),
            created_at_ms,
        };
        // Passed on by a draining node: the hint's first creation time.
        r.store_hint(hint(b"old", 1_000)).await.unwrap();
        // A sender's clock ahead of ours cannot extend a hint's life.
        let far = r.clock.wall_ms() + 3_600_000;
        r.store_hint(hint(b"ahead", far)).await.unwrap();
        let stored: Vec<_> = r.storage.hints().map(|h| h.unwrap()).collect();
        let created = |key: &[u8]| {
            stored
                .iter()
                .find(|h| h.key == key)
                .map(|h| h.created_at_ms)
                .unwrap()
        };
        assert_eq!(created(b"old"), 1_000);
        assert!(created(b"ahead") <= r.clock.wall_ms());
    }

    #[tokio::test]
    async fn blind_writes_become_siblings_up_to_the_cap() {
        let r = replica(2);
        let none = VersionVector::new();
        r.coordinate(0, write(b"k", b"a", none.clone(), false))
            .await
            .unwrap();
        let two = r
            .coordinate(0, write(b"k", b"b", none.clone(), false))
            .await
            .unwrap();
        assert_eq!(two.sibling_count(), 2);
        let err = r
            .coordinate(0, write(b"k", b"c", none.clone(), false))
            .await
            .unwrap_err();
        assert_eq!(err, Error::Refused(Refusal::too_many_siblings(3, 2)));
        assert!(err.to_string().contains("3 siblings, over the cap of 2"));
        // Nothing was written by the refused write; a resolving write works.
        let stored = r.get(b"k").await.unwrap().unwrap();
        assert_eq!(stored, two);
        let one = r
            .coordinate(0, write(b"k", b"c", stored.join(), false))
            .await
            .unwrap();
        assert_eq!(one.live_values().collect::<Vec<_>>(), vec![&b"c"[..]]);
        // An overwrite supersedes what this replica holds, without a context;
        // a blind write does not.
        let two = r
            .coordinate(0, write(b"k", b"d", none.clone(), false))
            .await
            .unwrap();
        assert_eq!(two.sibling_count(), 2);
        let over = r
            .coordinate(0, write(b"k", b"e", none, true))
            .await
            .unwrap();
        assert_eq!(over.live_values().collect::<Vec<_>>(), vec![&b"e"[..]]);
    }

    #[tokio::test]
    async fn a_full_hint_store_refuses_and_counts() {
        let r = replica(2);
        let object = Object::new();
        for i in 0..10u8 {
            r.store_hint(HintCopy {
                owner: NodeId::new("node2").unwrap(),
                key: vec![b'k', i],
                object: Object::new().update(
                    &VersionVector::new(),
                    &r.actor,
                    Sibling {
                        data: Some(vec![i]),
                        written_at_ms: 1,
                    },
                ),
                created_at_ms: 1,
            })
            .await
            .unwrap();
        }
        let err = r
            .store_hint(HintCopy {
                owner: NodeId::new("node2").unwrap(),
                key: b"one-more".to_vec(),
                object,
                created_at_ms: 1,
            })
            .await
            .unwrap_err();
        assert!(matches!(err, Error::Overloaded(_)), "{err}");
        assert_eq!(r.handoff.dropped.load(Ordering::Relaxed), 1);
    }
}
