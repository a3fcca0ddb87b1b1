//! A full disk (issue 14, item 4): three nodes whose data directories share
//! one small tmpfs, filled under a write load by a file beside them.
//!
//! With a free-space reserve, writes are refused with "disk full on NODE"
//! (kvctl exit 7, RESP `-ERR`), reads go on, `/health` and the metrics say
//! so, no acknowledged write is lost, and writes are accepted again by
//! themselves once the file is removed. Without a reserve the disk really
//! fills (sled's writes fail and the engine reopens): no acknowledged write
//! is lost either.
//!
//! Mounting needs root (`mount -t tmpfs`); where it is not permitted the
//! tests say so and pass without checking anything.

#![allow(clippy::unwrap_used)]

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::{StreamExt, stream};
use kv_client::{Client, Error};
use kv_tests::{DEADLINE, TestCluster, poll_until};

/// Size of the test's filesystem.
const TMPFS_SIZE: &str = "size=64m";
/// The nodes' free-space reserve.
const RESERVE: u64 = 16 << 20;
/// Bytes of each value written.
const VALUE_BYTES: usize = 1024;
/// Concurrent writers of the load.
const WRITERS: usize = 4;
/// Writes acknowledged before the disk is filled.
const ACKED_BEFORE_FILL: usize = 100;

/// A tmpfs mounted on a temporary directory, unmounted when dropped (also
/// when the test panics).
struct Tmpfs {
    dir: tempfile::TempDir,
}

impl Tmpfs {
    /// Mounts one, or says why not and returns `None`.
    fn mount(test: &str) -> Option<Tmpfs> {
        let dir = tempfile::Builder::new()
            .prefix("kv-disk-full-")
            .tempdir()
            .unwrap();
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", TMPFS_SIZE, "tmpfs"])
            .arg(dir.path())
            .output();
        match out {
            Ok(o) if o.status.success() => Some(Tmpfs { dir }),
            Ok(o) => {
                eprintln!(
                    "SKIPPED {test}: `mount -t tmpfs` is not permitted here ({}): run as root to check a full disk",
                    String::from_utf8_lossy(&o.stderr).trim()
                );
                None
            }
            Err(e) => {
                eprintln!(
                    "SKIPPED {test}: cannot run mount ({e}): run as root to check a full disk"
                );
                None
            }
        }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Where the filler file goes: beside the nodes' data directories.
    fn filler(&self) -> PathBuf {
        self.path().join("filler")
    }

    /// Free bytes on the tmpfs.
    fn free(&self) -> u64 {
        let s = rustix::fs::statvfs(self.path()).unwrap();
        s.f_bavail * s.f_frsize
    }

    /// Writes the filler file until at most `leave` bytes stay free (or
    /// the filesystem is full); returns its size.
    fn fill(&self, leave: u64) -> u64 {
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.filler())
            .unwrap();
        let chunk = vec![0xA5u8; 1 << 20];
        let mut written = 0u64;
        loop {
            let free = self.free();
            if free <= leave {
                break;
            }
            let n = usize::try_from((free - leave).min(chunk.len() as u64)).unwrap();
            match file.write_all(&chunk[..n]) {
                Ok(()) => written += n as u64,
                // ENOSPC: as full as it gets.
                Err(_) => break,
            }
        }
        let _ = file.sync_all();
        written
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let path = self.dir.path().to_path_buf();
        let unmounted = Command::new("umount")
            .arg(&path)
            .status()
            .is_ok_and(|s| s.success());
        if !unmounted {
            // Something still holds a file there: detach it anyway.
            let _ = Command::new("umount").arg("-l").arg(&path).status();
        }
    }
}

fn key(writer: usize, k: usize) -> Vec<u8> {
    format!("full-{writer}-{k:06}").into_bytes()
}

fn value(writer: usize, k: usize) -> Vec<u8> {
    let mut v = format!("value {writer}/{k} ").into_bytes();
    v.resize(VALUE_BYTES, b'.');
    v
}

/// What the load saw.
#[derive(Default)]
struct Outcomes {
    /// (writer, k) of every acknowledged write.
    acked: Vec<(usize, usize)>,
    /// Refusals naming a full disk (kind storage, "disk full on node").
    disk_full: Vec<String>,
    /// Other storage failures (the engine failed and reopening).
    storage: Vec<String>,
    /// Writes that may or may not be stored.
    indeterminate: usize,
    /// Anything else (the first few kept).
    other: Vec<String>,
}

