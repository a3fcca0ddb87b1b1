//! Ring changes that race requests: a replica that receives a copy of a
//! key it owns under neither of its rings stores it, counts it, and once
//! its view has caught up hands it to the key's owners.

use std::time::Duration;

use kv_replication::Envelope;
use kv_replication::testkit::{TestCluster, test_settings};
use kv_types::Object;
use tokio_util::sync::CancellationToken;

use crate::support::{hints, local_write, replicas, stored};

#[tokio::test(start_paused = true)]
async fn a_stray_copy_is_kept_then_handed_to_the_owners() {
    let c = TestCluster::start(4, 3).await;
    let key = b"stray";
    let owners = replicas(&c, key);
    let stranger = c.ids().into_iter().find(|n| !owners.contains(n)).unwrap();
    let from = &owners[0];
    let object = local_write(c.core(from), key, b"v", &Object::new()).await;

    // A coordinator routing with another ring (version 42) sends it a copy.
    let network = c.network.endpoint(from);
    let envelope = Envelope {
        request_id: 1,
        ring_version: 42,
        timeout: Duration::from_secs(1),
    };
    network
        .replicate(&stranger, envelope, key.to_vec(), object.clone())
        .await
        .unwrap();
    let core = c.core(&stranger).clone();
    assert_eq!(stored(&c, &stranger, key), Some(object.clone()));
    assert_eq!(core.service().strays().received(), 1);
    assert_eq!(hints(&c, &stranger, &stranger), vec![key.to_vec()]);

    // Its view may be the one that is behind: it waits before judging.
    let stop = CancellationToken::new();
    core.handoff().pass(&stop).await;
    assert_eq!(hints(&c, &stranger, &stranger), vec![key.to_vec()]);
    assert!(stored(&c, &owners[1], key).is_none());

    // After the grace period its view stands: the owners get the copy and
    // the stranger keeps none.
    tokio::time::sleep(test_settings().handoff.stray_grace).await;
    core.handoff().pass(&stop).await;
    for owner in &owners {
        assert_eq!(stored(&c, owner, key), Some(object.clone()), "{owner}");
    }
    assert!(stored(&c, &stranger, key).is_none());
    assert!(hints(&c, &stranger, &stranger).is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_stray_from_a_coordinator_with_the_same_ring_is_handed_on_at_once() {
    let c = TestCluster::start(4, 3).await;
    let key = b"stray-now";
    let owners = replicas(&c, key);
    let stranger = c.ids().into_iter().find(|n| !owners.contains(n)).unwrap();
    let from = &owners[0];
    let object = local_write(c.core(from), key, b"v", &Object::new()).await;
    let core = c.core(&stranger).clone();
    let envelope = Envelope {
        request_id: 1,
        ring_version: core.cluster().ring_version(),
        timeout: Duration::from_secs(1),
    };
    c.network
        .endpoint(from)
        .replicate(&stranger, envelope, key.to_vec(), object.clone())
        .await
        .unwrap();
    core.handoff().pass(&CancellationToken::new()).await;
    for owner in &owners {
        assert_eq!(stored(&c, owner, key), Some(object.clone()), "{owner}");
    }
    assert!(stored(&c, &stranger, key).is_none());
}

/// Ownership handoff (seed 7011 of the simulation): a node holds the only
/// copy of a write in a partition it no longer replicates (the ring
/// changed while it was down, and the join pulled only from live holders).
/// Once its view has been stable for the grace period it hands the copy
/// to the key's owners (a hint for one that is down) and keeps none.
#[tokio::test(start_paused = true)]
async fn a_former_owner_hands_what_it_holds_to_the_current_owners() {
    let mut c = TestCluster::start(5, 3).await;
    let key = b"orphan";
    let owners = replicas(&c, key);
    let former = c.ids().into_iter().find(|n| !owners.contains(n)).unwrap();
    let object = local_write(c.core(&former), key, b"v", &Object::new()).await;
    let core = c.core(&former).clone();
    let stop = CancellationToken::new();

    // Its view may be behind: nothing moves before the ring was stable
    // for the grace period.
    core.handoff().pass(&stop).await;
    assert_eq!(stored(&c, &former, key), Some(object.clone()));
    assert!(owners.iter().all(|o| stored(&c, o, key).is_none()));

    let down = owners[2].clone();
    c.crash(&down).await;
    tokio::time::sleep(test_settings().handoff.stray_grace).await;
    core.handoff().pass(&stop).await;
    for owner in &owners[..2] {
        assert_eq!(stored(&c, owner, key), Some(object.clone()), "{owner}");
    }
    assert!(stored(&c, &former, key).is_none());
    assert_eq!(hints(&c, &former, &down), vec![key.to_vec()]);
    assert_eq!(
        core.handoff()
            .stats()
            .foreign_handed
            .load(std::sync::atomic::Ordering::Relaxed),
        1
    );

    // The owner that was down gets it through the hint.
    c.restart(&down).await;
    c.settle().await;
    core.handoff().pass(&stop).await;
    assert_eq!(stored(&c, &down, key), Some(object));
    assert!(hints(&c, &former, &down).is_empty());
}
