//! Tests only the sled engine can take: restarts, crashes, durability modes
//! and recovery from I/O failures.

// Tests may unwrap: a panic here is a failed assertion (clippy.toml only
// covers `#[test]` functions, not the helpers of integration tests).
#![allow(clippy::unwrap_used)]

mod common;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use common::{blind, block_on, overwrite};
use kv_storage::{Error, Hint, SEGMENTS, SavedDigests, SledEngine, SledSettings, Storage};
use kv_types::NodeId;

fn open(path: &Path) -> SledEngine {
    SledEngine::open(path, SledSettings::default()).unwrap()
}

#[test]
fn data_survives_close_and_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let obj = blind(1, b"v");
    {
        let s = open(dir.path());
        s.merge(b"k", &obj).unwrap();
        s.put_meta("incarnation", b"7").unwrap();
        s.close().unwrap();
    }
    {
        // Dropping without close also flushes and releases the directory.
        let s = open(dir.path());
        assert_eq!(s.get(b"k").unwrap(), Some(obj.clone()));
        assert_eq!(s.stats().keys, 1, "the key count survives a close");
        s.merge(b"k2", &obj).unwrap();
    }
    let s = open(dir.path());
    assert_eq!(s.get(b"k2").unwrap(), Some(obj));
    assert_eq!(s.get_meta("incarnation").unwrap(), Some(b"7".to_vec()));
    assert!(s.stats().bytes_on_disk > 0);
}

fn node(id: &str) -> NodeId {
    NodeId::new(id).unwrap()
}

fn hints(s: &SledEngine) -> Vec<Hint> {
    s.hints().map(Result::unwrap).collect()
}

#[test]
fn hints_and_digests_survive_close_and_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let (digests, held) = {
        let s = open(dir.path());
        for i in 0..20u8 {
            s.merge(&[i], &blind(usize::from(i % 3), b"v")).unwrap();
        }
        s.put_hint(&node("node2"), b"a", &blind(1, b"x"), 10)
            .unwrap();
        s.put_hint(&node("node3"), b"b", &blind(1, b"y"), 20)
            .unwrap();
        s.put_hint(&node("node3"), b"c", &blind(1, b"z"), 30)
            .unwrap();
        s.corrupt_hint_for_test(&node("node3"), b"c").unwrap();
        let digests = s.segment_digests(0, SEGMENTS);
        let held: Vec<Hint> = s.hints().filter_map(Result::ok).collect();
        s.close().unwrap();
        (digests, held)
    };
    let s = open(dir.path());
    assert_eq!(s.hint_count(), 3, "the hint count is rebuilt at open");
    assert_eq!(s.hints().filter_map(Result::ok).collect::<Vec<_>>(), held);
    assert_eq!(s.hints().filter(Result::is_err).count(), 1);
    assert_eq!(
        s.segment_digests(0, SEGMENTS),
        digests,
        "digests rebuilt at open"
    );
    assert!(
        s.remove_hint_if(&node("node2"), b"a", &held[0].object)
            .unwrap()
    );
    drop(s);
    let s = open(dir.path());
    assert_eq!(s.hint_count(), 2);
    assert!(s.hints_for(&node("node2")).next().is_none());
}

#[test]
fn a_reopen_after_failure_recounts_hints_and_digests() {
    let dir = tempfile::tempdir().unwrap();
    let s = open(dir.path());
    s.merge(b"k", &blind(1, b"v")).unwrap();
    s.put_hint(&node("node2"), b"k", &blind(1, b"v"), 1)
        .unwrap();
    let digests = s.segment_digests(0, SEGMENTS);
    s.fail_for_test();
    s.merge(b"k2", &blind(1, b"v")).unwrap();
    assert_eq!(s.reopens(), 1);
    s.remove_if(b"k2", &blind(1, b"v")).unwrap();
    assert_eq!(s.segment_digests(0, SEGMENTS), digests);
    assert_eq!((s.hint_count(), hints(&s).len()), (1, 1));
}

