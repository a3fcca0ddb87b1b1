//! The group-commit batching figure. Its own test binary, so that it runs
//! alone (cargo runs test binaries one after another) and measures batching
//! rather than competition with other tests for the machine's two cores.

// Tests may unwrap: a panic here is a failed assertion (clippy.toml only
// covers `#[test]` functions, not the helpers of integration tests).
#![allow(clippy::unwrap_used)]

mod common;

use std::time::Instant;

use common::blind;
use kv_storage::{SledEngine, SledSettings, Storage};

#[test]
fn group_commit_shares_flushes_among_concurrent_writers() {
    const WRITERS: usize = 32;
    const EACH: usize = 50;
    let dir = tempfile::tempdir().unwrap();
    let s = SledEngine::open(dir.path(), SledSettings::default()).unwrap();
    let start = Instant::now();
    std::thread::scope(|scope| {
        for t in 0..WRITERS {
            let s = &s;
            scope.spawn(move || {
                for i in 0..EACH {
                    let key = format!("w{t}-{i}");
                    s.merge(key.as_bytes(), &blind(t, key.as_bytes())).unwrap();
                }
            });
        }
    });
    let elapsed = start.elapsed();
    let stats = s.stats();
    let writes = (WRITERS * EACH) as u64;
    println!(
        "group commit: {writes} acknowledged writes, {} flushes, {:.1} writes per flush, {elapsed:?}",
        stats.flushes, stats.writes_per_flush
    );
    assert_eq!(stats.writes, writes);
    assert_eq!(stats.keys, writes);
    assert!(
        stats.flushes * 4 <= writes,
        "expected far fewer flushes than writes, got {} for {writes}",
        stats.flushes
    );
    assert!(stats.writes_per_flush >= 4.0);
}
