//! The router's fan-out rules on the in-memory network: a read hedges past
//! a frozen replica, the hedge budget bounds hedges when the whole cluster
//! slows, and a write that may have been applied is never coordinated a
//! second time.

use std::sync::Arc;
use std::time::Duration;

use kv_replication::testkit::{Link, TestCluster, id, test_settings};
use kv_replication::{Coordinate, Core, Error};
use kv_router::{CandidateInputs, Op, RouterSettings, Scored};
use kv_types::{NodeId, VersionVector};

use crate::support::{put, replicas, stored};

/// Four nodes (so that a coordinator can hold no replica of a key), every
/// load reporter running, and a router that trusts a peer's own latency
/// after 5 samples (instead of 1,000).
async fn cluster() -> TestCluster {
    let router = RouterSettings {
        min_latency_samples: 5,
        ..RouterSettings::default()
    };
    let c = TestCluster::with_router(4, 2, test_settings(), router).await;
    c.start_reporters();
    // Every node has announced a report (one period).
    tokio::time::sleep(Duration::from_millis(1100)).await;
    c
}

/// A key none of whose replicas is `coordinator`.
fn key_away_from(c: &TestCluster, coordinator: &NodeId) -> Vec<u8> {
    (0..)
        .map(|i| format!("routed-{i}").into_bytes())
        .find(|k| !replicas(c, k).contains(coordinator))
        .unwrap()
}

/// The link between `a` and `b` waits `delay` each way.
fn delay_link(c: &TestCluster, a: &NodeId, b: &NodeId, delay: Duration) {
    let link = Link {
        delay,
        ..Link::default()
    };
    c.network.set_link(a, b, link);
    c.network.set_link(b, a, link);
}

/// Every link between `coordinator` and the others waits `delay` each way.
fn delay_links(c: &TestCluster, coordinator: &NodeId, delay: Duration) {
    for other in c.ids().iter().filter(|n| *n != coordinator) {
        delay_link(c, coordinator, other, delay);
    }
}

/// The one-way delay of every link from node4 in the tests below.
const HOP: Duration = Duration::from_millis(1);

/// Node4 as the coordinator of a key it holds no replica of, written to
/// all three replicas, with every link from node4 delayed by [`HOP`]:
/// the coordinator, the key and the coordinator's core.
async fn coordinator_and_key(c: &TestCluster) -> (NodeId, Vec<u8>, Arc<Core>) {
    let coordinator = id(4);
    let key = key_away_from(c, &coordinator);
    let core = c.core(&coordinator).clone();
    core.coordinator()
        .write(1, put(&key, b"v", vec![], Some(3)))
        .await
        .unwrap();
    delay_links(c, &coordinator, HOP);
    (coordinator, key, core)
}

