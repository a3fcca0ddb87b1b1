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

pub(crate) mod actor;
mod dot_floor;

pub use dot_floor::DotFloor;

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, RwLock};

use kv_router::RingSettings;
use kv_storage::{Prior, ReadCache, Storage};
use kv_types::{Actor, NodeId, Object, Sibling};

use crate::handoff::HandoffStats;
use crate::membership::{Announcement, Membership};
use crate::network::{Coordinate, HintCopy, ReplaceIf, ScanPage, ScanRequest};
use crate::offload::offload;
use crate::{Clock, Error, Refusal, Result, Rng};

/// Merges of a transferred page run between two yields of the worker
/// ([`Replica::replicate_page`]): a few milliseconds of work at most.
const PAGE_YIELD_EVERY: usize = 64;

/// Local replica operations.
pub struct Replica {
    storage: Arc<dyn Storage>,
    /// This node.
    node: NodeId,
    /// This node's clock actor: node id + its current incarnation, which
    /// changes when this replica finds it lost a key's record (see
    /// [`actor`]). Read where a dot is issued, inside the storage update.
    actor: RwLock<Actor>,
    /// Draws new incarnations.
    rng: Arc<Rng>,
    /// Where a new incarnation is announced (others retire the old
    /// actor's empty clock entries once they see it, as after a wipe).
    membership: Arc<dyn Membership>,
    /// Held while the actor changes: one change at a time.
    retiring: tokio::sync::Mutex<()>,
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

/// What [`Replica::merge_checked`] did.
enum Merged {
    /// The merge is applied: the merged object, and when it is durable.
    Applied(Object, kv_storage::Durable),
    /// Nothing was written: the record is damaged; the actor in use when
    /// that was found.
    Damaged(Actor),
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
    /// The clock actor dots are issued under (until this replica finds it
    /// lost a key's record and takes a new incarnation).
    pub actor: Actor,
    /// Draws the new incarnation when the actor changes.
    pub rng: Arc<Rng>,
    /// Where the new incarnation is announced.
    pub membership: Arc<dyn Membership>,
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
            node: parts.actor.node.clone(),
            actor: RwLock::new(parts.actor),
            rng: parts.rng,
            membership: parts.membership,
            retiring: tokio::sync::Mutex::new(()),
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

    /// This node's current clock actor.
    pub fn actor(&self) -> Actor {
        self.actor.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    fn node(&self) -> &NodeId {
        &self.node
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
            tracing::debug!(
                node = %self.node,
                request_id,
                key = %String::from_utf8_lossy(&write.key),
                "coordinated write: applied here already, answered with its first outcome"
            );
            return Ok(first);
        }
        let key = write.key.clone();
        let written = self.apply(request_id, write).await?;
        if request_id != 0 {
            self.recent().keep(request_id, &key, &written);
        }
        Ok(written)
    }