/// The writes of the tests of saved digests below: keys 0..40 from three
/// actors, every fifth removed, and two hints.
fn write_some(s: &SledEngine) {
    for i in 0..40u8 {
        s.merge(&[b'k', i], &blind(usize::from(i % 3), b"v"))
            .unwrap();
    }
    for i in (0..40u8).step_by(5) {
        let stored = s.get(&[b'k', i]).unwrap().unwrap();
        assert!(s.remove_if(&[b'k', i], &stored).unwrap());
    }
    s.put_hint(&node("node2"), b"a", &blind(1, b"x"), 10)
        .unwrap();
    s.put_hint(&node("node3"), b"b", &blind(1, b"y"), 20)
        .unwrap();
}

/// What a reopened engine must agree on: keys, hints, every digest.
fn counted(s: &SledEngine) -> (u64, u64, Vec<u64>) {
    (
        s.stats().keys,
        s.hint_count(),
        s.segment_digests(0, SEGMENTS),
    )
}

/// [`write_some`] in a new engine at `path`, closed cleanly (the count and
/// digests saved): its figures.
fn written_and_closed(path: &Path) -> (u64, u64, Vec<u64>) {
    let s = open(path);
    write_some(&s);
    let figures = counted(&s);
    s.close().unwrap();
    figures
}

/// Whether the open loaded what a clean close saved.
fn loaded(s: &SledEngine) -> bool {
    s.saved_digests() != SavedDigests::Counted
}

/// Waits for the background walk over loaded digests to finish.
fn verified(s: &SledEngine) -> SavedDigests {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        match s.saved_digests() {
            SavedDigests::Verifying if Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(10));
            }
            other => return other,
        }
    }
}

/// `sled::open` on a directory an engine of this process just closed
/// (sled's threads may hold its lock a moment longer).
fn sled_open(path: &Path) -> sled::Db {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        match sled::open(path) {
            Ok(db) => return db,
            Err(e) if Instant::now() < deadline => {
                println!("sled::open: {e}; retrying");
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(e) => panic!("sled::open: {e}"),
        }
    }
}

#[test]
fn a_clean_close_saves_the_count_and_digests_that_the_next_open_loads() {
    let dir = tempfile::tempdir().unwrap();
    let s = open(dir.path());
    assert_eq!(
        s.saved_digests(),
        SavedDigests::Counted,
        "nothing saved yet"
    );
    write_some(&s);
    let before = counted(&s);
    assert_eq!((before.0, before.1), (32, 2));
    s.close().unwrap();

    let s = open(dir.path());
    assert!(loaded(&s));
    assert_eq!(counted(&s), before);
    assert_eq!(verified(&s), SavedDigests::Matched);
    // The same figures when counted from the records.
    s.close_without_saving().unwrap();
    let s = open(dir.path());
    assert!(!loaded(&s), "the open consumed the saved row");
    assert_eq!(counted(&s), before);
    // Writes after a loaded open keep the figures exact for the next one.
    s.merge(b"later", &blind(2, b"w")).unwrap();
    let after = counted(&s);
    drop(s); // dropping closes cleanly too
    let s = open(dir.path());
    assert!(loaded(&s));
    assert_eq!(counted(&s), after);
    assert_eq!(verified(&s), SavedDigests::Matched);
    s.close_without_saving().unwrap();
    assert_eq!(counted(&open(dir.path())), after);
}

#[test]
fn a_reopen_after_a_failure_makes_loaded_digests_exact() {
    let dir = tempfile::tempdir().unwrap();
    written_and_closed(dir.path());
    let s = open(dir.path());
    assert!(loaded(&s));
    // A reopen after a failure counts: exact, so a close may save again.
    s.fail_for_test();
    s.merge(b"after-failure", &blind(1, b"v")).unwrap();
    assert_eq!(s.reopens(), 1);
    assert_eq!(s.saved_digests(), SavedDigests::Counted);
    s.close().unwrap();
    assert!(loaded(&open(dir.path())));
}

