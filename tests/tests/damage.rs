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

/// Stops node `index` and runs `damage` on its sled database.
async fn damage_stopped(cluster: &TestCluster, index: usize, damage: impl FnOnce(&sled::Db)) {
    cluster.stop(index).await.unwrap();
    let db = sled::open(cluster.data_dir(index).unwrap()).unwrap();
    damage(&db);
    db.flush().unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_refuses_another_nodes_or_clusters_data_directory() {
    let cluster = TestCluster::start(3).await.unwrap();
    cluster.stop(2).await.unwrap();
    cluster.stop(3).await.unwrap();
    let other = cluster.data_dir(2).unwrap();
    let other_text = other.display().to_string();

    // node3 pointed at node2's directory.
    let (status, out) = cluster
        .run_refused(3, &["--data-dir", &other_text])
        .await
        .unwrap();
    println!("damage: node3 on node2's data answered ({status}): {out}");
    assert!(!status.success());
    assert!(
        out.contains("belongs to node node2") && out.contains("this node is node3"),
        "{out}"
    );
    assert!(out.contains(&other_text), "the path is named: {out}");
    // --rebuild never takes another node's data.
    let (status, out) = cluster
        .run_refused(3, &["--data-dir", &other_text, "--rebuild"])
        .await
        .unwrap();
    assert!(
        !status.success() && out.contains("belongs to node node2"),
        "{out}"
    );

    // node3 on its own directory, but configured for another cluster.
    let config = cluster.dir().join("node3").join("config.toml");
    let original = std::fs::read_to_string(&config).unwrap();
    std::fs::write(&config, format!("cluster_id = \"elsewhere\"\n{original}")).unwrap();
    let (status, out) = cluster.run_refused(3, &[]).await.unwrap();
    std::fs::write(&config, &original).unwrap();
    println!("damage: node3 configured for another cluster answered ({status}): {out}");
    assert!(!status.success());
    assert!(out.contains("cluster \"elsewhere\""), "{out}");

    // Nothing was written to either directory: both start as before.
    cluster.start_node(2).await.unwrap();
    cluster.start_node(3).await.unwrap();
    cluster.wait_converged().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_damaged_database_is_refused_until_rebuilt_and_refilled() {
    let cluster = TestCluster::start(3).await.unwrap();
    let client = cluster.client(&[1, 2]).await.unwrap();
    client.put(b"kept", b"v", &[], Some(3)).await.unwrap();
    cluster.stop(3).await.unwrap();
    let data = cluster.data_dir(3).unwrap();
    // sled's own configuration file no longer parses: sled reports
    // corruption at open.
    std::fs::write(data.join("conf"), b"not a sled config\n").unwrap();

    let (status, out) = cluster.run_refused(3, &[]).await.unwrap();
    println!("damage: node3 on a damaged database answered ({status}): {out}");
    assert!(!status.success());
    assert!(
        out.contains("is damaged") && out.contains("--rebuild"),
        "{out}"
    );
    assert!(
        out.contains(&data.display().to_string()),
        "the path is named: {out}"
    );

    cluster.start_node_with(3, &["--rebuild"]).await.unwrap();
    cluster.wait_alive(3).await.unwrap();
    let parent = data.parent().unwrap();
    let aside = std::fs::read_dir(parent)
        .unwrap()
        .filter_map(Result::ok)
        .any(|e| e.file_name().to_string_lossy().starts_with("data.damaged-"));
    assert!(aside, "the damaged database is kept aside");
    // Refilled from its replicas (anti-entropy).
    let direct = cluster.client(&[3]).await.unwrap();
    cluster
        .wait_holding(&direct, 3, &[(b"kept".to_vec(), b"v".to_vec())], DEADLINE)
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn data_without_its_incarnation_is_refused_until_rebuilt() {
    let cluster = TestCluster::start(3).await.unwrap();
    let client = cluster.client(&[1, 2]).await.unwrap();
    client.put(b"kept", b"v", &[], Some(3)).await.unwrap();
    damage_stopped(&cluster, 3, |db| {
        db.open_tree("meta").unwrap().remove("incarnation").unwrap();
    })
    .await;

    let (status, out) = cluster.run_refused(3, &[]).await.unwrap();
    println!("damage: node3 without its incarnation answered ({status}): {out}");
    assert!(!status.success());
    assert!(
        out.contains("no incarnation record") && out.contains("--rebuild"),
        "{out}"
    );
    assert!(
        out.contains(&cluster.data_dir(3).unwrap().display().to_string()),
        "{out}"
    );

    cluster.start_node_with(3, &["--rebuild"]).await.unwrap();
    cluster.wait_alive(3).await.unwrap();
    assert!(
        cluster
            .log_text(3)
            .unwrap()
            .contains("rebuild: new incarnation")
    );
    let direct = cluster.client(&[3]).await.unwrap();
    cluster
        .wait_holding(&direct, 3, &[(b"kept".to_vec(), b"v".to_vec())], DEADLINE)
        .await
        .unwrap();
    // The next plain restart takes the directory as its own again.
    cluster.stop(3).await.unwrap();
    cluster.start_node(3).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_corrupt_hint_and_a_corrupt_persisted_ring_are_skipped() {
    let cluster = TestCluster::start(3).await.unwrap();
    damage_stopped(&cluster, 3, |db| {
        let meta = db.open_tree("meta").unwrap();
        let mut ring = meta
            .get("ring")
            .unwrap()
            .expect("a persisted ring")
            .to_vec();
        let i = ring.len() / 2;
        ring[i] ^= 0xFF;
        meta.insert("ring", ring).unwrap();
        // A hint for node1 whose record is garbage.
        let mut key = vec![5u8];
        key.extend_from_slice(b"node1");
        key.extend_from_slice(&key_hash(b"hinted").to_be_bytes());
        key.extend_from_slice(b"hinted");
        db.open_tree("hints")
            .unwrap()
            .insert(key, b"garbage".to_vec())
            .unwrap();
    })
    .await;
    cluster.start_node(3).await.unwrap();
    // The ring is learned again from gossip.
    cluster.wait_converged().await.unwrap();
    poll_until("node3 to report the damage", DEADLINE, async || {
        let log = cluster.log_text(3).unwrap();
        if log.contains("unreadable persisted ring") && log.contains("hint skipped") {
            Ok(())
        } else {
            Err("not yet".to_string())
        }
    })
    .await
    .unwrap();
    let client = cluster.client(&[3]).await.unwrap();
    client.put(b"after", b"v", &[], Some(3)).await.unwrap();
    assert_eq!(
        client.get(b"after", Some(3)).await.unwrap().values,
        vec![b"v".to_vec()]
    );
}
