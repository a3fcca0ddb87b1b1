//! The open sled database of a [`crate::SledEngine`], and what happens when
//! it fails.
//!
//! sled latches I/O errors: after one, every later operation on the same
//! `Db` fails. So the first sled error marks the engine failed, and the next
//! operation drops the database and opens it again (at most once per
//! `reopen_interval`); until that succeeds, operations return
//! [`Error::Io`]. Operations run under a read guard of the database; the
//! reopen takes the write guard, so it waits for operations in flight.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock, RwLockReadGuard};
use std::time::{Duration, Instant};

use crate::clean_close::{self, Saved};
use crate::digest::SEGMENTS;
use crate::group_commit::GroupCommit;
use crate::segments::{self, SegmentTable};
use crate::{Error, Result};

/// How long opening waits for the directory lock that a just-closed handle
/// may still hold.
const LOCK_RETRY: Duration = Duration::from_secs(2);

/// Name of the tree of objects (hash-prefixed key -> record).
const OBJECTS: &str = "objects";
/// Name of the tree of metadata (name -> framed value).
const META: &str = "meta";
/// Name of the tree of quarantined records (user key -> raw bytes).
const CORRUPT: &str = "corrupt";
/// Name of the tree of hints (owner + hash-prefixed key -> hint record).
const HINTS: &str = "hints";
/// Name of the tree that holds, between a clean close and the next open,
/// the counts and segment digests ([`crate::clean_close`]): one row,
/// [`CLEAN_ROW`].
const CLEAN: &str = "clean_close";
/// The key of that row.
const CLEAN_ROW: &[u8] = b"counted";

/// One open database and its trees (each a cheap handle into it).
#[derive(Debug)]
pub(crate) struct Trees {
    pub(crate) db: sled::Db,
    pub(crate) objects: sled::Tree,
    pub(crate) meta: sled::Tree,
    pub(crate) corrupt: sled::Tree,
    pub(crate) hints: sled::Tree,
    clean: sled::Tree,
}

impl Trees {
    fn open(path: &Path, cache_capacity_bytes: u64) -> std::result::Result<Self, sled::Error> {
        let config = sled::Config::new()
            .path(path)
            .cache_capacity(cache_capacity_bytes)
            // Our flusher is the only one: it decides when writes are durable.
            .flush_every_ms(None);
        // sled's I/O threads may hold the directory's lock for a moment after
        // the previous handle was dropped (a restart in the same process, or
        // right after the previous process exited): retry that briefly.
        let deadline = Instant::now() + LOCK_RETRY;
        let db = loop {
            match config.open() {
                // sled reports a held lock as `Other` with this message
                // (sled 0.34 config.rs `try_lock`).
                Err(sled::Error::Io(e))
                    if e.to_string().contains("could not acquire lock")
                        && Instant::now() < deadline =>
                {
                    std::thread::sleep(Duration::from_millis(10));
                }
                other => break other?,
            }
        };
        Ok(Trees {
            objects: db.open_tree(OBJECTS)?,
            meta: db.open_tree(META)?,
            corrupt: db.open_tree(CORRUPT)?,
            hints: db.open_tree(HINTS)?,
            clean: db.open_tree(CLEAN)?,
            db,
        })
    }

    /// Counts objects and hints and sums the segment digests: one scan of
    /// the objects tree (the only open-time cost that grows with the data).
    fn count(&self) -> std::result::Result<Counted, sled::Error> {
        let started = Instant::now();
        let sums = segments::sum_rows(self.objects.iter())?;
        let hints = self.hints.len() as u64;
        tracing::info!(
            keys = sums.rows,
            hints,
            elapsed_ms = started.elapsed().as_millis() as u64,
            "storage counted its records and built its digests"
        );
        if sums.unreadable > 0 {
            tracing::error!(
                records = sums.unreadable,
                "records fail their checks; they have no digest until repaired"
            );
        }
        Ok(Counted {
            keys: sums.rows,
            hints,
            digests: sums.digests,
        })
    }

