//! What a client keeps between runs (kvctl is one process per call): the
//! last ring answer, the endpoints it found dead and when, and the measured
//! handshake time, in one JSON file. Bounded, versioned, and ignored when
//! it is unreadable, of another format, for other endpoints, or stale: the
//! cache only saves a round trip and a dead node's timeout, so a bad one is
//! never an error.

use std::path::Path;
use std::time::{Duration, Instant};

use kv_wire::RingReport;
use serde::{Deserialize, Serialize};
use tracing::debug;

use crate::known::Known;
use crate::routing::{DEAD_FOR, Routing, wall_ms};

/// The format this release writes and reads.
const FORMAT: u32 = 1;

/// Largest cache file read, bytes.
const MAX_BYTES: u64 = 8 << 20;

/// A ring saved longer ago than this is not used (the first answer would
/// tell the client to refresh it anyway).
const RING_TTL: Duration = Duration::from_secs(600);

#[derive(Serialize, Deserialize)]
struct CacheFile {
    format: u32,
    /// When it was written, ms since the Unix epoch.
    saved_at_ms: u64,
    /// The endpoints the client was given (a cache for other endpoints is
    /// another cluster's).
    endpoints: Vec<String>,
    /// The last ring answer, and its age when saved (ms).
    ring: Option<(RingReport, u64)>,
    /// Endpoints that failed to connect, with when (ms since the epoch).
    dead: Vec<(String, u64)>,
    /// Measured handshake time, ms.
    handshake_ms: Option<f64>,
}

/// Seeds `routing` from the cache at `path`, if it is usable.
pub(crate) fn load(path: &Path, endpoints: &[String], routing: &Routing) {
    let Some(file) = read(path) else {
        return;
    };
    if file.format != FORMAT || file.endpoints != endpoints {
        debug!(path = %path.display(), "the client cache is for another format or cluster");
        return;
    }
    let now_ms = wall_ms();
    let age = |at_ms: u64| Duration::from_millis(now_ms.saturating_sub(at_ms));
    let saved_age = age(file.saved_at_ms);
    if let Some((report, age_ms)) = file.ring {
        let ring_age = saved_age + Duration::from_millis(age_ms);
        if ring_age <= RING_TTL {
            match Known::from_report(report, ring_age) {
                Ok(known) => routing.learn(known),
                Err(e) => debug!(error = %e, "the cached ring is unusable"),
            }
        }
    }
    let now = Instant::now();
    for (name, failed_ms) in file.dead {
        let failed = age(failed_ms);
        if failed < DEAD_FOR
            && let Some(at) = now.checked_sub(failed)
        {
            routing.mark_dead(&name, at);
        }
    }
    if let Some(ms) = file.handshake_ms {
        routing.set_handshake_ms(ms);
    }
}

fn read(path: &Path) -> Option<CacheFile> {
    let meta = std::fs::metadata(path).ok()?;
    if meta.len() > MAX_BYTES {
        debug!(path = %path.display(), "the client cache is too large; ignored");
        return None;
    }
    let bytes = std::fs::read(path).ok()?;
    match serde_json::from_slice(&bytes) {
        Ok(file) => Some(file),
        Err(e) => {
            debug!(path = %path.display(), error = %e, "the client cache is unreadable; ignored");
            None
        }
    }
}

/// Writes what `routing` knows to `path` (through a temporary file and a
/// rename, so a reader never sees half a file).
///
/// # Errors
/// When the directory or the file cannot be written.
pub(crate) fn save(path: &Path, endpoints: &[String], routing: &Routing) -> std::io::Result<()> {
    let now_ms = wall_ms();
    let dead = routing
        .dead()
        .into_iter()
        .map(|(name, at)| {
            let ago = u64::try_from(at.elapsed().as_millis()).unwrap_or(u64::MAX);
            (name, now_ms.saturating_sub(ago))
        })
        .collect();
    let file = CacheFile {
        format: FORMAT,
        saved_at_ms: now_ms,
        endpoints: endpoints.to_vec(),
        ring: routing
            .known_report()
            .map(|(r, age)| (r, u64::try_from(age.as_millis()).unwrap_or(u64::MAX))),
        dead,
        handshake_ms: routing.handshake_ms(),
    };
    let bytes = serde_json::to_vec(&file).map_err(std::io::Error::other)?;
    if let Some(dir) = path.parent()
        && !dir.as_os_str().is_empty()
    {
        std::fs::create_dir_all(dir)?;
    }
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(&tmp, path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dead_endpoints_survive_a_round_trip_and_bad_files_are_ignored() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/cache.json");
        let endpoints = vec!["127.0.0.1:7101".to_string()];
        let routing = Routing::new(None, 0.0);
        routing.mark_dead("127.0.0.1:7103", Instant::now());
        routing.handshake(Duration::from_millis(4));
        save(&path, &endpoints, &routing).unwrap();

        let again = Routing::new(None, 0.0);
        load(&path, &endpoints, &again);
        assert!(again.is_dead("127.0.0.1:7103"));
        assert_eq!(again.handshake_ms(), Some(4.0));

        // Another cluster's cache is not used.
        let other = Routing::new(None, 0.0);
        load(&path, &["10.0.0.1:7000".to_string()], &other);
        assert!(!other.is_dead("127.0.0.1:7103"));

        // Garbage, and a file too large, are ignored.
        std::fs::write(&path, b"{not json").unwrap();
        let fresh = Routing::new(None, 0.0);
        load(&path, &endpoints, &fresh);
        assert!(!fresh.is_dead("127.0.0.1:7103"));
        let big = std::fs::File::create(&path).unwrap();
        big.set_len(MAX_BYTES + 1).unwrap();
        load(&path, &endpoints, &fresh);
        assert!(fresh.known_report().is_none());
    }
}