#[test]
fn a_closed_engine_refuses_calls_and_never_reopens() {
    let dir = tempfile::tempdir().unwrap();
    let s = open(dir.path());
    s.merge(b"k", &blind(1, b"v")).unwrap();
    s.close().unwrap();
    s.fail_for_test();
    assert!(matches!(s.get(b"k"), Err(Error::Unavailable(_))));
    assert!(matches!(
        s.merge(b"k2", &blind(1, b"v")),
        Err(Error::Unavailable(_))
    ));
    assert_eq!(s.reopens(), 0);
    s.close().unwrap(); // a second close does nothing
    drop(s);
    let s = open(dir.path());
    assert!(loaded(&s));
    assert_eq!(s.stats().keys, 1);
    assert_eq!(verified(&s), SavedDigests::Matched);
}

#[test]
fn saved_digests_are_not_reused_after_a_crash() {
    if let Some(dir) = std::env::var_os(CHILD_DIR) {
        // Opens on the row the parent's clean close saved, writes, dies.
        let s = open(Path::new(&dir));
        assert!(loaded(&s), "the child must open on the saved row");
        for i in 0..CRASH_KEYS {
            s.merge(&crash_key(i), &blind(1, &crash_key(i))).unwrap();
        }
        std::process::abort();
    }
    let dir = tempfile::tempdir().unwrap();
    let saved = written_and_closed(dir.path());
    run_child("saved_digests_are_not_reused_after_a_crash", dir.path());
    let s = open(dir.path());
    assert!(!loaded(&s), "the crashed open consumed the row");
    let now = counted(&s);
    assert_eq!(
        (now.0, now.1),
        (saved.0 + CRASH_KEYS as u64, saved.1),
        "the child's keys are counted"
    );
    assert_ne!(now.2, saved.2);
    s.close_without_saving().unwrap();
    assert_eq!(counted(&open(dir.path())), now);
}

#[test]
fn a_record_damaged_while_stopped_is_found_by_the_walk() {
    let dir = tempfile::tempdir().unwrap();
    let before = written_and_closed(dir.path());
    // Bit rot while stopped: flip one byte in the middle of a record.
    let damaged = {
        let db = sled_open(dir.path());
        let objects = db.open_tree("objects").unwrap();
        let (disk_key, raw) = objects.iter().next().unwrap().unwrap();
        let mut raw = raw.to_vec();
        let i = raw.len() / 2;
        raw[i] ^= 0xFF;
        objects.insert(&disk_key, raw).unwrap();
        db.flush().unwrap();
        disk_key.to_vec()
    };
    let s = open(dir.path());
    assert!(loaded(&s));
    assert_eq!(verified(&s), SavedDigests::Differed);
    let walked = s.segment_digests(0, SEGMENTS);
    assert_ne!(
        walked, before.2,
        "the damaged record left its segment's digest"
    );
    let user_key = &damaged[8..];
    assert!(matches!(s.get(user_key), Err(Error::Corrupt { .. })));
    // The walk's digests are what a count finds; this close saves
    // nothing (the count may be off), so the next open counts.
    s.close().unwrap();
    let s = open(dir.path());
    assert!(!loaded(&s));
    assert_eq!(s.segment_digests(0, SEGMENTS), walked);
}

#[test]
fn an_unreadable_saved_row_is_ignored_and_the_open_counts() {
    let dir = tempfile::tempdir().unwrap();
    let before = written_and_closed(dir.path());
    {
        // Damage the row the close saved (one byte in its digests).
        let db = sled_open(dir.path());
        let tree = db.open_tree("clean_close").unwrap();
        let mut row = tree.get(b"counted").unwrap().unwrap().to_vec();
        row[100] ^= 0x01;
        tree.insert(b"counted", row).unwrap();
        db.flush().unwrap();
    }
    let s = open(dir.path());
    assert!(!loaded(&s));
    assert_eq!(counted(&s), before);
    s.close_without_saving().unwrap();
    let db = sled_open(dir.path());
    assert!(
        db.open_tree("clean_close").unwrap().is_empty(),
        "the open removed the unreadable row"
    );
}