    /// The object count and digests a clean close saved, removed from
    /// disk (the removal flushed before this returns, so a crash after any
    /// later write cannot bring them back), with the hints counted; else
    /// everything counted ([`Trees::count`]). The flag says which.
    fn take_saved_or_count(&self) -> std::result::Result<(Counted, bool), sled::Error> {
        let Some(row) = self.clean.remove(CLEAN_ROW)? else {
            return Ok((self.count()?, false));
        };
        self.db.flush()?;
        match clean_close::decode(&row) {
            Ok(Saved { keys, digests }) => {
                let hints = self.hints.len() as u64;
                tracing::info!(
                    keys,
                    hints,
                    "storage loaded the count and digests saved at its last clean close; \
                     verifying them in the background"
                );
                Ok((
                    Counted {
                        keys,
                        hints,
                        digests,
                    },
                    true,
                ))
            }
            Err(reason) => {
                tracing::warn!(%reason, "the digests saved at the last close are unreadable; counting");
                Ok((self.count()?, false))
            }
        }
    }

    /// Saves `saved` for the next open and flushes. Only with no write
    /// running and every earlier write applied (the caller holds the write
    /// guard of the database, after the final flush).
    fn save(&self, saved: &Saved) -> std::result::Result<(), sled::Error> {
        self.clean.insert(CLEAN_ROW, clean_close::encode(saved))?;
        self.db.flush()?;
        Ok(())
    }
}

/// What [`Trees::count`] found.
struct Counted {
    keys: u64,
    hints: u64,
    digests: Vec<u64>,
}

/// Everything the engine and its flusher thread share.
#[derive(Debug)]
pub(crate) struct Shared {
    /// Directory of the database, for reopening.
    path: PathBuf,
    /// sled's page cache size, in bytes.
    cache_capacity_bytes: u64,
    /// Minimum time between two reopen attempts.
    reopen_interval: Duration,
    /// The open database; `None` after a failed reopen or after close.
    trees: RwLock<Option<Trees>>,
    /// Set by the first sled error; cleared by a successful reopen.
    failed: AtomicBool,
    /// When the last reopen was attempted (serializes reopen attempts).
    last_reopen: Mutex<Option<Instant>>,
    /// Writers and the flusher meet here.
    pub(crate) commit: Arc<GroupCommit>,
    /// Number of objects (counted at open or loaded from the last clean
    /// close, maintained by inserts/removals).
    pub(crate) keys: AtomicU64,
    /// Number of hints (counted at open, maintained like `keys`).
    pub(crate) hints: AtomicU64,
    /// Segment digests of the objects (summed at open or loaded from the
    /// last clean close, maintained by every
    /// write under the segment's lock).
    pub(crate) segments: SegmentTable,
    /// Corrupt records moved to the `corrupt` tree.
    pub(crate) quarantined: AtomicU64,
    /// Successful reopens after a failure.
    pub(crate) reopens: AtomicU64,
    /// Where the count and digests came from and whether they are known
    /// to match the records: what decides if a close may save them.
    pub(crate) verification: Mutex<SavedDigests>,
    /// Set when the engine starts closing: the verifying walk stops, and a
    /// failed engine is not reopened any more.
    pub(crate) closing: AtomicBool,
}

/// Where the sled engine's object count and segment digests came from and
/// how far they are known to match its records
/// ([`crate::SledEngine::saved_digests`]): an open loads them from the last
/// clean close when it can, and verifies them in the background.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SavedDigests {
    /// Counted from the records (at open or at a reopen): exact.
    Counted,
    /// Loaded from a clean close; the background walk has not finished.
    Verifying,
    /// Loaded, and the walk found every segment's digest as loaded and no
    /// unreadable record.
    Matched,
    /// Loaded, and the walk corrected a digest or met an unreadable record
    /// (the files changed while stopped, or damage): the count may be off,
    /// so the next close saves nothing and the next open counts.
    Differed,
}

impl SavedDigests {
    /// Whether a close may save the count and digests.
    pub(crate) fn may_save(self) -> bool {
        matches!(self, SavedDigests::Counted | SavedDigests::Matched)
    }
}

