//! The background scrub: a record damaged after the engine opened, on a
//! key nobody reads, is found by re-reading every record and rewritten
//! from the key's other replicas. No anti-entropy or read runs here.

use std::sync::atomic::Ordering;
use std::time::Duration;

use kv_replication::testkit::{TestCluster, test_settings};
use kv_replication::{SLICES, ScrubSettings};
use kv_storage::Storage;
use kv_types::Object;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::support::{eventually, local_write, replicas};

/// Writes `key` = `value` on every replica of `key`; answers the object.
async fn write_everywhere(c: &TestCluster, key: &[u8], value: &[u8]) -> Object {
    let pref = replicas(c, key);
    let object = local_write(c.core(&pref[0]), key, value, &Object::new()).await;
    for id in &pref[1..] {
        c.core(id).replica().replicate(key, &object).await.unwrap();
    }
    object
}

#[tokio::test(start_paused = true)]
async fn one_pass_finds_a_damaged_record_and_rewrites_it_from_the_replicas() {
    let c = TestCluster::start(3, 3).await;
    let keys: Vec<Vec<u8>> = (0..50).map(|i| format!("scrub-{i}").into_bytes()).collect();
    let mut objects = Vec::new();
    for key in &keys {
        objects.push(write_everywhere(&c, key, b"v").await);
    }
    let damaged = &keys[17];
    let victim = replicas(&c, damaged)[1].clone();
    let storage = &c.node(&victim).storage;
    assert!(storage.corrupt_for_test(damaged));
    assert!(storage.get(damaged).is_err());

    let scrub = c.core(&victim).scrub();
    let outcome = scrub.run_pass().await;
    assert_eq!(outcome.checked, keys.len() as u64, "every record re-read");
    assert_eq!(outcome.corrupt, vec![damaged.clone()]);
    assert_eq!(outcome.repaired, 1);
    assert!(!outcome.incomplete);
    assert_eq!(storage.get(damaged).unwrap(), Some(objects[17].clone()));
    assert_eq!(storage.stats().corrupt_quarantined, 1);
    assert!(storage.quarantined(damaged).is_some());
    let stats = scrub.stats();
    assert_eq!(stats.corrupt_found.load(Ordering::Relaxed), 1);
    assert_eq!(stats.repaired.load(Ordering::Relaxed), 1);

    // A second pass finds nothing.
    let again = scrub.run_pass().await;
    assert!(again.corrupt.is_empty(), "{again:?}");
    assert_eq!(stats.corrupt_found.load(Ordering::Relaxed), 1);
}

#[tokio::test(start_paused = true)]
async fn a_damaged_record_no_other_replica_holds_is_left_in_place_and_counted() {
    let c = TestCluster::start(3, 3).await;
    let key = b"only-here";
    let pref = replicas(&c, key);
    local_write(c.core(&pref[0]), key, b"v", &Object::new()).await;
    let storage = &c.node(&pref[0]).storage;
    assert!(storage.corrupt_for_test(key));

    let scrub = c.core(&pref[0]).scrub();
    let outcome = scrub.run_pass().await;
    assert_eq!(outcome.corrupt, vec![key.to_vec()]);
    assert_eq!(outcome.repaired, 0);
    assert!(storage.get(key).is_err(), "still damaged, never served");
    assert_eq!(storage.stats().corrupt_quarantined, 0);
    assert_eq!(scrub.stats().unrepaired.load(Ordering::Relaxed), 1);
}

/// The scheduled scrub (one slice every `interval / SLICES`) finds a
/// record damaged while it runs, within one interval.
#[tokio::test(start_paused = true)]
async fn the_scheduled_scrub_repairs_damage_within_one_interval() {
    let interval = Duration::from_millis(10) * SLICES as u32;
    let mut settings = test_settings();
    settings.scrub = ScrubSettings {
        interval,
        timeout: Duration::from_millis(500),
    };
    let c = TestCluster::with_settings(3, 3, settings).await;
    let key = b"rot";
    let object = write_everywhere(&c, key, b"v").await;
    let victim = replicas(&c, key)[2].clone();
    let (tasks, stop) = (TaskTracker::new(), CancellationToken::new());
    c.core(&victim).scrub().clone().spawn(&tasks, stop.clone());
    // Damage after the engine opened and the scrub started.
    tokio::time::sleep(interval / 3).await;
    let storage = &c.node(&victim).storage;
    assert!(storage.corrupt_for_test(key));
    let started = tokio::time::Instant::now();
    eventually("the scrub to rewrite the damaged record", || {
        storage.get(key).ok().flatten() == Some(object.clone())
    })
    .await;
    assert!(started.elapsed() <= interval + Duration::from_millis(50));
    assert_eq!(storage.stats().corrupt_quarantined, 1);
    let stats = c.core(&victim).scrub().stats();
    assert_eq!(stats.corrupt_found.load(Ordering::Relaxed), 1);
    assert_eq!(stats.repaired.load(Ordering::Relaxed), 1);
    assert!(stats.records_checked.load(Ordering::Relaxed) >= 1);
    stop.cancel();
    tasks.close();
    tasks.wait().await;
}

/// Off means off: an interval of zero spawns nothing.
#[tokio::test(start_paused = true)]
async fn a_zero_interval_turns_the_scrub_off() {
    let c = TestCluster::start(3, 3).await;
    let key = b"rot-unseen";
    write_everywhere(&c, key, b"v").await;
    let victim = replicas(&c, key)[0].clone();
    let (tasks, stop) = (TaskTracker::new(), CancellationToken::new());
    c.core(&victim).scrub().clone().spawn(&tasks, stop.clone());
    assert!(c.node(&victim).storage.corrupt_for_test(key));
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert!(c.node(&victim).storage.get(key).is_err());
    assert_eq!(
        c.core(&victim)
            .scrub()
            .stats()
            .records_checked
            .load(Ordering::Relaxed),
        0
    );
    stop.cancel();
}