    fn recent(&self) -> std::sync::MutexGuard<'_, Recent> {
        self.recent.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Applies one coordinated write (see [`Replica::coordinate`]);
    /// `request_id` only names it in the debug log.
    async fn apply(&self, request_id: u64, write: Coordinate) -> Result<Object> {
        let Coordinate {
            key,
            data,
            context,
            overwrite,
            written_at_ms,
        } = write;
        let (max, floor) = (self.max_siblings, &self.floor);
        // The actor of the dot, read where the record is: a repair of a
        // damaged record lands only after the actor changed (see
        // `merge_checked`), so a write that sees the repaired record sees
        // the new actor too.
        let mut actor = self.actor();
        let sibling = Sibling {
            data,
            written_at_ms,
        };
        let mut refused_at = None;
        // A replica whose record of the key is damaged has lost the key's
        // clock, and a dot it issued now would cover (and so discard) its
        // own earlier dots that live on other replicas (found by the
        // simulation, seed 105): it refuses to coordinate until the record
        // is repaired. The closure is told a damaged record from an absent
        // one, so the first write of a key costs one read-modify-write.
        let mut damaged = None;
        let applied = self.storage.update_deferred_prior(&key, &mut |prior| {
            if let Prior::Damaged(reason) = prior {
                damaged = Some(kv_storage::Error::Corrupt {
                    key: key.clone(),
                    reason: reason.clone(),
                });
                return Err(kv_storage::Error::Rejected("damaged".into()));
            }
            let stored = prior.object().cloned().unwrap_or_default();
            let seen = if overwrite {
                context.merge(&stored.join())
            } else {
                context.clone()
            };
            actor = self.actor();
            let next = stored.update_with_floor(&seen, &actor, sibling.clone(), floor.current());
            if next.sibling_count() > max {
                refused_at = Some(next.sibling_count());
                return Err(kv_storage::Error::Rejected("too many siblings".into()));
            }
            Ok(next)
        });
        if let Some(e) = damaged {
            return Err(Error::Corrupt {
                node: self.node().clone(),
                message: format!(
                    "{e}: this replica lost the key's clock and issues no dot for it \
                     until it is repaired; another replica coordinates"
                ),
            });
        }
        let (written, durable) = match (applied, refused_at) {
            (Ok(applied), _) => applied,
            (Err(_), Some(count)) => {
                return Err(Error::Refused(Refusal::too_many_siblings(count, max)));
            }
            (Err(e), None) => return Err(self.storage_error(e)),
        };
        let issued = written.counter_of(&actor);
        // Which replica coordinated which write under which dot: what a
        // duplicated or lost write is traced back to (simulation seed
        // 1674). A log line only: no storage read, no await.
        tracing::debug!(
            node = %self.node,
            request_id,
            key = %String::from_utf8_lossy(&key),
            value = %sibling.data.as_deref().map_or_else(
                || "(tombstone)".into(),
                String::from_utf8_lossy,
            ),
            incarnation = actor.incarnation,
            dot = issued,
            "coordinated write: dot issued (applied, durable once flushed)"
        );
        self.until_durable(&key, durable).await?;
        self.cache.observe_write(&key, &written);
        if self.floor.note(issued) {
            self.extend_lease(issued).await;
        }
        Ok(written)
    }

    /// Extends the dot-counter lease past `issued`, a counter of a write
    /// that is already durable. A failure is logged, not returned: the
    /// write is stored, and answering a storage failure ("nothing was
    /// stored") would have the coordinator coordinate it again on another
    /// replica, one write under two dots (the kind of bug simulation seed
    /// 1674 found in the test network). The lease is extended half a lease
    /// early, so `issued` is still below the persisted end, and the next
    /// dot tries again.
    async fn extend_lease(&self, issued: u64) {
        let (storage, floor) = (self.storage.clone(), self.floor.clone());
        let failure = match offload(move || floor.record(storage.as_ref(), issued)).await {
            Ok(Ok(())) => return,
            Ok(Err(e)) => self.storage_error(e),
            Err(e) => e,
        };
        tracing::warn!(
            counter = issued,
            error = %failure,
            "cannot extend the dot-counter lease; the write is stored, the next write tries again"
        );
    }

    /// Merges another coordinator's object into the local one, durably;
    /// answers the merged object.
    ///
    /// # Errors
    /// A storage failure.
    pub async fn replicate(&self, key: &[u8], object: &Object) -> Result<Object> {
        let (merged, durable) = self.merge(key, object).await?;
        self.until_durable(key, durable).await?;
        self.cache.observe_write(key, &merged);
        Ok(merged)
    }

    /// Merges `incoming` into the stored object of `key` (applied, not yet
    /// durable). A damaged record is overwritten only after this replica
    /// took a new actor ([`Replica::retire_actor`]).
    async fn merge(&self, key: &[u8], incoming: &Object) -> Result<(Object, kv_storage::Durable)> {
        match self.merge_checked(key, incoming, false)? {
            Merged::Applied(merged, durable) => Ok((merged, durable)),
            Merged::Damaged(seen) => {
                self.retire_actor(&seen, key).await?;
                match self.merge_checked(key, incoming, true)? {
                    Merged::Applied(merged, durable) => Ok((merged, durable)),
                    Merged::Damaged(_) => Err(Error::Internal(
                        "a merge over a damaged record was refused after the actor changed".into(),
                    )),
                }
            }
        }
    }

