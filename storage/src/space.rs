//! The free-space reserve: writes that would grow the store are refused
//! while the filesystem holding it has less than a reserve left, so a full
//! disk shows up as a clear refusal ([`Error::DiskFull`]) instead of a sled
//! I/O failure in the middle of a flush.
//!
//! Free space is `statvfs(2)`'s `f_bavail * f_frsize` (what an unprivileged
//! writer may use) of the database directory, asked at most once per
//! [`REFRESH`] and cached in between, so the check costs a lock and a
//! clock read per write. Writes are accepted again by themselves once a
//! refresh sees the space back.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use crate::{Error, Result};

/// How long a measurement of free space is reused before `statvfs` is
/// asked again.
pub(crate) const REFRESH: Duration = Duration::from_millis(250);

/// Free and total bytes of the filesystem holding `path`.
///
/// # Errors
/// The `statvfs(2)` error (missing path, permissions).
pub(crate) fn measure(path: &Path) -> std::io::Result<(u64, u64)> {
    let s = rustix::fs::statvfs(path)?;
    let free = s.f_bavail.saturating_mul(s.f_frsize);
    let total = s.f_blocks.saturating_mul(s.f_frsize);
    Ok((free, total))
}

/// The reserve check of one engine.
#[derive(Debug)]
pub(crate) struct FreeSpace {
    /// Directory whose filesystem is measured.
    path: PathBuf,
    /// Bytes that must stay free; 0 disables the check.
    reserve: u64,
    /// When free space was last measured (`None`: never).
    checked: Mutex<Option<Instant>>,
    /// Free bytes at the last measurement (`u64::MAX` before the first).
    free: AtomicU64,
    /// Whether the last measurement was below the reserve.
    full: AtomicBool,
    /// Test hook: free bytes to report instead of measuring.
    forced: Mutex<Option<u64>>,
}

impl FreeSpace {
    /// The check for the filesystem holding `path`, keeping `reserve` bytes
    /// free.
    ///
    /// # Errors
    /// [`Error::Io`] when the filesystem cannot be measured, or when the
    /// reserve is larger than the whole filesystem (every write would be
    /// refused: a configuration mistake, refused at open).
    pub(crate) fn new(path: &Path, reserve: u64) -> Result<Self> {
        let space = FreeSpace {
            path: path.to_path_buf(),
            reserve,
            checked: Mutex::new(None),
            free: AtomicU64::new(u64::MAX),
            full: AtomicBool::new(false),
            forced: Mutex::new(None),
        };
        if reserve > 0 {
            let (free, total) = measure(path).map_err(|e| {
                Error::Io(format!("measuring free space of {}: {e}", path.display()))
            })?;
            if reserve >= total {
                return Err(Error::Io(format!(
                    "the free-space reserve of {reserve} bytes ([storage] min_free_bytes) is not smaller than the filesystem holding {} ({total} bytes): every write would be refused",
                    path.display()
                )));
            }
            space.record(free);
        }
        Ok(space)
    }

    /// Refuses a write that would grow the store while free space is below
    /// the reserve.
    ///
    /// # Errors
    /// [`Error::DiskFull`] with the free bytes last measured and the
    /// reserve.
    pub(crate) fn check(&self) -> Result<()> {
        if self.reserve == 0 {
            return Ok(());
        }
        self.refresh();
        if self.full.load(Ordering::Acquire) {
            return Err(Error::DiskFull {
                free_bytes: self.free.load(Ordering::Acquire),
                reserve_bytes: self.reserve,
            });
        }
        Ok(())
    }

    /// Whether the last measurement was below the reserve (refreshing it if
    /// it is stale).
    pub(crate) fn is_full(&self) -> bool {
        self.check().is_err()
    }

    /// Free bytes at the last measurement (refreshing it if stale); `None`
    /// when the check is disabled or nothing was measured yet.
    pub(crate) fn free_bytes(&self) -> Option<u64> {
        if self.reserve == 0 {
            // Not checked, but still worth reporting.
            return measure(&self.path).ok().map(|(free, _)| free);
        }
        self.refresh();
        Some(self.free.load(Ordering::Acquire)).filter(|f| *f != u64::MAX)
    }

    /// Test hook: report `free` bytes instead of measuring (`None`: measure
    /// again). Takes effect at once.
    pub(crate) fn force(&self, free: Option<u64>) {
        *self.forced.lock().unwrap_or_else(PoisonError::into_inner) = free;
        *self.checked.lock().unwrap_or_else(PoisonError::into_inner) = None;
        self.refresh();
    }

    /// Measures again if the last measurement is older than [`REFRESH`].
    fn refresh(&self) {
        let now = Instant::now();
        let mut checked = self.checked.lock().unwrap_or_else(PoisonError::into_inner);
        if checked.is_some_and(|at| now.duration_since(at) < REFRESH) {
            return;
        }
        *checked = Some(now);
        let forced = *self.forced.lock().unwrap_or_else(PoisonError::into_inner);
        let measured = match forced {
            Some(free) => Ok(free),
            None => measure(&self.path).map(|(free, _)| free),
        };
        drop(checked);
        match measured {
            Ok(free) => self.record(free),
            // Keep the last figure: a failing statvfs says nothing about
            // space, and sled reports a disk that is really unwell.
            Err(e) => {
                tracing::warn!(path = %self.path.display(), error = %e, "measuring free space failed")
            }
        }
    }

    /// Records a measurement, logging a change of state.
    fn record(&self, free: u64) {
        self.free.store(free, Ordering::Release);
        let full = free < self.reserve;
        if self.full.swap(full, Ordering::AcqRel) != full {
            if full {
                tracing::error!(
                    path = %self.path.display(),
                    free_bytes = free,
                    reserve_bytes = self.reserve,
                    "disk full: free space is below the reserve; writes are refused, reads go on"
                );
            } else {
                tracing::warn!(
                    path = %self.path.display(),
                    free_bytes = free,
                    reserve_bytes = self.reserve,
                    "free space is above the reserve again; writes are accepted"
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn below_the_reserve_writes_are_refused_and_accepted_again() {
        let dir = tempfile::tempdir().expect("tempdir");
        let space = FreeSpace::new(dir.path(), 1 << 20).expect("a filesystem larger than 1 MiB");
        space.force(Some(1 << 19));
        match space.check() {
            Err(Error::DiskFull {
                free_bytes,
                reserve_bytes,
            }) => {
                assert_eq!(free_bytes, 1 << 19);
                assert_eq!(reserve_bytes, 1 << 20);
            }
            other => panic!("expected DiskFull, got {other:?}"),
        }
        assert!(space.is_full());
        assert_eq!(space.free_bytes(), Some(1 << 19));
        space.force(Some(1 << 21));
        assert!(space.check().is_ok());
        assert!(!space.is_full());
    }

    #[test]
    fn a_reserve_larger_than_the_filesystem_is_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let e = FreeSpace::new(dir.path(), u64::MAX).expect_err("no filesystem is that large");
        assert!(e.to_string().contains("min_free_bytes"), "{e}");
    }

    #[test]
    fn a_zero_reserve_never_refuses() {
        let dir = tempfile::tempdir().expect("tempdir");
        let space = FreeSpace::new(dir.path(), 0).expect("no measurement needed");
        space.force(Some(0));
        assert!(space.check().is_ok());
    }
}
