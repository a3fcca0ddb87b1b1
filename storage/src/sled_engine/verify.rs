//! The background verification of digests loaded from a clean close (see
//! [`crate::clean_close`]): a walk over every segment that recomputes its
//! digest from the records under the segment's lock and corrects it where
//! it differs. Paced ([`RECORDS_PER_SEC`]) so that it does not take a core
//! from the requests the node serves meanwhile; it stops when the engine
//! closes.

use std::time::{Duration, Instant};

use crate::digest::{SEGMENTS, segment_hashes};
use crate::keyspace;
use crate::segments;
use crate::sled_db::{SavedDigests, Shared};

/// Records the walk reads per second at most: half of what one core of the
/// benchmark machine counts at open (about 180,000 a second), so 455,000
/// records take about 4.5 s in the background, a hundred million about
/// 17 minutes.
pub(crate) const RECORDS_PER_SEC: u64 = 100_000;

/// The walk sleeps once it is this far ahead of its pace.
const SLEEP_AHEAD: Duration = Duration::from_millis(20);

/// Walks every segment once and records the outcome in
/// `shared.verification` ([`SavedDigests::Matched`] or
/// [`SavedDigests::Differed`]); leaves it at [`SavedDigests::Verifying`]
/// when the engine closed first or storage failed (then a reopen counted
/// and set [`SavedDigests::Counted`]).
pub(crate) fn run(shared: &Shared) {
    let started = Instant::now();
    let mut rows = 0u64;
    let mut corrected = 0u64;
    let mut unreadable = 0u64;
    for segment in 0..SEGMENTS {
        if shared.closing.load(std::sync::atomic::Ordering::Acquire) {
            return;
        }
        let (from, to) = segment_hashes(segment);
        let Some(range) = keyspace::hash_range(from, to) else {
            continue;
        };
        // The read guard, then the segment's lock (the engine's order):
        // no write of this segment lands between the scan and the fix.
        let checked = shared.with_trees(|t| {
            let mut cell = shared.segments.lock(segment);
            let check = segments::check_segment(t.objects.range(range))
                .map_err(|e| shared.fail("verify digests", &e))?;
            let differed = *cell != check.sum;
            if differed {
                *cell = check.sum;
            }
            Ok((check, differed))
        });
        let Ok((check, differed)) = checked else {
            // Closed or failed: a reopen after a failure counts anyway.
            return;
        };
        rows += check.rows;
        unreadable += check.unreadable;
        if differed {
            corrected += 1;
            tracing::warn!(
                segment,
                "a digest saved at the last close differed from the records; corrected"
            );
        }
        if check.unreadable > 0 {
            tracing::error!(
                segment,
                records = check.unreadable,
                "records fail their checks; they have no digest until repaired"
            );
        }
        // Pace: `rows` should have taken rows / RECORDS_PER_SEC seconds.
        let due = Duration::from_secs_f64(rows as f64 / RECORDS_PER_SEC as f64);
        let elapsed = started.elapsed();
        if due > elapsed + SLEEP_AHEAD {
            std::thread::sleep(due - elapsed);
        }
    }
    let outcome = if corrected == 0 && unreadable == 0 {
        SavedDigests::Matched
    } else {
        SavedDigests::Differed
    };
    {
        let mut state = shared.verification();
        // A reopen meanwhile counted: that is exact, keep it.
        if *state == SavedDigests::Verifying {
            *state = outcome;
        }
    }
    tracing::info!(
        rows,
        corrected,
        unreadable,
        elapsed_ms = started.elapsed().as_millis() as u64,
        ?outcome,
        "storage verified the digests saved at its last clean close"
    );
}