/// A write load: `WRITERS` tasks putting fresh keys until `stop`.
fn start_load(
    client: Arc<Client>,
    stop: Arc<AtomicBool>,
    seen: Arc<Mutex<Outcomes>>,
) -> Vec<tokio::task::JoinHandle<()>> {
    (0..WRITERS)
        .map(|w| {
            let (client, stop, seen) = (client.clone(), stop.clone(), seen.clone());
            tokio::spawn(async move {
                let mut k = 0;
                while !stop.load(Ordering::Acquire) {
                    let result = client.put(&key(w, k), &value(w, k), &[], None).await;
                    {
                        let mut seen = seen.lock().unwrap();
                        match result {
                            Ok(_) => seen.acked.push((w, k)),
                            Err(Error::Storage { message, .. })
                                if message.contains("disk full on node") =>
                            {
                                seen.disk_full.push(message)
                            }
                            Err(e @ Error::Storage { .. }) => seen.storage.push(e.to_string()),
                            Err(e) if e.exit_code() == 4 => seen.indeterminate += 1,
                            Err(e) => {
                                if seen.other.len() < 5 {
                                    seen.other.push(e.to_string());
                                }
                            }
                        }
                    }
                    k += 1;
                    if k % 8 == 0 {
                        // Refusals are fast: leave the nodes some air.
                        tokio::time::sleep(Duration::from_millis(5)).await;
                    }
                }
            })
        })
        .collect()
}

/// Reads every acknowledged key back; returns those missing their value.
async fn lost(client: &Client, acked: &[(usize, usize)]) -> Vec<(usize, usize)> {
    stream::iter(acked.iter().copied())
        .map(|(w, k)| async move {
            let held = match client.get(&key(w, k), None).await {
                Ok(reply) => reply.values.iter().any(|v| *v == value(w, k)),
                Err(_) => false,
            };
            (!held).then_some((w, k))
        })
        .buffer_unordered(16)
        .filter_map(|x| async move { x })
        .collect()
        .await
}

