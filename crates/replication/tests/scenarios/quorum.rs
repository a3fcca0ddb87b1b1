//! Quorum arithmetic: R and W met, and "unavailable" (nothing stored)
//! told apart from "indeterminate" (may be stored).

use std::time::Duration;

use kv_replication::Error;
use kv_replication::testkit::{Link, TestCluster, id};

use crate::support::{put, replicas, stored};

#[tokio::test(start_paused = true)]
async fn writes_answer_success_unavailable_or_indeterminate_by_what_was_stored() {
    let mut c = TestCluster::start(5, 3).await;
    let key = b"quorum";
    let pref = replicas(&c, key);
    let others: Vec<_> = c.ids().into_iter().filter(|n| !pref.contains(n)).collect();
    let a = c.core(&pref[0]).clone();

    // W=3 met: every replica holds it when the write returns.
    let written = a
        .coordinator()
        .write(1, put(key, b"v1", vec![], Some(3)))
        .await
        .unwrap();
    for n in &pref {
        let o = stored(&c, n, key).unwrap();
        assert_eq!(o.live_values().collect::<Vec<_>>(), vec![&b"v1"[..]], "{n}");
    }

    // Only the coordinating replica left, and no fallback: W=2 cannot be
    // met, so the write is refused before anything is stored.
    for n in pref[1..].iter().chain(&others) {
        c.crash(n).await;
    }
    let err = a
        .coordinator()
        .write(2, put(key, b"v2", written.context.clone(), Some(2)))
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            Error::Unavailable {
                needed: 2,
                got: 1,
                ..
            }
        ),
        "{err}"
    );
    let o = stored(&c, &pref[0], key).unwrap();
    assert_eq!(o.live_values().collect::<Vec<_>>(), vec![&b"v1"[..]]);

    // Replicas alive but unreachable from the coordinator, no fallback:
    // the coordinating replica stored it, its copies never answered.
    for n in &pref[1..] {
        c.restart(n).await;
        c.network.cut(&pref[0], n);
    }
    c.settle().await;
    let err = a
        .coordinator()
        .write(3, put(key, b"v3", written.context.clone(), Some(2)))
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            Error::Indeterminate {
                needed: 2,
                stored: 1,
                ..
            }
        ),
        "{err}"
    );
    let o = stored(&c, &pref[0], key).unwrap();
    assert_eq!(o.live_values().collect::<Vec<_>>(), vec![&b"v3"[..]]);
    for n in &pref[1..] {
        let o = stored(&c, n, key).unwrap();
        assert_eq!(o.live_values().collect::<Vec<_>>(), vec![&b"v1"[..]], "{n}");
    }
}

#[tokio::test(start_paused = true)]
async fn reads_need_r_answers_and_replace_a_replica_that_fails() {
    let mut c = TestCluster::start(5, 3).await;
    let key = b"reads";
    let pref = replicas(&c, key);
    let a = c.core(&pref[0]).clone();
    a.coordinator()
        .write(1, put(key, b"v", vec![], Some(3)))
        .await
        .unwrap();

    // A replica that does not answer is replaced by the next one.
    c.network.cut(&pref[0], &pref[1]);
    let read = a.coordinator().get(2, key, Some(2)).await.unwrap();
    assert_eq!(read.values(), vec![b"v".to_vec()]);
    c.network.heal();

    // R=3 with one replica down: fewer than R are alive.
    c.crash(&pref[2]).await;
    let err = a.coordinator().get(3, key, Some(3)).await.unwrap_err();
    assert!(
        matches!(
            err,
            Error::Unavailable {
                needed: 3,
                got: 2,
                ..
            }
        ),
        "{err}"
    );
    // R above N is not a request this cluster can serve.
    let err = a.coordinator().get(4, key, Some(4)).await.unwrap_err();
    assert!(matches!(err, Error::Refused(_)), "{err}");
    assert!(err.to_string().contains("R=4 is not possible"), "{err}");
    // R=2 is still met.
    let read = a.coordinator().get(5, key, Some(2)).await.unwrap();
    assert_eq!(read.values(), vec![b"v".to_vec()]);
    // A key that was never written reads as deleted (not found).
    let absent = c
        .core(&id(1))
        .coordinator()
        .get(6, b"never", Some(1))
        .await
        .unwrap();
    assert!(absent.is_deleted());
}