/// Open-time cost of counting keys and building the digests: run with
/// `cargo test --release -p kv-storage --test sled -- --ignored --nocapture`.
#[test]
#[ignore = "a measurement; run in release mode"]
fn open_time_with_100k_small_keys() {
    const KEYS: u32 = 100_000;
    let dir = tempfile::tempdir().unwrap();
    let config = SledSettings {
        sync_writes: false,
        ..SledSettings::default()
    };
    let digests = {
        let s = SledEngine::open(dir.path(), config.clone()).unwrap();
        for i in 0..KEYS {
            let key = format!("key-{i:08}");
            s.merge(key.as_bytes(), &blind(1, b"small value")).unwrap();
        }
        let digests = s.segment_digests(0, SEGMENTS);
        s.close_without_saving().unwrap();
        digests
    };
    // Each open after a close without saving counts; after a clean close
    // it loads what the close saved.
    for save in [false, true] {
        let mut times = Vec::new();
        for _ in 0..3 {
            let start = Instant::now();
            let s = SledEngine::open(dir.path(), config.clone()).unwrap();
            times.push(start.elapsed());
            assert_eq!(s.stats().keys, u64::from(KEYS));
            assert_eq!(s.segment_digests(0, SEGMENTS), digests);
            assert_eq!(loaded(&s), save && times.len() > 1);
            if save {
                let walk = Instant::now();
                assert!(verified(&s) != SavedDigests::Verifying);
                println!("  verified in the background in {:?}", walk.elapsed());
                s.close().unwrap();
            } else {
                s.close_without_saving().unwrap();
            }
        }
        let how = if save {
            "loading saved digests after the first"
        } else {
            "counting"
        };
        println!("open with {KEYS} keys, {how} (3 runs): {times:?}");
    }
}

/// Set in the child process of the crash tests: the directory to write to.
const CHILD_DIR: &str = "KV_STORAGE_CRASH_CHILD_DIR";
const CRASH_KEYS: usize = 20;

fn crash_key(i: usize) -> Vec<u8> {
    format!("crash-{i}").into_bytes()
}

/// Runs the named test of this binary in a child process with [`CHILD_DIR`]
/// set; the child writes and then aborts, skipping every destructor.
fn run_child(test: &str, dir: &Path) {
    let status = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", test, "--test-threads=1", "--nocapture"])
        .env(CHILD_DIR, dir)
        .status()
        .unwrap();
    // SIGABRT (6 on Linux): a child that failed an assertion exits instead.
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&status),
        Some(6),
        "the child must die by abort: {status}"
    );
}

/// The child's side of a crash test: write, then die at once.
fn write_then_abort(dir: &std::ffi::OsStr, config: SledSettings) -> ! {
    let s = SledEngine::open(dir, config).unwrap();
    for i in 0..CRASH_KEYS {
        if i % 2 == 0 {
            s.merge(&crash_key(i), &blind(1, &crash_key(i))).unwrap();
        } else {
            // The async path: applied, then acknowledged once Durable resolves.
            let (_, durable) = s
                .merge_deferred(&crash_key(i), &blind(1, &crash_key(i)))
                .unwrap();
            block_on(durable).unwrap();
        }
    }
    s.put_meta("last", b"acknowledged").unwrap();
    s.put_hint(&node("node2"), b"hinted", &blind(1, b"h"), 1)
        .unwrap();
    // Acknowledged: now die without flushing or running destructors.
    std::process::abort();
}

fn surviving_crash_keys(dir: &Path) -> usize {
    let s = open(dir);
    (0..CRASH_KEYS)
        .filter(|i| s.get(&crash_key(*i)).unwrap() == Some(blind(1, &crash_key(*i))))
        .count()
}

#[test]
fn acknowledged_writes_survive_a_crash() {
    if let Some(dir) = std::env::var_os(CHILD_DIR) {
        write_then_abort(&dir, SledSettings::default());
    }
    let dir = tempfile::tempdir().unwrap();
    run_child("acknowledged_writes_survive_a_crash", dir.path());
    assert_eq!(surviving_crash_keys(dir.path()), CRASH_KEYS);
    let s = open(dir.path());
    assert_eq!(s.get_meta("last").unwrap(), Some(b"acknowledged".to_vec()));
    assert_eq!(hints(&s).len(), 1, "an acknowledged hint survives too");
}

