//! This node as a replica: reads, coordinated writes (a fresh dot of this
//! node's actor) and merges of other coordinators' objects, all on local
//! storage. Storage calls block (sled, group commit), so they run on the
//! blocking pool.

use std::sync::Arc;

use kv_storage::Storage;
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
}

impl Replica {
    /// A replica writing dots as `actor`.
    pub fn new(
        storage: Arc<dyn Storage>,
        actor: Actor,
        max_siblings: usize,
        max_hints: u64,
        handoff: Arc<crate::handoff::HandoffStats>,
    ) -> Self {
        Replica {
            storage,
            actor,
            max_siblings,
            max_hints,
            handoff,
        }
    }

    /// The locally stored object of `key`.
    pub async fn get(&self, key: Vec<u8>) -> Result<Option<Object>, WireError> {
        let storage = self.storage.clone();
        self.blocking(move || storage.get(&key)).await
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
        let storage = self.storage.clone();
        let actor = self.actor.clone();
        let max = self.max_siblings;
        self.blocking(move || {
            let sibling = Sibling { data, written_at_ms };
            storage.update(&key, &mut |stored| {
                let stored = stored.cloned().unwrap_or_default();
                let seen = if overwrite {
                    context.merge(&stored.join())
                } else {
                    context.clone()
                };
                let next = stored.update(&seen, &actor, sibling.clone());
                if next.sibling_count() > max {
                    return Err(kv_storage::Error::Rejected(format!(
                        "the write would leave {} siblings, over the cap of {max}: read the key and write with its context to resolve them",
                        next.sibling_count()
                    )));
                }
                Ok(next)
            })
        })
        .await
    }

    /// Merges another coordinator's object into the local one, durably.
    pub async fn replicate(&self, key: Vec<u8>, object: Object) -> Result<Object, WireError> {
        let storage = self.storage.clone();
        self.blocking(move || storage.merge(&key, &object)).await
    }

    /// Holds `object` for `owner` (a replica that is down), durably.
    pub async fn store_hint(
        &self,
        owner: NodeId,
        key: Vec<u8>,
        object: Object,
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
        let now = crate::coordinator::now_ms();
        self.blocking(move || storage.put_hint(&owner, &key, &object, now))
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
            PeerRequest::StoreHint { owner, key, object } => match NodeId::new(owner) {
                Ok(owner) => self
                    .store_hint(owner, key, object)
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
        )
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