#[tokio::test(start_paused = true)]
async fn a_full_disk_refuses_writes_naming_the_node_and_reads_go_on() {
    let c = TestCluster::start(3, 3).await;
    let key = b"full";
    let a = c.core(&id(1)).clone();
    a.coordinator()
        .write(1, put(key, b"v1", vec![], Some(3)))
        .await
        .unwrap();
    for n in c.ids() {
        c.node(&n).storage.set_disk_full_for_test(true);
    }
    // Every replica refuses: a storage failure, nothing stored.
    let e = a
        .coordinator()
        .write(2, put(key, b"v2", vec![], None))
        .await
        .unwrap_err();
    assert!(matches!(e, Error::Storage { .. }), "{e:?}");
    assert!(e.is_disk_full(), "{e}");
    assert!(e.to_string().contains("disk full on node"), "{e}");
    // Reads go on.
    let read = a.coordinator().get(3, key, None).await.unwrap();
    assert_eq!(
        read.object.live_values().collect::<Vec<_>>(),
        vec![&b"v1"[..]]
    );
    // Space is back on one replica: it coordinates, the write is stored there.
    let back = id(2);
    c.node(&back).storage.set_disk_full_for_test(false);
    let e = a
        .coordinator()
        .write(4, put(key, b"v3", vec![], Some(1)))
        .await;
    assert!(e.is_ok(), "{e:?}");
    // Blind write (empty context): v3 beside v1 as a sibling, on `back`.
    let there = stored(&c, &back, key).unwrap();
    assert!(
        there.live_values().any(|v| v == b"v3"),
        "{:?}",
        there.live_values().collect::<Vec<_>>()
    );
}

/// A remote replica applied a coordinated write, then crashed before its
/// answer came back (found by the simulation, seed 1674): the call may
/// have executed, so the coordinator answers "indeterminate" and never
/// has the next replica coordinate the same write again, which would
/// give the one write a second dot (and so a second, identical sibling).
#[tokio::test(start_paused = true)]
async fn a_write_whose_replica_crashed_before_answering_is_not_coordinated_again() {
    let mut c = TestCluster::start(5, 3).await;
    let key = b"crashed-before-answering";
    let pref = replicas(&c, key);
    let coordinator = c.ids().into_iter().find(|n| !pref.contains(n)).unwrap();
    // Every replica's answer to the coordinator is lost, 100 ms after it
    // leaves (well within the 500 ms replica deadline).
    for n in &pref {
        c.network.set_link(
            n,
            &coordinator,
            Link {
                delay: Duration::from_millis(100),
                loss: 1.0,
                ..Link::default()
            },
        );
    }
    let core = c.core(&coordinator).clone();
    let write = tokio::spawn(async move {
        core.coordinator()
            .write(1, put(key, b"once", vec![], None))
            .await
    });
    // The first replica asked applies it; it crashes while its answer
    // travels.
    let mut applied = None;
    for _ in 0..50 {
        applied = pref.iter().find(|n| stored(&c, n, key).is_some()).cloned();
        if applied.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let applied = applied.expect("a replica coordinated the write");
    c.crash(&applied).await;

    let e = write.await.unwrap().unwrap_err();
    assert!(matches!(e, Error::Indeterminate { .. }), "{e:?}");
    // No other replica coordinated it: the write has exactly one dot.
    for n in pref.iter().filter(|n| **n != applied) {
        assert_eq!(stored(&c, n, key), None, "{n} coordinated it again");
    }
    c.network.heal();
    c.restart(&applied).await;
    let read = c
        .core(&coordinator)
        .coordinator()
        .get(2, key, None)
        .await
        .unwrap();
    assert_eq!(read.values(), vec![b"once".to_vec()]);
}
