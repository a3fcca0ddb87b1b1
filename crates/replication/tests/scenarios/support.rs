//! Helpers shared by the scenarios.

use std::sync::Arc;
use std::time::Duration;

use kv_replication::testkit::TestCluster;
use kv_replication::{ClientWrite, Coordinate, Core, WriteMode};
use kv_storage::Storage;
use kv_types::{NodeId, Object, VersionVector};

/// The current preference list of `key` (as the first running node sees
/// it).
pub fn replicas(cluster: &TestCluster, key: &[u8]) -> Vec<NodeId> {
    let any = &cluster.running()[0];
    cluster
        .core(any)
        .cluster()
        .placement()
        .key_replicas(key)
        .1
        .current
}

/// What `id` stores for `key` (no cache, no quorum).
pub fn stored(cluster: &TestCluster, id: &NodeId, key: &[u8]) -> Option<Object> {
    cluster.node(id).storage.get(key).unwrap()
}

/// The keys `id` holds hints for `owner` for.
pub fn hints(cluster: &TestCluster, id: &NodeId, owner: &NodeId) -> Vec<Vec<u8>> {
    cluster
        .node(id)
        .storage
        .hints_for(owner)
        .map(|h| h.unwrap().key)
        .collect()
}

/// A blind client write of `value` with quorum `w`, in context mode.
pub fn put(key: &[u8], value: &[u8], context: Vec<u8>, w: Option<u8>) -> ClientWrite {
    ClientWrite {
        key: key.to_vec(),
        value: Some(value.to_vec()),
        context,
        mode: WriteMode::Context,
        w,
    }
}

/// A write coordinated by `core`'s own replica only (no copies): the
/// object it stored.
pub async fn local_write(core: &Arc<Core>, key: &[u8], value: &[u8], seen: &Object) -> Object {
    let write = Coordinate {
        key: key.to_vec(),
        data: Some(value.to_vec()),
        context: if seen.is_empty() {
            VersionVector::new()
        } else {
            seen.join()
        },
        overwrite: false,
        written_at_ms: 1,
    };
    core.replica().coordinate(0, write).await.unwrap()
}

/// Waits (tokio's clock; paused in these tests) until `check` holds, at
/// most 30 s.
pub async fn eventually(what: &str, mut check: impl FnMut() -> bool) {
    for _ in 0..3000 {
        if check() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("never happened: {what}");
}

/// The first node found holding a hint for `owner`, waiting for one (tokio's
/// clock; paused in these tests) at most 30 s.
pub async fn hint_holder(cluster: &TestCluster, owner: &NodeId) -> NodeId {
    for _ in 0..3000 {
        if let Some(n) = cluster
            .ids()
            .into_iter()
            .find(|n| !hints(cluster, n, owner).is_empty())
        {
            return n;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("no node took a hint for {owner}");
}
