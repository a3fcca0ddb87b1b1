//! The receiving side of replica calls: what this node does when another
//! node calls it (through QUIC in a running node, through the memory
//! network in tests). One method per [`crate::Network`] method.
//!
//! Calls are admitted up to `max_peer_requests` at once (beyond, they are
//! answered "overloaded" at once: a bounded queue). A `Replicate` for a key
//! this node owns under neither its current nor its target ring is stored
//! anyway and tracked as a stray (see [`crate::strays`]).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use kv_router::Feedback;
use kv_types::{NodeId, Object};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tracing::{debug, warn};

use crate::network::{Coordinate, HintCopy, ReplaceIf, ScanPage, ScanRequest, TransferStatus};
use crate::offload::offload;
use crate::replica::Replica;
use crate::strays::Strays;
use crate::transfer::Transfer;
use crate::{Cluster, Error, Result};

/// Serves replica calls from other nodes.
pub struct PeerService {
    cluster: Arc<Cluster>,
    replica: Arc<Replica>,
    transfer: Arc<Transfer>,
    strays: Arc<Strays>,
    /// Replica calls being served (the bounded queue).
    slots: Arc<Semaphore>,
    /// Its capacity.
    max_requests: usize,
    /// EWMA of the service time of the calls served, microseconds (f64
    /// bits): what answers piggyback.
    service_us: AtomicU64,
}

/// Smoothing of the service-time EWMA (C3's alpha).
const SERVICE_ALPHA: f64 = 0.3;

/// One admitted call: holds its slot, and folds its service time into the
/// EWMA when it ends.
pub struct Slot<'a> {
    _permit: OwnedSemaphorePermit,
    started: tokio::time::Instant,
    service: &'a PeerService,
}

impl Drop for Slot<'_> {
    fn drop(&mut self) {
        let us = self.started.elapsed().as_secs_f64() * 1e6;
        let cell = &self.service.service_us;
        let _ = cell.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |bits| {
            let old = f64::from_bits(bits);
            let next = if old == 0.0 {
                us
            } else {
                SERVICE_ALPHA * us + (1.0 - SERVICE_ALPHA) * old
            };
            Some(next.to_bits())
        });
    }
}

impl PeerService {
    /// Serves through `replica`, at most `max_requests` calls at once.
    pub fn new(
        cluster: Arc<Cluster>,
        replica: Arc<Replica>,
        transfer: Arc<Transfer>,
        strays: Arc<Strays>,
        max_requests: usize,
    ) -> Self {
        PeerService {
            cluster,
            replica,
            transfer,
            strays,
            slots: Arc::new(Semaphore::new(max_requests)),
            max_requests,
            service_us: AtomicU64::new(0),
        }
    }

    /// What this node's answers piggyback: its queue depth (calls being
    /// served) and its recent service time.
    pub fn feedback(&self) -> Feedback {
        Feedback {
            queue: u32::try_from(self.in_flight()).unwrap_or(u32::MAX),
            service_us: f64::from_bits(self.service_us.load(Ordering::Relaxed)),
        }
    }

    /// The ring version this node routes with (every answer carries it).
    pub fn ring_version(&self) -> u64 {
        self.cluster.ring_version()
    }

    /// Replica calls being served now.
    pub fn in_flight(&self) -> usize {
        self.max_requests - self.slots.available_permits()
    }

    /// Replica calls served at once at most.
    pub fn capacity(&self) -> usize {
        self.max_requests
    }

    /// Copies received for keys this node did not replicate.
    pub fn strays(&self) -> &Arc<Strays> {
        &self.strays
    }

