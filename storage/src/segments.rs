//! The in-memory table of segment digests every engine keeps (see
//! [`crate::digest`]), and the rules both engines use to fill it.
//!
//! Each segment's digest sits behind its own mutex. A write holds the lock
//! of its key's segment from reading the old record to applying the digest
//! change, so the change matches exactly the record it replaced (a retried
//! compare-and-swap adds nothing) and a segment can be recomputed from disk
//! under the same lock without racing writers. 65536 cells of 16 bytes:
//! 1 MiB per engine.
//!
//! A record that fails its checks contributes nothing. When a record that
//! was counted is found damaged later (bit rot), its old contribution is
//! unknowable, so the engine recomputes the whole segment from disk
//! ([`sum_rows`] over the segment's range) as soon as any read or write
//! meets the damage: the segment then differs from the other replicas' and
//! an exchange repairs the key.

use std::sync::{Mutex, MutexGuard, PoisonError};

use crate::digest::{SEGMENTS, item_digest, segment_of};
use crate::keyspace;
use crate::record::{self, RecordError};

/// One digest per segment, each behind its own lock.
#[derive(Debug)]
pub(crate) struct SegmentTable {
    cells: Box<[Mutex<u64>]>,
}

impl Default for SegmentTable {
    fn default() -> Self {
        SegmentTable {
            cells: (0..SEGMENTS).map(|_| Mutex::new(0)).collect(),
        }
    }
}

impl SegmentTable {
    /// Locks the digest of `segment` (clamped to the last segment).
    pub(crate) fn lock(&self, segment: u32) -> MutexGuard<'_, u64> {
        let i = segment.min(SEGMENTS - 1) as usize;
        // A digest is a plain integer, changed in one step: never torn.
        self.cells[i].lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The digests of `count` segments from `first` (fewer past the last).
    pub(crate) fn snapshot(&self, first: u32, count: u32) -> Vec<u64> {
        let end = u64::from(first).saturating_add(u64::from(count));
        let end = end.min(u64::from(SEGMENTS)) as u32;
        (first..end).map(|s| *self.lock(s)).collect()
    }

    /// Replaces every digest (after the engine counted its records, with no
    /// write running). A concurrent [`SegmentTable::snapshot`] may see some
    /// segments before and some after: an exchange then sees a difference
    /// that the next round does not.
    pub(crate) fn replace(&self, sums: &[u64]) {
        for (segment, sum) in (0..SEGMENTS).zip(sums) {
            *self.lock(segment) = *sum;
        }
    }
}

/// Applies a write's change to a locked segment digest: remove the old
/// item digest (if the key was stored and readable), add the new one (if
/// the key is still stored).
pub(crate) fn apply(cell: &mut u64, old: Option<u64>, new: Option<u64>) {
    *cell = cell
        .wrapping_sub(old.unwrap_or(0))
        .wrapping_add(new.unwrap_or(0));
}

/// What one stored object row contributes.
pub(crate) enum Row<'a> {
    /// A readable record: its key, segment and item digest.
    Item {
        key: &'a [u8],
        segment: u32,
        digest: u64,
    },
    /// A record that fails its checks: nothing (its segment is known).
    Corrupt {
        key: &'a [u8],
        segment: u32,
        reason: RecordError,
    },
    /// An on-disk key that does not carry its key's hash: nothing.
    Misplaced,
}

/// Classifies one stored object row.
pub(crate) fn classify<'a>(disk_key: &'a [u8], raw: &[u8]) -> Row<'a> {
    let Some((hash, key)) = keyspace::split(disk_key) else {
        return Row::Misplaced;
    };
    let segment = segment_of(hash);
    match record::decode(raw) {
        Ok(object) => Row::Item {
            key,
            segment,
            digest: item_digest(key, &object),
        },
        Err(reason) => Row::Corrupt {
            key,
            segment,
            reason,
        },
    }
}

/// Sums of a scan of object rows: the digest of every segment (index =
/// segment), the number of rows, and how many of them were unreadable.
pub(crate) struct Sums {
    pub(crate) digests: Vec<u64>,
    pub(crate) rows: u64,
    pub(crate) unreadable: u64,
}

/// Sums the rows of a scan (the whole objects tree at open, or one
/// segment's range).
///
/// # Errors
/// The first error of the scan itself.
pub(crate) fn sum_rows<K, V, E>(
    rows: impl Iterator<Item = std::result::Result<(K, V), E>>,
) -> std::result::Result<Sums, E>
where
    K: AsRef<[u8]>,
    V: AsRef<[u8]>,
{
    let mut sums = Sums {
        digests: vec![0; SEGMENTS as usize],
        rows: 0,
        unreadable: 0,
    };
    for row in rows {
        let (disk_key, raw) = row?;
        sums.rows += 1;
        match classify(disk_key.as_ref(), raw.as_ref()) {
            Row::Item {
                segment, digest, ..
            } => {
                let cell = &mut sums.digests[segment as usize];
                *cell = cell.wrapping_add(digest);
            }
            Row::Corrupt { .. } | Row::Misplaced => sums.unreadable += 1,
        }
    }
    Ok(sums)
}

/// The digest of one segment from a scan of its range.
///
/// # Errors
/// The first error of the scan itself.
pub(crate) fn segment_sum<K, V, E>(
    rows: impl Iterator<Item = std::result::Result<(K, V), E>>,
) -> std::result::Result<u64, E>
where
    K: AsRef<[u8]>,
    V: AsRef<[u8]>,
{
    check_segment(rows).map(|check| check.sum)
}

/// What one segment's records add up to ([`check_segment`]).
pub(crate) struct SegmentCheck {
    /// The segment's digest.
    pub(crate) sum: u64,
    /// Rows met, readable or not.
    pub(crate) rows: u64,
    /// Rows that fail their checks (or lie outside their key's place).
    pub(crate) unreadable: u64,
}

/// The digest of one segment from a scan of its range, with its row
/// counts (the background verification of saved digests; [`segment_sum`]
/// keeps the digest alone).
///
/// # Errors
/// The first error of the scan itself.
pub(crate) fn check_segment<K, V, E>(
    rows: impl Iterator<Item = std::result::Result<(K, V), E>>,
) -> std::result::Result<SegmentCheck, E>
where
    K: AsRef<[u8]>,
    V: AsRef<[u8]>,
{
    let mut check = SegmentCheck {
        sum: 0,
        rows: 0,
        unreadable: 0,
    };
    for row in rows {
        let (disk_key, raw) = row?;
        check.rows += 1;
        match classify(disk_key.as_ref(), raw.as_ref()) {
            Row::Item { digest, .. } => check.sum = check.sum.wrapping_add(digest),
            Row::Corrupt { .. } | Row::Misplaced => check.unreadable += 1,
        }
    }
    Ok(check)
}

/// Stores a recomputed segment digest, logging when it differed (a record
/// counted earlier was damaged since).
pub(crate) fn store_resync(cell: &mut u64, segment: u32, sum: u64) {
    if *cell != sum {
        tracing::warn!(
            segment,
            "segment digest recomputed after a damaged record was found"
        );
        *cell = sum;
    }
}

/// Logs a corrupt record met while listing key digests.
pub(crate) fn log_corrupt(key: &[u8], reason: &RecordError) {
    tracing::error!(
        key = %key.escape_ascii(),
        %reason,
        "corrupt record has no digest; an anti-entropy exchange will repair it"
    );
}