impl Shared {
    /// Opens the database at `path`.
    ///
    /// # Errors
    /// [`Error::Damaged`] when sled reports corruption; [`Error::Io`] when
    /// sled cannot open or create it otherwise.
    pub(crate) fn open(
        path: PathBuf,
        cache_capacity_bytes: u64,
        reopen_interval: Duration,
        commit: GroupCommit,
    ) -> Result<Self> {
        let trees = Trees::open(&path, cache_capacity_bytes).map_err(|e| match e {
            sled::Error::Corruption { .. } => Error::Damaged {
                path: path.clone(),
                detail: e.to_string(),
            },
            e => Error::sled("open", &e),
        })?;
        let (counted, loaded_saved) = trees
            .take_saved_or_count()
            .map_err(|e| Error::sled("count", &e))?;
        let segments = SegmentTable::default();
        segments.replace(&counted.digests);
        Ok(Shared {
            path,
            cache_capacity_bytes,
            reopen_interval,
            trees: RwLock::new(Some(trees)),
            failed: AtomicBool::new(false),
            last_reopen: Mutex::new(None),
            commit: Arc::new(commit),
            keys: AtomicU64::new(counted.keys),
            hints: AtomicU64::new(counted.hints),
            segments,
            quarantined: AtomicU64::new(0),
            reopens: AtomicU64::new(0),
            verification: Mutex::new(if loaded_saved {
                SavedDigests::Verifying
            } else {
                SavedDigests::Counted
            }),
            closing: AtomicBool::new(false),
        })
    }

    /// Whether the engine is failed and waiting to reopen.
    pub(crate) fn is_failed(&self) -> bool {
        self.failed.load(Ordering::Acquire)
    }

    /// Runs `op` on the open database, reopening it first if an earlier
    /// error failed it. A sled error from `op` fails the engine.
    ///
    /// # Errors
    /// [`Error::Unavailable`] when the database is failed and cannot be
    /// reopened yet, or is closed (nothing was applied); otherwise whatever
    /// `op` returns.
    pub(crate) fn with_trees<T>(&self, op: impl FnOnce(&Trees) -> Result<T>) -> Result<T> {
        self.reopen_if_failed()?;
        let guard = self.read();
        let trees = guard
            .as_ref()
            .ok_or_else(|| Error::Unavailable("database is closed or failed to reopen".into()))?;
        op(trees)
    }

