//! Damaged data on disk (issue 14, items 2 and 3): a record whose bytes
//! were flipped on a stopped node is never served and is rewritten by the
//! first quorum read that meets it.
//!
//! The damage is written through sled's own API (sled's checksums of its
//! log and pages stay valid), so only the store's crc32 of the record
//! catches it. Anti-entropy is slowed to one exchange an hour and the
//! scrub is off, so the read is the only repair that can happen.

#![allow(clippy::unwrap_used)]

use std::path::Path;

use kv_tests::{DEADLINE, TestCluster, poll_until};
use kv_types::key_hash;

/// Anti-entropy's maximum interval (ms): at most the exchange of the
/// first partition each node makes when it starts.
const NO_ANTI_ENTROPY: &str = "3600000";

/// Flips every bit of the middle byte of `key`'s record in the sled
/// database at `data` (the node must be stopped).
fn flip_record(data: &Path, key: &[u8]) {
    let db = sled::open(data).unwrap();
    let objects = db.open_tree("objects").unwrap();
    let mut disk_key = key_hash(key).to_be_bytes().to_vec();
    disk_key.extend_from_slice(key);
    let mut raw = objects
        .get(&disk_key)
        .unwrap()
        .expect("the record is stored")
        .to_vec();
    let i = raw.len() / 2;
    raw[i] ^= 0xFF;
    objects.insert(disk_key, raw).unwrap();
    db.flush().unwrap();
}

/// The value of the unlabelled counter `name` in node `index`'s metrics.
async fn metric(cluster: &TestCluster, index: usize, name: &str) -> f64 {
    let answer = cluster.admin_get(index, "/metrics").await.unwrap();
    answer
        .body
        .lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
        .unwrap_or(0.0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_quorum_read_repairs_a_record_damaged_on_disk() {
    let cluster = TestCluster::builder(3)
        .setting("anti_entropy", "interval_ms", NO_ANTI_ENTROPY)
        .setting("storage", "scrub_interval_secs", "0")
        .start()
        .await
        .unwrap();
    let client = cluster.client(&[1, 2, 3]).await.unwrap();
    // A key in the upper half of the hash space: not in the first
    // partition, which each node exchanges once when it starts.
    let key = (0..)
        .map(|i| format!("damaged-{i}").into_bytes())
        .find(|k| key_hash(k) > u64::MAX / 2)
        .unwrap();
    client.put(&key, b"precious", &[], Some(3)).await.unwrap();
    let victim = 2;
    assert!(
        cluster
            .replicas_of(&client, &key)
            .await
            .unwrap()
            .contains(&victim)
    );

    cluster.stop(victim).await.unwrap();
    flip_record(&cluster.data_dir(victim).unwrap(), &key);
    cluster.start_node(victim).await.unwrap();
    cluster.wait_alive(victim).await.unwrap();

    // Our crc caught it: the replica reports the record, never serves it.
    let err = cluster.local_get(&client, victim, &key).await.unwrap_err();
    assert!(format!("{err:#}").contains("corrupt"), "{err:#}");
    assert_eq!(
        metric(&cluster, victim, "kv_storage_corrupt_quarantined_total").await,
        0.0
    );

    // One quorum read over every replica: the damaged one answers
    // `Corrupt`, which counts nothing toward R=3, and is rewritten with
    // what the two others answered.
    let first = client.get(&key, Some(3)).await;
    println!("damage: the R=3 read meeting the damaged replica answered {first:?}");
    poll_until(
        "the damaged replica to be rewritten",
        DEADLINE,
        async || match cluster.local_get(&client, victim, &key).await {
            Ok(Some(o)) if o.live_values().any(|v| v == b"precious") => Ok(()),
            other => Err(format!("node{victim} answers {other:?}")),
        },
    )
    .await
    .unwrap();
    let read = client.get(&key, Some(3)).await.unwrap();
    assert_eq!(read.values, vec![b"precious".to_vec()]);
    assert_eq!(
        metric(&cluster, victim, "kv_storage_corrupt_quarantined_total").await,
        1.0
    );
    // Anti-entropy repaired nothing anywhere: the read did it.
    for i in cluster.members() {
        assert_eq!(
            metric(&cluster, i, "kv_anti_entropy_keys_repaired_total").await,
            0.0
        );
    }
}