    /// Merges `incoming` into the stored object of `key`, unless the
    /// record is damaged and `over_damaged` is false: then nothing is
    /// written and the answer is [`Merged::Damaged`] with the actor in
    /// use when the damage was found.
    ///
    /// One read-modify-write: the storage update tells a damaged record
    /// from an absent key ([`Prior`]).
    fn merge_checked(&self, key: &[u8], incoming: &Object, over_damaged: bool) -> Result<Merged> {
        let mut damaged = false;
        let applied = self
            .storage
            .update_deferred_prior(key, &mut |prior| match prior {
                Prior::Stored(stored) => Ok(stored.sync(incoming)),
                Prior::Damaged(_) if !over_damaged => {
                    damaged = true;
                    Err(kv_storage::Error::Rejected("damaged".into()))
                }
                Prior::Absent | Prior::Damaged(_) => Ok(incoming.clone()),
            });
        if damaged {
            return Ok(Merged::Damaged(self.actor()));
        }
        let (merged, durable) = applied.map_err(|e| self.storage_error(e))?;
        Ok(Merged::Applied(merged, durable))
    }

    /// Takes a new actor for every dot issued from now on, because this
    /// replica found its record of `key` damaged and is about to overwrite
    /// it with another replica's copy, which may lack dots the current
    /// actor issued for the key. A dot of the old actor drawn over that
    /// copy would cover those lost dots and discard their values on every
    /// merge (seed 665; Riak's kv679, fixed the same way with a new vnode
    /// id epoch: see the `replica::actor` module). The new incarnation is durable before the
    /// actor changes, and the caller repairs the record only after this
    /// returns, so not even a crash in between lets the old actor issue a
    /// dot over the lost history. `seen` is the actor in use when the
    /// damage was found: when another change came since, it covers this
    /// damage too and nothing more is done.
    ///
    /// # Errors
    /// A storage failure persisting the new incarnation (the actor is
    /// unchanged and the record stays damaged: the repair is retried).
    pub async fn retire_actor(&self, seen: &Actor, key: &[u8]) -> Result<()> {
        let _one = self.retiring.lock().await;
        let old = self.actor();
        if old != *seen {
            return Ok(());
        }
        let fresh = loop {
            let fresh = self.rng.next_u64();
            if fresh != old.incarnation {
                break fresh;
            }
        };
        let storage = self.storage.clone();
        offload(move || actor::store(storage.as_ref(), fresh))
            .await?
            .map_err(|e| self.storage_error(e))?;
        self.actor
            .write()
            .unwrap_or_else(|p| p.into_inner())
            .incarnation = fresh;
        tracing::warn!(
            key = %String::from_utf8_lossy(key),
            old = format!("{:016x}", old.incarnation),
            new = format!("{fresh:016x}"),
            "a damaged record is repaired: this node's clock actor takes a new incarnation"
        );
        self.membership
            .announce(Announcement::Incarnation(fresh))
            .await;
        Ok(())
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
            let (merged, durable) = self.merge(&key, &object).await?;
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
    /// durably. Its creation time is this node's now minus the age the
    /// sender measured (`hint.age_ms`): its age is kept on this node's
    /// clock from here on, whatever the sender's clock says.
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
        let created = self.clock.wall_ms().saturating_sub(hint.age_ms);
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
    use crate::testkit::MemoryMembership;

    fn replica(max: usize) -> Replica {
        replica_on(Arc::new(MemoryEngine::new()), &MemoryMembership::new(), max)
    }

    /// A replica of `node1` on `storage`, announcing to `membership`.
    fn replica_on(
        storage: Arc<MemoryEngine>,
        membership: &MemoryMembership,
        max: usize,
    ) -> Replica {
        let node = NodeId::new("node1").unwrap();
        let actor = Actor {
            node: node.clone(),
            incarnation: actor::load(storage.as_ref(), 7).unwrap().unwrap(),
        };
        let member = kv_types::Member {
            id: node.clone(),
            zone: "zone-a".into(),
            host: "node1".into(),
            weight: 1,
            status: kv_types::NodeStatus::Up,
        };
        Replica::new(ReplicaParts {
            floor: Arc::new(DotFloor::load(storage.as_ref()).unwrap()),
            storage,
            actor,
            max_siblings: max,
            max_hints: 10,
            handoff: Default::default(),
            cache: Arc::new(ReadCache::new(1 << 20)),
            clock: Arc::new(Clock::system()),
            rng: Arc::new(Rng::seeded(1)),
            membership: membership.join(&member),
        })
    }

    fn value(object: &Object) -> Vec<Vec<u8>> {
        let mut values: Vec<Vec<u8>> = object.live_values().map(<[u8]>::to_vec).collect();
        values.sort();
        values
    }

    /// Seed 665's mechanism in one replica: its record of a key is damaged
    /// and repaired from a copy that lacks its own newest dot of the key
    /// (an acknowledged write held by another replica). The repair makes
    /// the replica take a new actor, durably and announced, so the next
    /// dot it issues for the key covers nothing it issued before and the
    /// acknowledged write survives every merge.
    #[tokio::test]
    async fn a_repaired_damaged_record_gets_dots_of_a_new_actor() {
        let storage = Arc::new(MemoryEngine::new());
        let membership = MemoryMembership::new();
        let r = replica_on(storage.clone(), &membership, 4);
        let first = r.actor();
        let none = VersionVector::new();
        // A merge over an absent key is not a repair: same actor.
        let other = Actor {
            node: NodeId::new("node2").unwrap(),
            incarnation: 1,
        };
        let theirs = Object::new().update(
            &none,
            &other,
            Sibling {
                data: Some(b"theirs".to_vec()),
                written_at_ms: 1,
            },
        );
        r.replicate(b"fresh", &theirs).await.unwrap();
        assert_eq!(r.actor(), first);

        // This replica's acknowledged write of `k` (dot 1 of its actor),
        // which another replica holds.
        let acked = r
            .coordinate(0, write(b"k", b"acked", none.clone(), false))
            .await
            .unwrap();
        assert_eq!(acked.counter_of(&first), 1);
        // The record is damaged: no dot is issued over it.
        assert!(storage.corrupt_for_test(b"k"));
        let err = r
            .coordinate(0, write(b"k", b"refused", none.clone(), false))
            .await
            .unwrap_err();
        assert!(matches!(err, Error::Corrupt { .. }), "{err}");
        assert_eq!(r.actor(), first);

        // Repaired from a replica that never got the acknowledged write.
        r.replicate(b"k", &theirs).await.unwrap();
        let second = r.actor();
        assert_ne!(second, first, "the repair must retire the actor");
        assert_eq!(second.node, first.node);
        // Durable (a restart keeps it) and announced.
        assert_eq!(
            actor::load(storage.as_ref(), 99).unwrap().unwrap(),
            second.incarnation
        );
        let view = membership.view_of(&first.node);
        assert_eq!(
            view.members[&first.node].incarnation,
            Some(second.incarnation)
        );

        // The next write of `k`, with the repaired record's context, is a
        // dot of the new actor; the acknowledged write stays a sibling
        // wherever the two meet.
        let next = r
            .coordinate(0, write(b"k", b"next", theirs.join(), false))
            .await
            .unwrap();
        assert_eq!(next.counter_of(&first), 0);
        assert!(next.counter_of(&second) > 0);
        assert_eq!(
            value(&acked.sync(&next)),
            vec![b"acked".to_vec(), b"next".to_vec()]
        );
        assert_eq!(value(&next.sync(&acked)), value(&acked.sync(&next)));

        // A later repair of another damaged key retires the new actor too.
        r.replicate(b"j", &theirs).await.unwrap();
        assert!(storage.corrupt_for_test(b"j"));
        r.replicate(b"j", &theirs).await.unwrap();
        assert_ne!(r.actor(), second);
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

    /// A coordinated write that is durable is answered as written even
    /// when extending the dot-counter lease fails right after: a storage
    /// failure ("nothing was stored") would have the coordinator
    /// coordinate it again on another replica, one write under two dots.
    #[tokio::test]
    async fn a_durable_write_is_not_reported_unstored_when_the_lease_extension_fails() {
        let storage = Arc::new(MemoryEngine::journaled());
        let r = Arc::new(replica_on(storage.clone(), &MemoryMembership::new(), 4));
        // A clock of this actor far into its first lease (0..1,000,000):
        // the next dot asks for an extension.
        let near_end = Object::new().update_with_floor(
            &VersionVector::new(),
            &r.actor(),
            Sibling {
                data: Some(b"old".to_vec()),
                written_at_ms: 1,
            },
            600_000,
        );
        storage.merge(b"k", &near_end).unwrap();
        storage.flush().unwrap();
        let coordinated = {
            let r = r.clone();
            let context = near_end.join();
            tokio::spawn(async move { r.coordinate(0, write(b"k", b"new", context, false)).await })
        };
        // The write is applied and waits for its flush; it is made durable,
        // then the engine fails before the lease is extended.
        while storage.unflushed() == 0 {
            tokio::task::yield_now().await;
        }
        storage.flush().unwrap();
        let _reopened = storage.crash(0);
        let written = coordinated.await.unwrap().unwrap();
        assert_eq!(written.counter_of(&r.actor()), 600_002);
        assert_eq!(value(&written), vec![b"new".to_vec()]);
    }

    #[tokio::test]
    async fn a_hint_keeps_the_age_it_is_given_but_never_a_future_one() {
        let r = replica(4);
        let owner = NodeId::new("node3").unwrap();
        let object = Object::new().update(
            &VersionVector::new(),
            &r.actor(),
            Sibling {
                data: Some(b"v".to_vec()),
                written_at_ms: 1,
            },
        );
        let hint = |key: &[u8], age_ms| HintCopy {
            owner: owner.clone(),
            key: key.to_vec(),
            object: object.clone(),
            age_ms,
        };
        // Passed on by a draining node after an hour: it keeps that age.
        let before = r.clock.wall_ms();
        r.store_hint(hint(b"old", 3_600_000)).await.unwrap();
        // A new hint starts its age now, on this node's clock, whatever the
        // coordinator's clock read (it is not even sent).
        r.clock.set_offset_ms(-7_200_000);
        let skewed_now = r.clock.wall_ms();
        r.store_hint(hint(b"new", 0)).await.unwrap();
        let stored: Vec<_> = r.storage.hints().map(|h| h.unwrap()).collect();
        let created = |key: &[u8]| {
            stored
                .iter()
                .find(|h| h.key == key)
                .map(|h| h.created_at_ms)
                .unwrap()
        };
        assert!(created(b"old") >= before - 3_600_000);
        assert!(created(b"old") <= before - 3_600_000 + 60_000);
        assert!(created(b"new") >= skewed_now && created(b"new") <= r.clock.wall_ms());
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
                    &r.actor(),
                    Sibling {
                        data: Some(vec![i]),
                        written_at_ms: 1,
                    },
                ),
                age_ms: 0,
            })
            .await
            .unwrap();
        }
        let err = r
            .store_hint(HintCopy {
                owner: NodeId::new("node2").unwrap(),
                key: b"one-more".to_vec(),
                object,
                age_ms: 0,
            })
            .await
            .unwrap_err();
        assert!(matches!(err, Error::Overloaded(_)), "{err}");
        assert_eq!(r.handoff.dropped.load(Ordering::Relaxed), 1);
    }
}