    /// The raw read guard, for the flusher and for scans.
    pub(crate) fn read(&self) -> RwLockReadGuard<'_, Option<Trees>> {
        self.trees.read().unwrap_or_else(PoisonError::into_inner)
    }

    /// Converts a sled error into [`Error::Io`] and fails the engine: sled
    /// latched it, so only a reopen can recover.
    pub(crate) fn fail(&self, op: &str, err: &sled::Error) -> Error {
        if !self.failed.swap(true, Ordering::AcqRel) {
            tracing::error!(%err, op, "sled failed; the database will be reopened");
        }
        Error::sled(op, err)
    }

    /// Test hook: behaves as if sled had just returned an I/O error.
    pub(crate) fn fail_for_test(&self) {
        self.failed.store(true, Ordering::Release);
    }

    /// Drops and reopens the database if the engine is failed and the last
    /// attempt is old enough.
    fn reopen_if_failed(&self) -> Result<()> {
        if !self.is_failed() {
            return Ok(());
        }
        if self.closing.load(Ordering::Acquire) {
            return Err(Error::Unavailable("database is closed".into()));
        }
        let mut last = self
            .last_reopen
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if !self.is_failed() {
            return Ok(()); // Another thread reopened it while we waited.
        }
        if let Some(at) = *last {
            let wait = self.reopen_interval.saturating_sub(at.elapsed());
            if !wait.is_zero() {
                return Err(Error::Unavailable(format!(
                    "storage failed; next reopen attempt in {} ms",
                    wait.as_millis()
                )));
            }
        }
        *last = Some(Instant::now());
        let mut slot = self.trees.write().unwrap_or_else(PoisonError::into_inner);
        // The old database must be gone first: sled holds a file lock.
        // Scans still holding its trees keep it alive; then the open fails
        // and the next attempt comes one interval later.
        if let Some(old) = slot.take() {
            drop_aside(old);
        }
        self.commit.new_epoch("sled I/O error");
        // Writes that were applied but never flushed are gone: recount.
        match Trees::open(&self.path, self.cache_capacity_bytes)
            .and_then(|trees| trees.count().map(|counted| (trees, counted)))
        {
            Ok((trees, counted)) => {
                self.keys.store(counted.keys, Ordering::Relaxed);
                self.hints.store(counted.hints, Ordering::Relaxed);
                // No write runs (they hold the read guard this holds
                // for writing), so the table matches the trees.
                self.segments.replace(&counted.digests);
                *self.verification() = SavedDigests::Counted;
                *slot = Some(trees);
                self.failed.store(false, Ordering::Release);
                self.reopens.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(path = %self.path.display(), "sled database reopened after a failure");
                Ok(())
            }
            Err(e) => {
                tracing::error!(err = %e, "reopening the sled database failed");
                Err(Error::Unavailable(format!(
                    "reopening the database failed: {e}"
                )))
            }
        }
    }

    /// The verification state (a plain enum: never torn by a panic).
    pub(crate) fn verification(&self) -> std::sync::MutexGuard<'_, SavedDigests> {
        self.verification
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Closes the database (after the flusher's final flush, with
    /// `closing` set); later calls fail with [`Error::Unavailable`] and
    /// nothing reopens it. With `save`,
    /// unless the engine is failed or its digests are not known to match
    /// the records ([`SavedDigests::may_save`]), first saves the object
    /// count and segment digests for the next open
    /// ([`crate::clean_close`]): under the write guard no write runs, so
    /// they match the trees exactly. A failed save is logged; the next open
    /// then counts.
    pub(crate) fn close(&self, save: bool) {
        let mut slot = self.trees.write().unwrap_or_else(PoisonError::into_inner);
        let verification = *self.verification();
        if let Some(trees) = slot.as_ref()
            && save
            && !self.is_failed()
        {
            if verification.may_save() {
                let saved = Saved {
                    keys: self.keys.load(Ordering::Relaxed),
                    digests: self.segments.snapshot(0, SEGMENTS),
                };
                match trees.save(&saved) {
                    Ok(()) => tracing::info!(
                        keys = saved.keys,
                        "storage saved its count and digests for the next open"
                    ),
                    Err(e) => tracing::warn!(
                        err = %e,
                        "saving the count and digests at close failed; the next open counts"
                    ),
                }
            } else {
                tracing::info!(
                    ?verification,
                    "the digests are not verified; the next open counts every record"
                );
            }
        }
        *slot = None;
    }
}

/// How long a reopen waits for the failed database to be dropped.
const DROP_WAIT: Duration = Duration::from_secs(2);

/// Drops a failed database on a thread of its own and waits at most
/// [`DROP_WAIT`] for it. sled's drop flushes, and after an I/O failure
/// that flush can wait forever (seen when the process ran out of file
/// descriptors): dropped here under the trees' write lock, it froze the
/// node, since the group-commit flusher and every request wait for that
/// lock. If the drop is still running, its file lock makes the reopen fail
/// and the next attempt comes one reopen interval later.
fn drop_aside(old: Trees) {
    let (done, dropped) = std::sync::mpsc::channel::<()>();
    let spawned = std::thread::Builder::new()
        .name("sled-drop".into())
        .spawn(move || {
            drop(old);
            let _ = done.send(());
        });
    match spawned {
        Ok(_) => {
            if dropped.recv_timeout(DROP_WAIT).is_err() {
                tracing::warn!(
                    wait_ms = DROP_WAIT.as_millis() as u64,
                    "the failed sled database is still being dropped; reopening later"
                );
            }
        }
        Err(e) => tracing::error!(error = %e, "no thread to drop the failed sled database on"),
    }
}
