//! A cluster that is dropped gives its memory back: nothing the test
//! harness or the cores hold keeps a node's parts alive once the cluster
//! and the runtime its tasks ran on are gone (the simulation builds
//! thousands of clusters in one process).

use std::sync::{Arc, Weak};

use kv_replication::testkit::TestCluster;
use kv_replication::{PeerService, Replica};
use kv_storage::MemoryEngine;

use crate::support::put;

/// Weak handles on what each node of `c` holds.
fn parts(c: &TestCluster) -> Vec<(Weak<MemoryEngine>, Weak<PeerService>, Weak<Replica>)> {
    c.ids()
        .iter()
        .map(|id| {
            let core = c.core(id);
            (
                Arc::downgrade(&c.node(id).storage),
                Arc::downgrade(core.service()),
                Arc::downgrade(core.replica()),
            )
        })
        .collect()
}

#[test]
fn a_dropped_cluster_frees_its_nodes() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap();
    let (before, after) = runtime.block_on(async {
        let mut c = TestCluster::start(4, 3).await;
        for id in c.ids() {
            c.start_background(&id);
        }
        c.start_reporters();
        let first = c.ids()[0].clone();
        c.core(&first)
            .coordinator()
            .write(1, put(b"k", b"v", vec![], Some(3)))
            .await
            .unwrap();
        // A restarted node: its earlier life must be freed too.
        let before = parts(&c);
        c.crash(&first).await;
        c.restart(&first).await;
        c.start_background(&first);
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
        let after = parts(&c);
        (before, after)
    });
    // The runtime's tasks (background loops, copies in flight) go with it.
    drop(runtime);
    for (i, (storage, service, replica)) in before.iter().chain(&after).enumerate() {
        assert!(
            service.upgrade().is_none(),
            "node part {i}: its peer service lives on"
        );
        assert!(
            replica.upgrade().is_none(),
            "node part {i}: its replica lives on"
        );
        assert!(
            storage.upgrade().is_none(),
            "node part {i}: its storage lives on"
        );
    }
}