#[tokio::test(start_paused = true)]
async fn a_read_of_a_frozen_replica_completes_within_the_hedge_delay_plus_one_read() {
    let c = cluster().await;
    let (_, key, core) = coordinator_and_key(&c).await;
    // Warm up: latencies (2 ms round trips) and a hedge budget.
    for i in 0..200 {
        core.coordinator().get(10 + i, &key, Some(1)).await.unwrap();
    }
    let pref = replicas(&c, &key);
    let scoring = core.scoring();
    let first = scoring
        .decide(core.cluster(), &pref, Op::Get, &key, 1)
        .decision
        .order[0]
        .clone();
    let (sent_before, won_before, _) = scoring.hedges();

    // Freeze the replica the router reads first. The read hedges to the
    // next replica after the hedge delay (p95 of recent reads, about one
    // round trip) and completes one round trip later.
    c.network.pause(&first);
    let start = tokio::time::Instant::now();
    let read = core.coordinator().get(1000, &key, Some(1)).await.unwrap();
    let took = start.elapsed();
    assert_eq!(read.values(), vec![b"v".to_vec()]);
    let (sent, won, _) = scoring.hedges();
    assert_eq!(sent, sent_before + 1, "one hedge sent");
    assert_eq!(won, won_before + 1, "and it answered first");
    let round_trip = 2 * HOP;
    let hedge_delay = round_trip; // p95 of reads that all took one round trip
    assert!(
        took <= hedge_delay + round_trip + Duration::from_millis(1),
        "the read took {took:?}: more than the hedge delay plus one read"
    );
    // The frozen replica's request runs on: it is still in flight.
    assert_eq!(scoring.in_flight(&first), 1);

    // While it stays frozen, the next reads avoid it at once: the request
    // the hedge outran floors its latency with its age, which grows (not
    // only once that age is over STUCK_FACTOR times its estimate, 10 ms at
    // 2-ms reads, as before `Scorer::outrun`: up to three reads were sent
    // to it then, each costing one hedge delay). (The loop lasts about
    // 410 ms of the paused clock: within the test cluster's 500-ms replica
    // timeout, so the frozen request is still in flight, not timed out,
    // when it ends.)
    for i in 0..200 {
        let start = tokio::time::Instant::now();
        let before = scoring.hedges().0;
        core.coordinator()
            .get(2000 + i, &key, Some(1))
            .await
            .unwrap();
        let d = scoring.decide(core.cluster(), &pref, Op::Get, &key, 1);
        assert!(
            start.elapsed() <= round_trip + Duration::from_millis(1),
            "read {i} took {:?}; frozen {first}; now {:#?}",
            start.elapsed(),
            d.inputs
        );
        assert_eq!(
            scoring.hedges().0,
            before,
            "read {i} was sent to the frozen replica and hedged past it"
        );
    }
    assert_eq!(scoring.in_flight(&first), 1, "only the outrun read");
    let estimate = |scoring: &kv_replication::Scoring| {
        let d = scoring.decide(core.cluster(), &pref, Op::Get, &key, 1);
        let c = d.inputs.candidates.iter().find(|c| c.id == first).cloned();
        c.and_then(|c| c.latency_us).unwrap()
    };
    let frozen_for = start.elapsed();
    assert!(estimate(scoring) < 10_000.0, "{}", estimate(scoring));

    // Resumed, it answers the request it was sent at the freeze: the
    // router hears it, and the freeze is in the replica's estimate.
    c.network.resume(&first);
    let resumed = tokio::time::Instant::now();
    while scoring.in_flight(&first) > 0 {
        assert!(
            resumed.elapsed() < Duration::from_millis(100),
            "the frozen replica's requests never ended after it resumed"
        );
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    assert!(
        estimate(scoring) > frozen_for.as_secs_f64() * 1e6 / 10.0,
        "estimate {} us after a {frozen_for:?} freeze",
        estimate(scoring)
    );
}

#[tokio::test(start_paused = true)]
async fn a_uniformly_slow_cluster_hedges_no_more_than_the_budget() {
    let c = cluster().await;
    let (coordinator, key, core) = coordinator_and_key(&c).await;
    let mut requests = 0u64;
    for i in 0..400 {
        core.coordinator().get(10 + i, &key, Some(1)).await.unwrap();
        requests += 1;
    }
    let budget = RouterSettings::default().hedge_budget;
    // Every replica turns slower together, and slower with every read (20
    // ms each way, then 0.5 ms more each time, under the 500-ms read
    // timeout): each read outlasts every one before it, so it passes the
    // hedge delay at any quantile and would hedge without a budget.
    for i in 0..400 {
        delay_links(&c, &coordinator, Duration::from_micros(20_000 + 500 * i));
        core.coordinator()
            .get(1000 + i, &key, Some(1))
            .await
            .unwrap();
        requests += 1;
    }
    let (sent, _, denied) = core.scoring().hedges();
    assert!(
        sent as f64 <= budget * requests as f64,
        "{sent} hedges for {requests} requests: over the {budget} budget"
    );
    assert!(sent > 0, "the slowdown made reads hedge");
    assert!(denied > 0, "the budget refused hedges");
}

#[tokio::test(start_paused = true)]
async fn a_write_that_may_have_been_applied_is_not_coordinated_again() {
    let c = cluster().await;
    let coordinator = id(4);
    let key = key_away_from(&c, &coordinator);
    let pref = replicas(&c, &key);
    let core = c.core(&coordinator).clone();
    // Requests reach the replicas, but no answer comes back: the replica
    // that coordinates applies the write and the coordinator cannot know.
    for replica in &pref {
        c.network.set_link(
            replica,
            &coordinator,
            Link {
                cut: true,
                ..Link::default()
            },
        );
    }
    let e = core
        .coordinator()
        .write(77, put(&key, b"once", vec![], Some(2)))
        .await
        .unwrap_err();
    assert!(matches!(e, Error::Indeterminate { .. }), "{e}");
    let holders: Vec<&NodeId> = pref
        .iter()
        .filter(|n| stored(&c, n, &key).is_some())
        .collect();
    assert_eq!(holders.len(), 1, "coordinated on {holders:?}");

    // The replica that applied it answers a repeat of the request with its
    // first outcome: the same object, no second dot.
    let holder = holders[0].clone();
    let first = stored(&c, &holder, &key).unwrap();
    let again = Coordinate {
        key: key.clone(),
        data: Some(b"once".to_vec()),
        context: VersionVector::new(),
        overwrite: false,
        written_at_ms: 2,
    };
    let answer = c
        .core(&holder)
        .replica()
        .coordinate(77, again)
        .await
        .unwrap();
    assert_eq!(answer, first);
    assert_eq!(stored(&c, &holder, &key).unwrap(), first);
}

#[tokio::test(start_paused = true)]
async fn a_crash_shows_in_the_next_decision_however_long_the_score_cache_lives() {
    // The router's candidates are cached (liveness, labels, reports);
    // the cache follows the membership view, not only its lifetime: an
    // hour-long score cache still sees a crash at once.
    let router = RouterSettings {
        min_latency_samples: 5,
        score_cache: Duration::from_secs(3600),
        ..RouterSettings::default()
    };
    // No reports needed: liveness is what is looked at.
    let mut c = TestCluster::with_router(4, 2, test_settings(), router).await;
    let coordinator = id(4);
    let key = key_away_from(&c, &coordinator);
    let pref = replicas(&c, &key);
    let core = c.core(&coordinator).clone();
    let decide = || {
        core.scoring()
            .decide(core.cluster(), &pref, Op::Get, &key, 1)
            .inputs
            .candidates
    };
    assert!(decide().iter().all(|c| c.alive), "{:?}", decide());
    let victim = pref[0].clone();
    c.crash(&victim).await;
    let after = decide();
    let dead: Vec<&NodeId> = after.iter().filter(|c| !c.alive).map(|c| &c.id).collect();
    assert_eq!(dead, vec![&victim]);
    c.restart(&victim).await;
    assert!(decide().iter().all(|c| c.alive), "{:?}", decide());
}

#[tokio::test(start_paused = true)]
async fn a_restarted_replica_is_not_ranked_by_its_answers_before_the_restart() {
    // A replica whose last answers were slow (as one shutting down)
    // restarts: the coordinator ranks it with its peers at once (the
    // cluster mean, slow start on), not last until its old estimate has
    // drifted down (48 s after a restart in bench-router's cold-restart).
    let (mut c, core, key, pref, victim) = a_replica_ranked_slowest().await;
    let (before, ranked) = victim_in_a_read(&core, &pref, &key, &victim);
    assert!(before.latency_us.unwrap() > 50_000.0, "{before:?}");
    assert_eq!(ranked.dimensions.unwrap().latency, 0.1, "{ranked:?}");

    c.crash(&victim).await;
    // A read while it is down: the coordinator sees it dead.
    core.coordinator().get(200, &key, Some(2)).await.unwrap();
    c.restart(&victim).await;
    let (back, ranked) = victim_in_a_read(&core, &pref, &key, &victim);
    assert_eq!(back.latency_samples, 0, "{back:?}");
    assert!(back.latency_us.unwrap() < 10_000.0, "{back:?}");
    assert_eq!(ranked.dimensions.unwrap().latency, 1.0, "{ranked:?}");
    assert!(back.ramp < 1.0, "slow start: {back:?}");
}

/// A coordinator whose reads of a key have ranked that key's first replica
/// slowest (its link delayed 100 ms for ten reads at R = 3): the cluster,
/// the coordinator's core, the key, its preference list and the slow
/// replica.
async fn a_replica_ranked_slowest() -> (TestCluster, Arc<Core>, Vec<u8>, Vec<NodeId>, NodeId) {
    let c = cluster().await;
    let (coordinator, key, core) = coordinator_and_key(&c).await;
    // Every replica answers every read (R = 3): estimates for all three.
    for i in 0..20 {
        core.coordinator().get(10 + i, &key, Some(3)).await.unwrap();
    }
    let pref = replicas(&c, &key);
    let victim = pref[0].clone();
    delay_link(&c, &coordinator, &victim, Duration::from_millis(100));
    for i in 0..10 {
        core.coordinator()
            .get(100 + i, &key, Some(3))
            .await
            .unwrap();
    }
    delay_link(&c, &coordinator, &victim, HOP);
    (c, core, key, pref, victim)
}

/// The victim in a read decision of `core`'s: its inputs and its place.
fn victim_in_a_read(
    core: &Core,
    pref: &[NodeId],
    key: &[u8],
    victim: &NodeId,
) -> (CandidateInputs, Scored) {
    let d = core.scoring().decide(core.cluster(), pref, Op::Get, key, 1);
    let input = d.inputs.candidates.iter().find(|c| &c.id == victim);
    let scored = d.decision.scored.iter().find(|s| &s.id == victim);
    (input.cloned().unwrap(), scored.cloned().unwrap())
}

/// The victim's candidate inputs in a read decision of `core`'s.
fn victim_inputs(core: &Core, pref: &[NodeId], key: &[u8], victim: &NodeId) -> CandidateInputs {
    victim_in_a_read(core, pref, key, victim).0
}

#[tokio::test(start_paused = true)]
async fn a_restart_too_quick_for_the_failure_detector_still_wipes_the_estimate() {
    // The replica restarts between two of the coordinator's decisions: no
    // decision ever saw it dead. Its new process generation says it
    // restarted (as chitchat's generation id does on a running node).
    let (mut c, core, key, pref, victim) = a_replica_ranked_slowest().await;
    let before = victim_inputs(&core, &pref, &key, &victim);
    assert!(before.latency_us.unwrap() > 50_000.0, "{before:?}");
    c.crash(&victim).await;
    c.restart(&victim).await;
    let back = victim_inputs(&core, &pref, &key, &victim);
    assert!(back.alive, "{back:?}");
    assert_eq!(back.latency_samples, 0, "{back:?}");
    assert!(back.latency_us.unwrap() < 10_000.0, "{back:?}");
    assert!(back.ramp < 1.0, "slow start: {back:?}");
}

#[tokio::test(start_paused = true)]
async fn a_replica_that_was_only_thought_dead_keeps_its_estimate() {
    // The same process, convicted and then believed again (a pause or a
    // partition): what it answered still describes it.
    let (c, core, key, pref, victim) = a_replica_ranked_slowest().await;
    let before = victim_inputs(&core, &pref, &key, &victim);
    c.membership.set_alive(None, &victim, false);
    c.settle().await;
    let down = victim_inputs(&core, &pref, &key, &victim);
    assert!(!down.alive, "{down:?}");
    c.membership.set_alive(None, &victim, true);
    c.settle().await;
    let back = victim_inputs(&core, &pref, &key, &victim);
    assert!(back.alive, "{back:?}");
    assert_eq!(back.latency_samples, before.latency_samples, "{back:?}");
    assert!(back.latency_us.unwrap() > 50_000.0, "{back:?}");
}