/// Waits until at least `target` writes in all were acknowledged; how
/// long that took from the call.
async fn wait_for_acks(seen: &Mutex<Outcomes>, target: usize, what: &str) -> Duration {
    let start = Instant::now();
    poll_until(what, DEADLINE, async || {
        let n = seen.lock().unwrap().acked.len();
        if n >= target {
            Ok(start.elapsed())
        } else {
            Err(format!("{n} of {target} acknowledged"))
        }
    })
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_are_refused_below_the_reserve_and_accepted_again_once_space_is_freed() {
    let Some(disk) = Tmpfs::mount("writes_are_refused_below_the_reserve") else {
        return;
    };
    let cluster = TestCluster::builder(3)
        .data_root(disk.path())
        .setting("storage", "min_free_bytes", &RESERVE.to_string())
        .start()
        .await
        .unwrap();
    let client = Arc::new(cluster.client(&[1, 2, 3]).await.unwrap());
    let stop = Arc::new(AtomicBool::new(false));
    let seen = Arc::new(Mutex::new(Outcomes::default()));
    let load = start_load(client.clone(), stop.clone(), seen.clone());
    wait_for_acks(
        &seen,
        ACKED_BEFORE_FILL,
        "writes acknowledged before the fill",
    )
    .await;

    // Fill the disk under the load, to half the reserve.
    let free_before = disk.free();
    let filler = disk.fill(RESERVE / 2);
    eprintln!(
        "filled: {} MiB free before, filler {} MiB, {} MiB free after",
        free_before >> 20,
        filler >> 20,
        disk.free() >> 20
    );
    let filled_at = Instant::now();
    let refused_after = poll_until("writes refused for a full disk", DEADLINE, async || {
        let s = seen.lock().unwrap();
        if s.disk_full.len() >= 20 {
            Ok(filled_at.elapsed())
        } else {
            Err(format!(
                "{} disk-full refusals, {} acked, other: {:?}",
                s.disk_full.len(),
                s.acked.len(),
                s.other
            ))
        }
    })
    .await
    .unwrap();

    // kvctl: exit 7, naming the node and the disk.
    let put = cluster.kvctl(&["put", "by-kvctl", "v"]).await.unwrap();
    assert_eq!(put.code, 7, "kvctl put on a full disk: {put}");
    assert!(put.stderr.contains("disk full on node"), "{put}");
    // RESP: -ERR naming it too.
    let resp = cluster.resp_addr(1).unwrap();
    let answer = tokio::task::spawn_blocking(move || {
        let client = redis::Client::open(format!("redis://{resp}/")).unwrap();
        let mut c = client.get_connection().unwrap();
        redis::cmd("SET")
            .arg("by-resp")
            .arg("v")
            .query::<()>(&mut c)
            .map_err(|e| e.to_string())
    })
    .await
    .unwrap();
    let refusal = answer.expect_err("SET on a full disk is refused");
    assert!(refusal.contains("disk full on node"), "{refusal}");
    // Health and metrics say so, on every node.
    for i in cluster.members() {
        let health = cluster.admin_get(i, "/health").await.unwrap();
        assert_eq!(health.status, 200, "node{i}: {}", health.body);
        let body: serde_json::Value = serde_json::from_str(&health.body).unwrap();
        assert_eq!(body["status"], "disk_full", "node{i}: {body}");
        assert_eq!(body["disk_full"], true, "node{i}: {body}");
        let metrics = cluster.admin_get(i, "/metrics").await.unwrap();
        assert!(
            metrics.body.lines().any(|l| l == "kv_storage_disk_full 1"),
            "node{i} metrics lack kv_storage_disk_full 1"
        );
    }
    // Reads go on: every write acknowledged so far reads back.
    let acked_full = seen.lock().unwrap().acked.clone();
    let missing = lost(&client, &acked_full).await;
    assert!(
        missing.is_empty(),
        "{} of {} acknowledged writes unreadable while the disk is full, e.g. {:?}",
        missing.len(),
        acked_full.len(),
        &missing[..missing.len().min(5)]
    );

    // Free the space: writes come back by themselves.
    std::fs::remove_file(disk.filler()).unwrap();
    let acked_when_freed = seen.lock().unwrap().acked.len();
    let back_after = wait_for_acks(&seen, acked_when_freed + 20, "writes accepted again").await;
    assert!(
        back_after < Duration::from_secs(10),
        "writes took {back_after:?} to come back"
    );
    let put = cluster.kvctl(&["put", "by-kvctl", "v"]).await.unwrap();
    assert_eq!(put.code, 0, "kvctl put once space is back: {put}");
    let health = cluster.admin_get(1, "/health").await.unwrap();
    assert!(health.body.contains("\"status\":\"ok\""), "{}", health.body);

    stop.store(true, Ordering::Release);
    for task in load {
        task.await.unwrap();
    }
    let s = std::mem::take(&mut *seen.lock().unwrap());
    let missing = lost(&client, &s.acked).await;
    eprintln!(
        "figures: {} acked ({} before the fill), {} refused 'disk full' (first after {:?}), {} other storage failures, {} indeterminate, other {:?}; writes back {:?} after the filler was removed; lost {}",
        s.acked.len(),
        ACKED_BEFORE_FILL,
        s.disk_full.len(),
        refused_after,
        s.storage.len(),
        s.indeterminate,
        s.other,
        back_after,
        missing.len()
    );
    if let Some(m) = s.disk_full.first() {
        eprintln!("a refusal: {m}");
    }
    assert!(
        missing.is_empty(),
        "{} of {} acknowledged writes lost, e.g. {:?}",
        missing.len(),
        s.acked.len(),
        &missing[..missing.len().min(5)]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_disk_filled_past_the_engine_loses_no_acknowledged_write() {
    let Some(disk) = Tmpfs::mount("a_disk_filled_past_the_engine") else {
        return;
    };
    // No reserve: sled itself meets the full disk.
    let cluster = TestCluster::builder(3)
        .data_root(disk.path())
        .setting("storage", "min_free_bytes", "0")
        .start()
        .await
        .unwrap();
    let client = Arc::new(cluster.client(&[1, 2, 3]).await.unwrap());
    let stop = Arc::new(AtomicBool::new(false));
    let seen = Arc::new(Mutex::new(Outcomes::default()));
    let load = start_load(client.clone(), stop.clone(), seen.clone());
    wait_for_acks(
        &seen,
        ACKED_BEFORE_FILL,
        "writes acknowledged before the fill",
    )
    .await;
    let filler = disk.fill(0);
    eprintln!(
        "filled: filler {} MiB, {} KiB free",
        filler >> 20,
        disk.free() >> 10
    );
    let acked_at_fill = seen.lock().unwrap().acked.len();
    poll_until("writes failing on the full disk", DEADLINE, async || {
        let s = seen.lock().unwrap();
        let failed = s.storage.len() + s.disk_full.len() + s.indeterminate + s.other.len();
        if failed >= 20 {
            Ok(())
        } else {
            Err(format!("{failed} failed, {} acked", s.acked.len()))
        }
    })
    .await
    .unwrap();
    std::fs::remove_file(disk.filler()).unwrap();
    let acked_when_freed = seen.lock().unwrap().acked.len();
    let back_after = wait_for_acks(&seen, acked_when_freed + 20, "writes accepted again").await;
    stop.store(true, Ordering::Release);
    for task in load {
        task.await.unwrap();
    }
    for i in cluster.members() {
        assert!(
            cluster.running().contains(&i),
            "node{i} exited on a full disk"
        );
    }
    let s = std::mem::take(&mut *seen.lock().unwrap());
    let missing = lost(&client, &s.acked).await;
    eprintln!(
        "figures: {} acked ({acked_at_fill} when filled, {acked_when_freed} when freed), {} storage failures, {} indeterminate, other {:?}; writes back {back_after:?} after the filler was removed; lost {}",
        s.acked.len(),
        s.storage.len(),
        s.indeterminate,
        s.other,
        missing.len()
    );
    assert!(
        missing.is_empty(),
        "{} of {} acknowledged writes lost, e.g. {:?}",
        missing.len(),
        s.acked.len(),
        &missing[..missing.len().min(5)]
    );
}
