//! Sloppy quorum: a replica that is down is stood in for by the next live
//! node on the ring walk, which keeps a hint naming it.

use kv_replication::testkit::TestCluster;
use kv_storage::Storage;

use crate::support::{hints, put, replicas, stored};

#[tokio::test(start_paused = true)]
async fn a_down_replica_is_stood_in_for_by_the_next_live_node_on_the_ring() {
    let mut c = TestCluster::start(5, 3).await;
    let key = b"sloppy";
    let pref = replicas(&c, key);
    let (a, down) = (c.core(&pref[0]).clone(), pref[1].clone());
    c.crash(&down).await;

    // The fallback: the first node after the preference list on the ring.
    let placement = a.cluster().placement();
    let ring = &placement.target;
    let p = ring.key_partition(key);
    let fallback = (1..ring.partitions())
        .map(|step| ring.owner((p + step) % ring.partitions()).clone())
        .find(|o| !pref.contains(o))
        .unwrap();

    // W=3 counts the fallback's hint.
    a.coordinator()
        .write(1, put(key, b"v", vec![], Some(3)))
        .await
        .unwrap();
    assert_eq!(hints(&c, &fallback, &down), vec![key.to_vec()]);
    let hint = c
        .node(&fallback)
        .storage
        .hints_for(&down)
        .next()
        .unwrap()
        .unwrap();
    assert_eq!(
        hint.object.live_values().collect::<Vec<_>>(),
        vec![&b"v"[..]]
    );
    // Nobody else holds a hint, and the fallback holds no object of its own.
    for n in c.ids() {
        if n != fallback {
            assert!(hints(&c, &n, &down).is_empty(), "{n}");
        }
    }
    assert!(stored(&c, &fallback, key).is_none());
    assert!(stored(&c, &down, key).is_none());
    for n in [&pref[0], &pref[2]] {
        assert!(stored(&c, n, key).is_some(), "{n}");
    }
}
