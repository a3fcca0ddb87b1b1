//! The transfer state machine: a JOINING node pulls its partitions and
//! becomes UP; a DRAINING node becomes LEFT once every node pulled what it
//! gained.

use kv_replication::testkit::{TestCluster, id};
use kv_types::NodeStatus;
use tokio_util::sync::CancellationToken;

use crate::support::{put, replicas, stored};

#[tokio::test(start_paused = true)]
async fn a_joining_node_becomes_up_and_a_draining_node_left() {
    let mut c = TestCluster::start(3, 3).await;
    let keys: Vec<Vec<u8>> = (0..60).map(|i| format!("t-{i}").into_bytes()).collect();
    let coordinator = c.core(&id(1)).clone();
    for (i, key) in keys.iter().enumerate() {
        coordinator
            .coordinator()
            .write(i as u64, put(key, b"v", vec![], Some(3)))
            .await
            .unwrap();
    }
    let stop = CancellationToken::new();

    // node4 joins: it is a pending owner of some partitions, holds nothing
    // yet, and is UP only once it pulled them all.
    let joiner = c.add(id(4), "zone-a", true).await;
    c.settle().await;
    assert_eq!(joiner.cluster().status(), NodeStatus::Joining);
    let pending = joiner.cluster().placement().pending_for(&id(4));
    assert!(!pending.is_empty());
    assert_eq!(joiner.transfer().status().pending, pending.len() as u64);
    joiner.transfer().round(&stop).await;
    assert_eq!(joiner.cluster().status(), NodeStatus::Up);
    assert_eq!(joiner.transfer().status().pending, 0);
    c.settle().await;
    let placement = joiner.cluster().placement();
    assert!(!placement.is_moving());
    for key in &keys {
        let owners = replicas(&c, key);
        assert_eq!(
            owners.contains(&id(4)),
            stored(&c, &id(4), key).is_some(),
            "{}",
            String::from_utf8_lossy(key)
        );
    }

    // node1 drains: the others pull what they gain, then node1 is LEFT.
    let leaving = c.core(&id(1)).clone();
    let plan = leaving.drain(false).await.unwrap();
    assert!(plan.started && plan.partitions > 0);
    assert_eq!(leaving.cluster().status(), NodeStatus::Draining);
    c.settle().await;
    // Not LEFT while others still have partitions to pull.
    leaving.transfer().round(&stop).await;
    assert_eq!(leaving.cluster().status(), NodeStatus::Draining);
    for n in [id(2), id(3), id(4)] {
        c.core(&n).transfer().round(&stop).await;
        assert_eq!(c.core(&n).transfer().status().pending, 0, "{n}");
    }
    leaving.transfer().round(&stop).await;
    assert_eq!(leaving.cluster().status(), NodeStatus::Left);
    c.settle().await;
    // Everyone knows it is out for good (a `kvctl remove` of it has
    // nothing left to do); the members are not.
    for n in [id(1), id(2), id(3), id(4)] {
        assert!(c.core(&n).cluster().has_left(&id(1)), "{n}");
        assert!(!c.core(&n).cluster().has_left(&id(2)), "{n}");
    }
    for key in &keys {
        let owners = replicas(&c, key);
        assert!(!owners.contains(&id(1)));
        for owner in &owners {
            assert!(stored(&c, owner, key).is_some(), "{owner}");
        }
    }
}
