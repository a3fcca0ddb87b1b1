//! What a restarted core does with damaged metadata that is not fatal: a
//! persisted ring that fails its checks is ignored (the ring comes back
//! from the membership), a hint that fails its checks is skipped by the
//! handoff pass while the others are delivered.

use kv_replication::testkit::TestCluster;
use kv_storage::Storage;
use kv_types::Object;
use tokio_util::sync::CancellationToken;

use crate::support::{eventually, local_write, replicas, stored};

#[tokio::test(start_paused = true)]
async fn a_corrupt_persisted_ring_is_ignored_and_the_ring_relearned() {
    let mut c = TestCluster::start(3, 3).await;
    let id = c.ids()[2].clone();
    let before = c.core(&id).cluster().ring();
    c.crash(&id).await;
    c.node(&id)
        .storage
        .put_meta("ring", b"\x01garbage")
        .unwrap();
    let core = c.restart(&id).await;
    c.settle().await;
    assert_eq!(core.cluster().members().len(), 3);
    assert_eq!(
        core.cluster().ring().partitions(),
        before.partitions(),
        "the ring is built again from the membership"
    );
}

#[tokio::test(start_paused = true)]
async fn a_corrupt_hint_is_skipped_and_the_others_delivered() {
    let c = TestCluster::start(3, 3).await;
    let ids = c.ids();
    let (holder, owner) = (&ids[0], &ids[1]);
    let (good, bad) = (b"hint-good".as_slice(), b"hint-bad".as_slice());
    let object = local_write(c.core(&replicas(&c, good)[0]), good, b"v", &Object::new()).await;
    let storage = &c.node(holder).storage;
    storage.put_hint(owner, good, &object, 1).unwrap();
    storage.put_hint(owner, bad, &object, 1).unwrap();
    assert!(storage.corrupt_hint_for_test(owner, bad));
    c.core(holder)
        .handoff()
        .pass(&CancellationToken::new())
        .await;
    eventually("the good hint delivered", || {
        stored(&c, owner, good).is_some_and(|o| o == object)
    })
    .await;
    assert!(
        stored(&c, owner, bad).is_none(),
        "the damaged hint is never delivered"
    );
}