    /// A slot for one call, or "overloaded" when every slot is taken.
    ///
    /// # Errors
    /// [`Error::Overloaded`].
    pub fn admit(&self) -> Result<Slot<'_>> {
        let permit = self.slots.clone().try_acquire_owned().map_err(|_| {
            Error::Overloaded(format!(
                "{} already serves {} replica requests",
                self.cluster.id(),
                self.max_requests
            ))
        })?;
        Ok(Slot {
            _permit: permit,
            started: self.cluster.clock().now(),
            service: self,
        })
    }

    /// The object this node stores for `key`.
    ///
    /// # Errors
    /// See [`Replica::get`].
    pub async fn get(&self, key: &[u8]) -> Result<Option<Object>> {
        let _slot = self.admit()?;
        self.replica.get(key).await
    }

    /// Coordinates a client write here.
    ///
    /// # Errors
    /// See [`Replica::coordinate`].
    pub async fn coordinate(&self, request_id: u64, write: Coordinate) -> Result<Object> {
        let _slot = self.admit()?;
        self.replica.coordinate(request_id, write).await
    }

    /// Merges another coordinator's object, durably. A copy of a key this
    /// node does not replicate (the sender routes with another ring) is
    /// stored anyway, counted, and kept as a hint for this node itself so
    /// that handoff passes it on once the view has caught up.
    ///
    /// # Errors
    /// See [`Replica::replicate`].
    pub async fn replicate(
        &self,
        from: &NodeId,
        sender_ring: u64,
        key: &[u8],
        object: &Object,
    ) -> Result<()> {
        let _slot = self.admit()?;
        let me = self.cluster.id().clone();
        let owned = self.cluster.placement().owns(&me, key);
        if !owned {
            debug!(%from, sender_ring, "copy of a key this node does not replicate");
            let hint = (self.replica.storage().clone(), key.to_vec(), object.clone());
            let created = self.cluster.clock().wall_ms();
            let kept = offload(move || hint.0.put_hint(&me, &hint.1, &hint.2, created)).await?;
            if let Err(e) = kept {
                warn!(error = %e, "cannot keep a stray copy's hint");
                return Err(Error::from_storage(self.cluster.id(), e));
            }
            let now = self.cluster.clock().now();
            self.strays.note(key, sender_ring, now);
        }
        self.replica.replicate(key, object).await.map(|_| ())
    }

    /// Holds a hint for a replica that is down.
    ///
    /// # Errors
    /// See [`Replica::store_hint`].
    pub async fn store_hint(&self, hint: HintCopy) -> Result<()> {
        let _slot = self.admit()?;
        self.replica.store_hint(hint).await
    }

    /// Anti-entropy segment digests.
    ///
    /// # Errors
    /// See [`Replica::segment_digests`].
    pub async fn segment_digests(&self, first: u32, count: u32) -> Result<Vec<u64>> {
        let _slot = self.admit()?;
        self.replica.segment_digests(first, count).await
    }

    /// Keys and their digests in a hash range.
    ///
    /// # Errors
    /// See [`Replica::key_digests`].
    pub async fn key_digests(&self, from_hash: u64, to_hash: u64) -> Result<Vec<(Vec<u8>, u64)>> {
        let _slot = self.admit()?;
        self.replica.key_digests(from_hash, to_hash).await
    }

    /// One page of a partition pull.
    ///
    /// # Errors
    /// See [`Replica::scan`].
    pub async fn scan(&self, request: ScanRequest) -> Result<ScanPage> {
        let _slot = self.admit()?;
        self.replica.scan(request).await
    }

    /// Keys and bytes per partition.
    ///
    /// # Errors
    /// See [`Replica::partition_stats`].
    pub async fn partition_stats(
        &self,
        partitions: Vec<u32>,
        q: u32,
    ) -> Result<Vec<(u32, u64, u64)>> {
        let _slot = self.admit()?;
        self.replica.partition_stats(partitions, q).await
    }

    /// What this node still has to pull.
    pub fn transfer_status(&self) -> TransferStatus {
        self.transfer.status()
    }

    /// A conditional replacement.
    ///
    /// # Errors
    /// See [`Replica::replace_if`].
    pub async fn replace_if(&self, request: ReplaceIf) -> Result<bool> {
        let _slot = self.admit()?;
        self.replica.replace_if(request).await
    }
}