/// The control of the test above: the same crash, without group commit,
/// loses writes (so the crash harness does see losses when they happen).
#[test]
fn without_sync_writes_a_crash_loses_acknowledged_writes() {
    if let Some(dir) = std::env::var_os(CHILD_DIR) {
        let config = SledSettings {
            sync_writes: false,
            flush_every_ms: 60_000,
            ..SledSettings::default()
        };
        write_then_abort(&dir, config);
    }
    let dir = tempfile::tempdir().unwrap();
    run_child(
        "without_sync_writes_a_crash_loses_acknowledged_writes",
        dir.path(),
    );
    assert!(surviving_crash_keys(dir.path()) < CRASH_KEYS);
}

#[test]
fn a_single_writer_waits_for_one_flush_per_write() {
    let dir = tempfile::tempdir().unwrap();
    let s = open(dir.path());
    for i in 0..10u8 {
        s.merge(&[i], &blind(1, b"v")).unwrap();
        assert_eq!(s.stats().flushes, u64::from(i) + 1);
    }
}

#[test]
fn deferred_writes_are_visible_at_once_and_share_flushes() {
    let dir = tempfile::tempdir().unwrap();
    let s = open(dir.path());
    let pending: Vec<_> = (0..16u8)
        .map(|i| s.merge_deferred(&[i], &blind(1, b"v")).unwrap())
        .collect();
    for (i, (object, _)) in pending.iter().enumerate() {
        assert_eq!(object, &blind(1, b"v"));
        assert_eq!(s.get(&[i as u8]).unwrap().as_ref(), Some(object), "applied");
    }
    let before = s.stats().flushes;
    for (_, durable) in pending {
        block_on(durable).unwrap();
    }
    let flushes = s.stats().flushes - before;
    assert!(
        (1..=2).contains(&flushes),
        "16 waiting writes share one flush (or two, if one began before all were applied): {flushes}"
    );
}

#[test]
fn asynchronous_writes_return_before_their_flush() {
    let dir = tempfile::tempdir().unwrap();
    let config = SledSettings {
        sync_writes: false,
        flush_every_ms: 60_000,
        ..SledSettings::default()
    };
    let s = SledEngine::open(dir.path(), config).unwrap();
    for i in 0..10u8 {
        s.merge(&[i], &blind(1, b"v")).unwrap();
    }
    assert_eq!(s.stats().flushes, 0, "nothing waits for the disk");
    s.flush().unwrap();
    let stats = s.stats();
    assert_eq!((stats.flushes, stats.writes_per_flush), (1, 10.0));
    s.flush().unwrap();
    assert_eq!(s.stats().flushes, 1, "nothing new to flush");
}

#[test]
fn a_failed_engine_reopens_at_most_once_per_interval() {
    let dir = tempfile::tempdir().unwrap();
    let config = SledSettings {
        reopen_interval_ms: 300,
        ..SledSettings::default()
    };
    let s = SledEngine::open(dir.path(), config).unwrap();
    let obj = s.merge(b"k", &blind(1, b"v")).unwrap();

    // The first operation after a failure reopens the database.
    s.fail_for_test();
    assert!(s.stats().failed);
    let obj = s
        .update(b"k", &mut |stored| {
            Ok(overwrite(stored.unwrap(), 1, Some(b"w")))
        })
        .unwrap_or_else(|e| panic!("reopen failed: {e}; before: {obj:?}"));
    assert_eq!(s.reopens(), 1);
    assert!(!s.stats().failed);
    assert_eq!(s.get(b"k").unwrap(), Some(obj.clone()));

    // A second failure within the interval: nothing is applied until it
    // has passed, and the error says so.
    s.fail_for_test();
    let err = s.merge(b"k2", &obj).unwrap_err();
    assert!(
        matches!(err, Error::Unavailable(_)) && err.is_retryable(),
        "{err}"
    );
    assert!(s.get(b"k").is_err());
    std::thread::sleep(Duration::from_millis(350));
    s.merge(b"k2", &obj).unwrap();
    assert_eq!(s.reopens(), 2);
    assert_eq!(s.get(b"k").unwrap(), Some(obj));
    assert_eq!(s.stats().keys, 2);
}

