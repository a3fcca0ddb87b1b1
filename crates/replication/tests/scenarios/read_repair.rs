//! Read repair: a quorum read sends the merged object to the replicas that
//! answered with something older, and to nobody else.

use kv_replication::testkit::TestCluster;
use kv_types::Object;

use crate::support::{eventually, local_write, replicas, stored};

#[tokio::test(start_paused = true)]
async fn a_read_repairs_the_stale_replicas_it_asked_and_only_them() {
    let c = TestCluster::start(3, 3).await;
    let key = b"repair";
    let pref = replicas(&c, key);
    let (a, b) = (c.core(&pref[0]).clone(), c.core(&pref[1]).clone());
    // a holds v2, which supersedes v1; b holds v1; the third nothing.
    let v1 = local_write(&a, key, b"v1", &Object::new()).await;
    b.replica().replicate(key, &v1).await.unwrap();
    let v2 = local_write(&a, key, b"v2", &v1).await;

    let before = c.network.delivered();
    let read = a.coordinator().get(1, key, Some(2)).await.unwrap();
    assert_eq!(read.values(), vec![b"v2".to_vec()]);
    assert_eq!(read.object, v2);
    eventually("b repaired", || {
        stored(&c, &pref[1], key) == Some(v2.clone())
    })
    .await;
    // One read of b and one repair of b went over the network; the third
    // replica was not asked, so it is not repaired either.
    assert_eq!(c.network.delivered() - before, 2);
    assert!(stored(&c, &pref[2], key).is_none());

    // Both answers agree now: nothing to repair.
    let before = c.network.delivered();
    a.coordinator().get(2, key, Some(2)).await.unwrap();
    tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    assert_eq!(c.network.delivered() - before, 1);
}