#[test]
fn a_small_page_cache_is_configurable() {
    let dir = tempfile::tempdir().unwrap();
    let config = SledSettings {
        cache_capacity_bytes: 1 << 20,
        ..SledSettings::default()
    };
    assert_eq!(SledSettings::default().cache_capacity_bytes, 16 << 20);
    let s = SledEngine::open(dir.path(), config).unwrap();
    let big = vec![1u8; 64 * 1024];
    for i in 0..64u8 {
        s.merge(&[i], &blind(1, &big)).unwrap();
    }
    for i in 0..64u8 {
        assert_eq!(s.get(&[i]).unwrap(), Some(blind(1, &big)));
    }
}

#[test]
fn a_second_open_of_the_same_directory_is_an_io_error() {
    let dir = tempfile::tempdir().unwrap();
    let _s = open(dir.path());
    let err = SledEngine::open(dir.path(), SledSettings::default()).unwrap_err();
    assert!(matches!(err, Error::Io(_)), "{err}");
}

/// Below the free-space reserve, writes that grow the store are refused
/// before anything is applied; reads go on; above it again, writes are
/// accepted at once.
#[test]
fn a_full_disk_refuses_writes_and_keeps_serving_reads() {
    let dir = tempfile::tempdir().unwrap();
    let config = SledSettings {
        min_free_bytes: 1 << 20,
        ..SledSettings::default()
    };
    let s = SledEngine::open(dir.path(), config).unwrap();
    s.merge(b"k", &blind(1, b"before")).unwrap();
    s.set_free_bytes_for_test(Some(1 << 19));
    let err = s.merge(b"k2", &blind(1, b"refused")).unwrap_err();
    assert!(
        matches!(
            err,
            Error::DiskFull {
                free_bytes: 524_288,
                reserve_bytes: 1_048_576
            }
        ),
        "{err:?}"
    );
    assert!(err.is_retryable());
    let owner = kv_types::NodeId::new("node2").unwrap();
    assert!(matches!(
        s.put_hint(&owner, b"k", &blind(1, b"hint"), 0),
        Err(Error::DiskFull { .. })
    ));
    assert!(s.get(b"k2").unwrap().is_none());
    assert!(s.get(b"k").unwrap().is_some());
    let stats = s.stats();
    assert!(stats.disk_full);
    assert_eq!(stats.free_bytes, Some(1 << 19));
    s.set_free_bytes_for_test(Some(2 << 20));
    s.merge(b"k2", &blind(1, b"accepted")).unwrap();
    assert!(!s.stats().disk_full);
}

#[test]
fn a_reserve_larger_than_the_filesystem_refuses_to_open() {
    let dir = tempfile::tempdir().unwrap();
    let config = SledSettings {
        min_free_bytes: u64::MAX,
        ..SledSettings::default()
    };
    let err = SledEngine::open(dir.path(), config).unwrap_err();
    assert!(err.to_string().contains("min_free_bytes"), "{err}");
}

/// sled's own corruption report at open (here: its `conf` file no longer
/// parses) is [`Error::Damaged`] naming the directory, never an empty
/// store; nothing is written over the damaged files.
#[test]
fn a_database_sled_reports_corrupt_is_damaged_naming_its_path() {
    let dir = tempfile::tempdir().unwrap();
    {
        let s = open(dir.path());
        s.merge(b"k", &blind(1, b"v")).unwrap();
        s.close().unwrap();
    }
    std::fs::write(dir.path().join("conf"), b"not a sled config\n").unwrap();
    match SledEngine::open(dir.path(), SledSettings::default()) {
        Err(e @ Error::Damaged { .. }) => {
            let text = e.to_string();
            assert!(text.contains(&dir.path().display().to_string()), "{text}");
            assert!(!e.is_retryable());
        }
        other => panic!("expected Damaged, got {other:?}"),
    }
    assert_eq!(
        std::fs::read(dir.path().join("conf")).unwrap(),
        b"not a sled config\n"
    );
}
