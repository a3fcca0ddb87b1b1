//! The stateful scorer: what it learns, and the snapshot it takes.

use std::time::{Duration, Instant};

use kv_types::NodeId;

use super::*;
use crate::inputs::{BreakerInput, ReportInputs, STUCK_FACTOR};
use crate::{Exclusion, Mode, decide};

fn id(n: &str) -> NodeId {
    NodeId::new(n).unwrap()
}

fn scorer() -> Scorer {
    Scorer::new(RouterSettings::default(), id("node1")).unwrap()
}

fn report(age_ms: u64) -> ReportInputs {
    ReportInputs {
        age_ms,
        cpu: 0.0,
        queue: 0,
        backlog: 0,
        hit_ratio: 0.5,
        hot: false,
        repair: false,
    }
}

fn candidate(name: &str) -> Candidate {
    Candidate {
        id: id(name),
        alive: true,
        up: true,
        suspect: false,
        zone: "z1".into(),
        host: name.into(),
        report: Some(report(0)),
        hints_pending: 0,
        generation: None,
    }
}

/// `candidate(name)` with its process generation known.
fn generation(name: &str, generation: u64, alive: bool) -> Candidate {
    Candidate {
        alive,
        generation: Some(generation),
        ..candidate(name)
    }
}

/// The coordinator's zone in these tests.
static Z1: std::sync::LazyLock<std::sync::Arc<str>> = std::sync::LazyLock::new(|| "z1".into());

fn ask() -> Ask<'static> {
    Ask {
        op: Op::Get,
        key_hash: 42,
        r: 1,
        zone: &Z1,
        members: 3,
    }
}

fn ok(ms: u64) -> Outcome {
    Outcome::Ok {
        latency: Duration::from_millis(ms),
    }
}

fn one(s: &mut Scorer, c: Candidate, now: Instant) -> crate::CandidateInputs {
    s.snapshot(&[c], ask(), now).candidates.remove(0)
}

#[test]
fn requests_in_flight_count_and_the_oldest_sets_a_latency_floor() {
    let (mut s, t0) = (scorer(), Instant::now());
    let first = s.start(&id("node2"), Op::Get, t0);
    let _second = s.start(&id("node2"), Op::Get, t0 + Duration::from_millis(100));
    let c = one(&mut s, candidate("node2"), t0 + Duration::from_millis(150));
    assert_eq!(c.in_flight, 2);
    assert_eq!(c.oldest_us, Some(150_000.0));
    // No answer yet: the age is all there is.
    assert_eq!(c.effective_latency_us(), Some(150_000.0));
    s.finish(&first);
    let c = one(&mut s, candidate("node2"), t0 + Duration::from_millis(150));
    assert_eq!((c.in_flight, c.oldest_us), (1, Some(50_000.0)));
}

#[test]
fn a_request_sent_before_a_mode_switch_does_not_end_one_sent_after_it() {
    let (mut s, t0) = (scorer(), Instant::now());
    let before = s.start(&id("node2"), Op::Get, t0);
    s.set_mode(Mode::P2c);
    let _after = s.start(&id("node2"), Op::Get, t0);
    s.finish(&before);
    assert_eq!(s.in_flight(&id("node2")), 1);
}

#[test]
fn a_read_overdue_by_the_read_estimate_floors_the_peer_for_writes_too() {
    let (mut s, t0) = (scorer(), Instant::now());
    let ms = Duration::from_millis;
    for k in 0..20 {
        s.record(&id("node2"), Op::Get, ok(1), t0 + ms(k));
        s.record(&id("node2"), Op::Put, ok(10), t0 + ms(k));
    }
    let put = Ask {
        op: Op::Put,
        ..ask()
    };
    let write = |s: &mut Scorer, at| {
        s.snapshot(&[candidate("node2")], put, at)
            .candidates
            .remove(0)
    };
    // A write in flight for 8 ms is within five write-times: not stuck.
    let slow_write = s.start(&id("node2"), Op::Put, t0 + ms(20));
    let c = write(&mut s, t0 + ms(28));
    assert!(!c.overdue && !c.floored(), "{c:?}");
    s.finish(&slow_write);
    // A read in flight for 8 ms is eight read-times: the peer is not
    // answering, and a write must not be routed to it either, though 8 ms
    // is under five write-times (50 ms), the bound writes were judged by.
    let stuck_read = s.start(&id("node2"), Op::Get, t0 + ms(30));
    let c = write(&mut s, t0 + ms(38));
    assert!(c.overdue && c.floored(), "{c:?}");
    assert!(c.oldest_us.is_some_and(|o| o < STUCK_FACTOR * 10_000.0));
    // 4 ms is under five read-times: not yet.
    let c = write(&mut s, t0 + ms(34));
    assert!(!c.overdue && !c.floored(), "{c:?}");
    s.finish(&stuck_read);
    let c = write(&mut s, t0 + ms(38));
    assert!(!c.overdue && !c.floored(), "{c:?}");
}

#[test]
fn an_outrun_read_floors_its_peer_at_once_until_the_reads_in_flight_then_have_ended() {
    let (mut s, t0) = (scorer(), Instant::now());
    let ms = Duration::from_millis;
    for k in 0..20 {
        s.record(&id("node2"), Op::Get, ok(1), t0 + ms(k));
    }
    let older = s.start(&id("node2"), Op::Get, t0 + ms(20));
    let loser = s.start(&id("node2"), Op::Get, t0 + ms(21));
    // A write in flight at the outrun does not extend it.
    let write = s.start(&id("node2"), Op::Put, t0 + ms(22));
    // 3 ms is under five read-times: neither stuck nor floored yet.
    let c = one(&mut s, candidate("node2"), t0 + ms(24));
    assert!(!c.floored(), "{c:?}");
    // The read `loser` served was answered by another replica first.
    s.outrun(&id("node2"));
    let later = s.start(&id("node2"), Op::Get, t0 + ms(25));
    let c = one(&mut s, candidate("node2"), t0 + ms(24));
    assert!(c.outrun && c.floored(), "{c:?}");
    assert_eq!(c.effective_latency_us(), Some(4_000.0));
    // The loser answers; the older request it waited behind still floors.
    s.finish(&loser);
    let c = one(&mut s, candidate("node2"), t0 + ms(26));
    assert!(c.outrun && c.floored(), "{c:?}");
    // Once every read in flight at the outrun has ended, a read sent after
    // it (1 ms old) and the write (4 ms old, under five read-times) are
    // judged as any other.
    s.finish(&older);
    let c = one(&mut s, candidate("node2"), t0 + ms(26));
    assert!(!c.outrun && !c.floored(), "{c:?}");
    s.finish(&later);
    s.finish(&write);
    // Nothing in flight: an outrun marks nothing.
    s.outrun(&id("node2"));
    let c = one(&mut s, candidate("node2"), t0 + ms(27));
    assert!(!c.outrun && !c.floored(), "{c:?}");
    let fresh = s.start(&id("node2"), Op::Get, t0 + ms(27));
    let c = one(&mut s, candidate("node2"), t0 + ms(28));
    assert!(!c.outrun && !c.floored(), "{c:?}");
    s.finish(&fresh);
}

/// Asserts that node2's latency floor is `floor_us` a millisecond before
/// `end` and gone at `end`.
fn floor_ends_at(s: &mut Scorer, end: Instant, floor_us: f64) {
    let c = one(s, candidate("node2"), end - Duration::from_millis(1));
    assert_eq!(c.oldest_us, Some(floor_us), "just before the end");
    let c = one(s, candidate("node2"), end);
    assert_eq!(c.oldest_us, None, "at the end");
}

#[test]
fn an_abandoned_request_floors_the_latency_until_an_answer_its_deadline_or_its_hold() {
    let (mut s, t0) = (scorer(), Instant::now());
    let ms = Duration::from_millis;
    let stuck = s.start(&id("node2"), Op::Get, t0);
    s.abandon(&stuck, t0, t0 + ms(500), t0 + ms(30));
    // The floor is the age it had when abandoned, not its age now.
    let c = one(&mut s, candidate("node2"), t0 + ms(40));
    assert_eq!((c.in_flight, c.oldest_us), (0, Some(30_000.0)));
    // It holds five times that age (150 ms) after it was abandoned, then
    // no longer counts: the deadline (500 ms) is further.
    floor_ends_at(&mut s, t0 + ms(180), 30_000.0);
    // Held to the deadline with `abandoned_hold` 0 (the old rule).
    let settings = RouterSettings {
        abandoned_hold: 0.0,
        ..RouterSettings::default()
    };
    let mut held = Scorer::new(settings, id("node1")).unwrap();
    let stuck = held.start(&id("node2"), Op::Get, t0);
    held.abandon(&stuck, t0, t0 + ms(500), t0 + ms(30));
    floor_ends_at(&mut held, t0 + ms(500), 30_000.0);
    // A deadline nearer than the hold ends it first.
    let stuck = s.start(&id("node2"), Op::Get, t0 + ms(200));
    s.abandon(&stuck, t0 + ms(200), t0 + ms(260), t0 + ms(240));
    floor_ends_at(&mut s, t0 + ms(260), 40_000.0);
    // An answer from the peer clears it at once.
    let again = s.start(&id("node2"), Op::Get, t0 + ms(50));
    s.abandon(&again, t0 + ms(50), t0 + ms(550), t0 + ms(55));
    s.record(
        &id("node2"),
        Op::Get,
        Outcome::Ok { latency: ms(2) },
        t0 + ms(60),
    );
    let c = one(&mut s, candidate("node2"), t0 + ms(70));
    assert_eq!(c.oldest_us, None);
}

#[test]
fn each_request_abandoned_without_an_answer_between_doubles_the_next_hold() {
    let (mut s, t0) = (scorer(), Instant::now());
    let ms = Duration::from_millis;
    let far = t0 + Duration::from_secs(60);
    // A frozen peer: each re-try is abandoned after the same 2 ms;
    // its floor holds 10, 20, 40, 80, 160, then 160 ms again.
    let mut at = t0;
    for hold in [10, 20, 40, 80, 160, 160] {
        let t = s.start(&id("node2"), Op::Get, at);
        s.abandon(&t, at, far, at + ms(2));
        let end = at + ms(2) + ms(hold);
        floor_ends_at(&mut s, end, 2_000.0);
        at = end;
    }
    // An answer starts the count again: the next hold is 10 ms.
    s.record(&id("node2"), Op::Get, ok(1), at);
    let t = s.start(&id("node2"), Op::Get, at);
    s.abandon(&t, at, far, at + ms(2));
    floor_ends_at(&mut s, at + ms(12), 2_000.0);
}

#[test]
fn the_floor_is_the_larger_of_an_abandoned_age_and_the_oldest_in_flight() {
    let (mut s, t0) = (scorer(), Instant::now());
    let ms = Duration::from_millis;
    let lost = s.start(&id("node2"), Op::Get, t0);
    s.abandon(&lost, t0, t0 + ms(1000), t0 + ms(20));
    let late = s.start(&id("node2"), Op::Get, t0 + ms(100));
    s.abandon(&late, t0 + ms(100), t0 + ms(900), t0 + ms(105));
    // Two abandons: the larger age (20 ms) and the later deadline count.
    let c = one(&mut s, candidate("node2"), t0 + ms(110));
    assert_eq!(c.oldest_us, Some(20_000.0));
    let _open = s.start(&id("node2"), Op::Get, t0 + ms(110));
    let c = one(&mut s, candidate("node2"), t0 + ms(125));
    assert_eq!((c.in_flight, c.oldest_us), (1, Some(20_000.0)));
    // An in-flight request older than the floor takes over.
    let c = one(&mut s, candidate("node2"), t0 + ms(150));
    assert_eq!(c.oldest_us, Some(40_000.0));
    let c = one(&mut s, candidate("node2"), t0 + ms(999));
    assert_eq!(c.oldest_us, Some(889_000.0));
}

#[test]
fn a_peer_with_few_samples_is_ranked_no_better_than_the_cluster_mean() {
    let (mut s, t0) = (scorer(), Instant::now());
    for _ in 0..1000 {
        s.record(&id("node2"), Op::Get, ok(2), t0);
    }
    s.record(&id("node3"), Op::Get, ok(1), t0);
    let mean = s.cluster_mean_us(Op::Get).unwrap();
    assert!((mean - 2000.0).abs() < 1e-6, "{mean}");
    // One fast answer does not rank it above the mean...
    let c = one(&mut s, candidate("node3"), t0);
    assert_eq!((c.latency_us, c.latency_samples), (Some(mean), 1));
    // ...but slow ones rank it below at once (answers 50 ms apart: each
    // weighs the seed's alpha).
    let later = t0 + Duration::from_millis(250);
    for k in 1..=5 {
        s.record(
            &id("node3"),
            Op::Get,
            ok(50),
            t0 + Duration::from_millis(50 * k),
        );
    }
    let c = one(&mut s, candidate("node3"), later);
    let own = s
        .latency(&id("node3"), Op::Get)
        .unwrap()
        .value_us()
        .unwrap();
    assert!(own > 2000.0, "{own}");
    assert_eq!((c.latency_us, c.latency_samples), (Some(own), 6));
    // Puts are tracked apart.
    assert_eq!(s.latency(&id("node2"), Op::Put).unwrap().samples(), 0);
}

#[test]
fn piggybacked_feedback_counts_while_fresh() {
    let (mut s, t0) = (scorer(), Instant::now());
    let feedback = Feedback {
        queue: 12,
        service_us: 300.0,
    };
    s.feedback(&id("node2"), feedback, t0);
    let c = one(&mut s, candidate("node2"), t0);
    assert_eq!((c.queue, c.service_us), (Some(12.0), Some(300.0)));
    assert_eq!(c.modes.c3_queue, Some(12.0));
    let c = one(&mut s, candidate("node2"), t0 + Duration::from_secs(4));
    assert_eq!((c.queue, c.service_us), (None, None));
}

#[test]
fn feedback_without_a_finite_non_negative_service_time_keeps_the_estimate() {
    let (mut s, t0) = (scorer(), Instant::now());
    let good = Feedback {
        queue: 2,
        service_us: 300.0,
    };
    s.feedback(&id("node2"), good, t0);
    s.feedback(&id("node3"), good, t0);
    for bad in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY, -1e9] {
        s.feedback(
            &id("node3"),
            Feedback {
                queue: 2,
                service_us: bad,
            },
            t0,
        );
    }
    let c = one(&mut s, candidate("node3"), t0);
    assert_eq!(c.service_us, Some(300.0));
    assert_eq!(c.modes.c3_service_us, Some(300.0));
    assert_eq!(c.modes.c3_queue, Some(2.0));
    // C3 does not rank the peer that sent garbage ahead of the honest one.
    let settings = RouterSettings {
        mode: Mode::C3,
        ..RouterSettings::default()
    };
    let mut s2 = Scorer::new(settings, id("node1")).unwrap();
    s2.feedback(&id("node2"), good, t0);
    s2.feedback(
        &id("node3"),
        Feedback {
            queue: 2,
            service_us: -1e12,
        },
        t0,
    );
    s2.feedback(&id("node3"), good, t0);
    let i = s2.snapshot(&[candidate("node2"), candidate("node3")], ask(), t0);
    let ranks: Vec<f64> = i
        .candidates
        .iter()
        .map(|c| crate::modes::c3::rank(c, 1))
        .collect();
    assert!(ranks.iter().all(|r| r.is_finite()), "{ranks:?}");
    assert_eq!(ranks[0], ranks[1]);
    // A huge one counts as the bound.
    s.feedback(
        &id("node4"),
        Feedback {
            queue: 0,
            service_us: 1e300,
        },
        t0,
    );
    let c = one(&mut s, candidate("node4"), t0);
    assert_eq!(c.service_us, Some(MAX_SERVICE_US));
}

#[test]
fn an_estimate_without_samples_drifts_toward_the_cluster_mean() {
    let (mut s, t0) = (scorer(), Instant::now());
    for _ in 0..1000 {
        s.record(&id("node2"), Op::Get, ok(1), t0);
        s.record(&id("node3"), Op::Get, ok(1), t0);
        s.record(&id("node4"), Op::Get, ok(10), t0);
    }
    let before = s
        .latency(&id("node4"), Op::Get)
        .unwrap()
        .value_us()
        .unwrap();
    // node2 and node3 keep answering; node4 gets no request for 20 periods.
    for p in 1..=20u64 {
        let now = t0 + Duration::from_secs(p);
        s.record(&id("node2"), Op::Get, ok(1), now);
        s.record(&id("node3"), Op::Get, ok(1), now);
        s.snapshot(&[candidate("node4")], ask(), now);
    }
    let after = s
        .latency(&id("node4"), Op::Get)
        .unwrap()
        .value_us()
        .unwrap();
    assert!(before > 9000.0 && after < 5000.0, "{before} -> {after}");
}

#[test]
fn an_error_rate_excursion_starts_a_cool_down_that_ramps_back() {
    let (mut s, t0) = (scorer(), Instant::now());
    for i in 0..20 {
        let outcome = if i % 10 == 0 { Outcome::Error } else { ok(1) };
        s.record(&id("node2"), Op::Get, outcome, t0);
    }
    let c = one(&mut s, candidate("node2"), t0);
    assert_eq!(c.cooldown, 0.2);
    let at = |secs: u64| t0 + Duration::from_secs(secs);
    assert_eq!(one(&mut s, candidate("node2"), at(44)).cooldown, 0.2);
    let mid = one(&mut s, candidate("node2"), at(60)).cooldown;
    assert!((mid - 0.6).abs() < 1e-9, "{mid}");
    // Settled (and the old failures out of the window): full weight.
    assert_eq!(one(&mut s, candidate("node2"), at(76)).cooldown, 1.0);
}

/// The default settings, but estimates count for outlier judgement from 50
/// answers (the tests' periods have 80 answers a peer, not the 1,000 the
/// default asks for), and 3 outlier periods of 8 start a cool-down (the
/// default's 6 tested on its own).
fn few_samples() -> RouterSettings {
    RouterSettings {
        min_latency_samples: 50,
        outlier_periods: 3,
        ..RouterSettings::default()
    }
}

#[test]
fn by_default_six_outlier_periods_of_eight_cool_a_peer_and_five_do_not() {
    let settings = RouterSettings {
        min_latency_samples: 50,
        ..RouterSettings::default()
    };
    let (mut s, t0) = (
        Scorer::new(settings.clone(), id("node1")).unwrap(),
        Instant::now(),
    );
    let w = cooldowns(&mut s, t0, 14, &[1, 2, 3, 4, 5]);
    assert!(w.iter().all(|c| *c == 1.0), "{w:?}");
    let (mut s, t0) = (Scorer::new(settings, id("node1")).unwrap(), Instant::now());
    let w = cooldowns(&mut s, t0, 9, &[1, 2, 3, 4, 5, 6]);
    assert_eq!(&w[..7], &[1.0; 7], "{w:?}");
    assert_eq!(&w[7..], &[0.2, 0.2], "{w:?}");
}

fn outlier_scorer() -> Scorer {
    Scorer::new(few_samples(), id("node1")).unwrap()
}

#[test]
fn a_peer_is_judged_an_outlier_only_on_min_latency_samples_answers() {
    // The default asks for 1,000: node2's slow answers in periods 0 to 8
    // come before it has them (80 a period), and do not cool it.
    let (mut s, t0) = (scorer(), Instant::now());
    let w = cooldowns(&mut s, t0, 10, &[0, 1, 2, 3, 4, 5, 6, 7, 8]);
    assert!(w.iter().all(|c| *c == 1.0), "{w:?}");
    // Past 1,000 (period 12 on), six more slow periods cool it.
    let w = cooldowns(
        &mut s,
        t0 + Duration::from_secs(10),
        10,
        &[3, 4, 5, 6, 7, 8],
    );
    assert_eq!(w[9], 0.2, "{w:?}");
}

/// Runs `periods` report periods from `t0`: in each, every peer of
/// `peers` answers 80 reads, 10 ms apart, taking `ms(peer, period, k)`
/// for the k-th. Returns each peer's cool-down weight at each period's
/// start, `[period][peer]`.
fn run_periods(
    s: &mut Scorer,
    t0: Instant,
    periods: u64,
    peers: &[&str],
    ms: impl Fn(&str, u64, u64) -> u64,
) -> Vec<Vec<f64>> {
    (0..periods)
        .map(|p| {
            let start = t0 + Duration::from_secs(p);
            let cands: Vec<Candidate> = peers.iter().map(|n| candidate(n)).collect();
            let weights = s
                .snapshot(&cands, ask(), start)
                .candidates
                .iter()
                .map(|c| c.cooldown)
                .collect();
            for k in 0..80u64 {
                let now = start + Duration::from_millis(10 * k);
                for peer in peers {
                    s.record(&id(peer), Op::Get, ok(ms(peer, p, k)), now);
                }
            }
            weights
        })
        .collect()
}

/// node2 to node5 answer in 1 ms, except that in the periods `slow` names
/// node2's first 30 answers take 40 ms (its estimate climbs to about 38
/// ms, then recovers within the period). node2's cool-down weight at each
/// period's start.
fn cooldowns(s: &mut Scorer, t0: Instant, periods: u64, slow: &[u64]) -> Vec<f64> {
    let peers = ["node2", "node3", "node4", "node5"];
    let ms = |peer: &str, p: u64, k: u64| {
        if peer == "node2" && slow.contains(&p) && k < 30 {
            40
        } else {
            1
        }
    };
    run_periods(s, t0, periods, &peers, ms)
        .into_iter()
        .map(|w| w[0])
        .collect()
}

/// Ten periods of node2 to node5 answering 80 reads at 1 ms; node2's
/// `extra(s, now, k)` runs at its k-th slot instead of its answer when it
/// returns true. node2's cool-down weight at each period's start.
fn cooldowns_with(
    s: &mut Scorer,
    t0: Instant,
    periods: u64,
    node2: impl Fn(&mut Scorer, Instant, u64, u64) -> bool,
) -> Vec<f64> {
    let peers = ["node2", "node3", "node4", "node5"];
    (0..periods)
        .map(|p| {
            let start = t0 + Duration::from_secs(p);
            let weight = one(s, candidate("node2"), start).cooldown;
            for k in 0..80u64 {
                let now = start + Duration::from_millis(10 * k);
                for peer in peers {
                    if peer != "node2" || !node2(s, now, p, k) {
                        s.record(&id(peer), Op::Get, ok(1), now);
                    }
                }
            }
            weight
        })
        .collect()
}

#[test]
fn a_peer_sent_few_requests_is_not_made_an_outlier_by_one_slow_answer_a_period() {
    // node2 is sent one request in eight (a client cooled it, or it is in
    // fewer preference lists), and one of its ten answers a period takes
    // 100 ms: its estimate, of sparse answers, jumps over the 5-ms bar at
    // that answer every period. One slow answer is not a slow replica.
    let (mut s, t0) = (outlier_scorer(), Instant::now());
    let w = cooldowns_with(&mut s, t0, 20, |s, now, _, k| {
        if k % 8 == 0 {
            let ms = if k == 40 { 100 } else { 1 };
            s.record(&id("node2"), Op::Get, ok(ms), now);
        }
        true
    });
    assert!(w.iter().all(|c| *c == 1.0), "{w:?}");
    // Three slow answers in its ten, every period: a slow replica.
    let (mut s, t0) = (outlier_scorer(), Instant::now());
    let w = cooldowns_with(&mut s, t0, 20, |s, now, _, k| {
        if k % 8 == 0 {
            let ms = if k < 24 { 100 } else { 1 };
            s.record(&id("node2"), Op::Get, ok(ms), now);
        }
        true
    });
    assert_eq!(w[19], 0.2, "{w:?}");
}

#[test]
fn requests_abandoned_or_stuck_in_flight_count_as_slow() {
    // From period 2 (its estimate settled at 1 ms), a fifth of node2's
    // requests are abandoned 3 ms after they were sent (their callers
    // cancelled) and never answered: its estimate stays at 1 ms, but it is slow
    // where it counts.
    let (mut s, t0) = (outlier_scorer(), Instant::now());
    let w = cooldowns_with(&mut s, t0, 10, |s, now, p, k| {
        if p < 2 || k % 5 != 0 {
            return false;
        }
        let lost = s.start(&id("node2"), Op::Get, now);
        let ms = Duration::from_millis;
        s.abandon(&lost, now, now + ms(5000), now + ms(3));
        true
    });
    assert_eq!(&w[..5], &[1.0; 5], "{w:?}");
    assert_eq!(w[9], 0.2, "{w:?}");
    // A fifth of them sent into a freeze and still in flight when the
    // period ends: slow too.
    let (mut s, t0) = (outlier_scorer(), Instant::now());
    let w = cooldowns_with(&mut s, t0, 10, |s, now, p, k| {
        if p < 2 || k < 64 {
            return false;
        }
        s.start(&id("node2"), Op::Get, now);
        true
    });
    assert_eq!(&w[..5], &[1.0; 5], "{w:?}");
    assert_eq!(w[9], 0.2, "{w:?}");
}

#[test]
fn a_latency_outlier_in_three_periods_of_eight_cools_down() {
    let (mut s, t0) = (outlier_scorer(), Instant::now());
    // Outlier in periods 1, 3 and 6: seen by the upkeep at 2, 4 and 7.
    let w = cooldowns(&mut s, t0, 9, &[1, 3, 6]);
    assert_eq!(&w[..7], &[1.0; 7], "{w:?}");
    assert_eq!(&w[7..], &[0.2, 0.2], "{w:?}");
}

#[test]
fn one_slow_period_or_outliers_spread_wider_than_eight_periods_do_not_cool_a_peer() {
    let (mut s, t0) = (outlier_scorer(), Instant::now());
    let w = cooldowns(&mut s, t0, 30, &[2, 10, 18, 26]);
    assert!(w.iter().all(|c| *c == 1.0), "{w:?}");
    // Every period slow, but with only two peers' estimates to compare
    // there is no median to stand out from.
    let (mut s, t0) = (outlier_scorer(), Instant::now());
    let w = (0..10u64)
        .map(|p| {
            let start = t0 + Duration::from_secs(p);
            let weight = one(&mut s, candidate("node2"), start).cooldown;
            for k in 0..80u64 {
                let now = start + Duration::from_millis(10 * k);
                s.record(&id("node2"), Op::Get, ok(40), now);
                s.record(&id("node3"), Op::Get, ok(1), now);
            }
            weight
        })
        .collect::<Vec<_>>();
    assert!(w.iter().all(|c| *c == 1.0), "{w:?}");
}

#[test]
fn only_the_worst_peer_of_a_period_counts_and_one_outlier_cools_down_at_a_time() {
    let peers = ["node2", "node3", "node4", "node5", "node6", "node7"];
    // node2 always the slowest, node3 always slow too: only node2 counts.
    let (mut s, t0) = (outlier_scorer(), Instant::now());
    let w = run_periods(&mut s, t0, 12, &peers, |peer, _, _| match peer {
        "node2" => 60,
        "node3" => 40,
        _ => 1,
    });
    assert_eq!(w[11][..2], [0.2, 1.0], "{w:?}");
    // node2 and node3 take turns being the slowest: both reach three
    // periods of eight, but only the first to get there (node3: the
    // period-0 answers have no bars yet) cools down.
    let (mut s, t0) = (outlier_scorer(), Instant::now());
    let w = run_periods(&mut s, t0, 12, &peers, |peer, p, _| match (peer, p % 2) {
        ("node2", 0) | ("node3", 1) => 60,
        ("node2", 1) | ("node3", 0) => 40,
        _ => 1,
    });
    assert_eq!(w[11][..2], [1.0, 0.2], "{w:?}");
    assert!(w.iter().all(|row| row[0] == 1.0), "{w:?}");
}

#[test]
fn outlier_cool_downs_can_be_turned_off() {
    let settings = RouterSettings {
        outlier_periods: 0,
        ..few_samples()
    };
    let (mut s, t0) = (Scorer::new(settings, id("node1")).unwrap(), Instant::now());
    let w = cooldowns(&mut s, t0, 10, &[0, 1, 2, 3, 4, 5, 6, 7, 8]);
    assert!(w.iter().all(|c| *c == 1.0), "{w:?}");
    // The same with outlier detection on: cooled.
    let (mut s, t0) = (outlier_scorer(), Instant::now());
    let w = cooldowns(&mut s, t0, 10, &[0, 1, 2, 3, 4, 5, 6, 7, 8]);
    assert_eq!(w[9], 0.2, "{w:?}");
}

#[test]
fn a_peer_in_its_slow_start_is_not_judged_an_outlier_until_the_ramp_ends() {
    let settings = RouterSettings {
        slow_start: Duration::from_secs(20),
        ..few_samples()
    };
    let (mut s, t0) = (Scorer::new(settings, id("node1")).unwrap(), Instant::now());
    let peers = ["node2", "node3", "node4", "node5"];
    let all: Vec<Candidate> = peers.iter().map(|n| candidate(n)).collect();
    s.snapshot(&all, ask(), t0);
    let mut down = candidate("node2");
    down.alive = false;
    one(&mut s, down, t0 + Duration::from_secs(1));
    // Back at 2 s with a cold cache: slow in every period from then on.
    let back = t0 + Duration::from_secs(2);
    assert_eq!(one(&mut s, candidate("node2"), back).ramp, 0.6);
    let w: Vec<f64> = cooldowns(&mut s, back, 30, &(0..30).collect::<Vec<_>>());
    // Not cooled while it ramps (until 22 s, the 20th period) ...
    assert!(w[..21].iter().all(|c| *c == 1.0), "{w:?}");
    // ... then judged as any peer: three outlier periods, cooled.
    assert_eq!(w[29], 0.2, "{w:?}");
}

#[test]
fn a_node_that_comes_back_up_ramps_while_one_up_from_the_start_does_not() {
    let (mut s, t0) = (scorer(), Instant::now());
    assert_eq!(one(&mut s, candidate("node2"), t0).ramp, 1.0);
    let mut down = candidate("node2");
    down.alive = false;
    one(&mut s, down, t0 + Duration::from_secs(1));
    let back = t0 + Duration::from_secs(2);
    assert_eq!(one(&mut s, candidate("node2"), back).ramp, 0.6);
    let half = one(&mut s, candidate("node2"), back + Duration::from_secs(300)).ramp;
    assert!((half - 0.8).abs() < 1e-9, "{half}");
    assert_eq!(
        one(&mut s, candidate("node2"), back + Duration::from_secs(600)).ramp,
        1.0
    );
    // A joining node turning UP ramps too.
    let mut joining = candidate("node3");
    joining.up = false;
    one(&mut s, joining, back);
    assert_eq!(one(&mut s, candidate("node3"), back).ramp, 0.6);
    // So does one first seen, already UP, more than a report period after
    // the first decision (a joiner that was never a candidate while
    // JOINING); one first seen within the first period does not.
    let fresh = (scorer(), t0);
    let mut s = fresh.0;
    one(&mut s, candidate("node2"), t0);
    let early = t0 + Duration::from_millis(500);
    assert_eq!(one(&mut s, candidate("node3"), early).ramp, 1.0);
    let late = t0 + Duration::from_secs(5);
    assert_eq!(one(&mut s, candidate("node4"), late).ramp, 0.6);
    assert_eq!(one(&mut s, candidate("node3"), late).ramp, 1.0);
}

#[test]
fn a_node_that_comes_back_starts_without_its_old_latency_estimate() {
    let (mut s, t0) = (scorer(), Instant::now());
    let ms = Duration::from_millis;
    for k in 0..2000 {
        s.record(&id("node2"), Op::Get, ok(2), t0 + ms(k));
        s.record(&id("node3"), Op::Get, ok(2), t0 + ms(k));
    }
    one(&mut s, candidate("node2"), t0 + ms(2000));
    one(&mut s, candidate("node3"), t0 + ms(2000));
    // Its last answer, given while it shut down, took 200 ms.
    s.record(&id("node3"), Op::Get, ok(200), t0 + ms(2500));
    let slow = one(&mut s, candidate("node3"), t0 + ms(2500));
    assert!(slow.latency_us.unwrap() > 30_000.0, "{slow:?}");
    let mut down = candidate("node3");
    down.alive = false;
    one(&mut s, down, t0 + ms(3000));
    // Back: no estimate of its own, ranked at the cluster mean (node2's
    // estimate alone now, a few ms after drifting toward node3's old one),
    // slow start on.
    let back = one(&mut s, candidate("node3"), t0 + ms(5000));
    assert_eq!(back.latency_samples, 0, "{back:?}");
    let mean = s.cluster_mean_us(Op::Get).unwrap();
    let node2 = s.latency(&id("node2"), Op::Get).unwrap().value_us();
    assert_eq!((back.latency_us, Some(mean)), (node2, node2));
    assert!(mean < 10_000.0, "{mean}");
    assert_eq!(back.ramp, 0.6);
    // A slow first answer ranks it below the mean at once.
    s.record(&id("node3"), Op::Get, ok(50), t0 + ms(5100));
    let c = one(&mut s, candidate("node3"), t0 + ms(5100));
    assert!(c.latency_us.unwrap() > 40_000.0, "{c:?}");
    // A peer that stayed up (seen alive throughout) keeps its estimate.
    assert_eq!(
        one(&mut s, candidate("node2"), t0 + ms(5100)).latency_samples,
        2000
    );
}

/// node2 and node3 answered 2,000 reads in 2 ms, then node3 one in 200
/// ms, all under process generation 7 (node3's estimate well above the
/// mean); the scorer and the time after.
fn node3_slow_at_the_end(t0: Instant) -> (Scorer, Instant) {
    let mut s = scorer();
    let ms = Duration::from_millis;
    for k in 0..2000 {
        s.record(&id("node2"), Op::Get, ok(2), t0 + ms(k));
        s.record(&id("node3"), Op::Get, ok(2), t0 + ms(k));
    }
    one(&mut s, generation("node2", 7, true), t0 + ms(2000));
    one(&mut s, generation("node3", 7, true), t0 + ms(2000));
    s.record(&id("node3"), Op::Get, ok(200), t0 + ms(2500));
    let slow = one(&mut s, generation("node3", 7, true), t0 + ms(2500));
    assert!(slow.latency_us.unwrap() > 30_000.0, "{slow:?}");
    (s, t0 + ms(2500))
}

/// node3 after [`node3_slow_at_the_end`], seen as `sightings` (in order,
/// 500 ms apart): its inputs at the last.
fn node3_after(sightings: &[Candidate]) -> crate::CandidateInputs {
    let (mut s, t) = node3_slow_at_the_end(Instant::now());
    let mut last = None;
    for (k, c) in (1u64..).zip(sightings) {
        last = Some(one(&mut s, c.clone(), t + Duration::from_millis(500 * k)));
    }
    last.expect("at least one sighting")
}

/// node3 as JOINING (alive, generation 7).
fn joining() -> Candidate {
    Candidate {
        up: false,
        ..generation("node3", 7, true)
    }
}

#[test]
fn a_liveness_flap_of_the_same_process_keeps_its_latency_estimate() {
    // Back, the same process (paused, or cut off): still ranked by what it
    // answered, and ramped as any node that comes back.
    let back = node3_after(&[generation("node3", 7, false), generation("node3", 7, true)]);
    assert_eq!(back.latency_samples, 2001, "{back:?}");
    assert!(back.latency_us.unwrap() > 30_000.0, "{back:?}");
    assert_eq!(back.ramp, 0.6);
}

#[test]
fn a_restart_too_quick_for_the_failure_detector_still_wipes_the_estimate() {
    let (mut s, t) = node3_slow_at_the_end(Instant::now());
    let ms = Duration::from_millis;
    // Never seen down: a new generation alone says it restarted.
    let back = one(&mut s, generation("node3", 8, true), t + ms(100));
    assert_eq!(back.latency_samples, 0, "{back:?}");
    assert_eq!(back.ramp, 0.6);
    // A view still showing the old generation is not another restart.
    s.record(&id("node3"), Op::Get, ok(2), t + ms(200));
    let lagging = one(&mut s, generation("node3", 7, true), t + ms(300));
    assert_eq!(lagging.latency_samples, 1, "{lagging:?}");
    // node2 kept its estimate throughout.
    let node2 = one(&mut s, generation("node2", 7, true), t + ms(300));
    assert_eq!(node2.latency_samples, 2000);
}

#[test]
fn a_restart_seen_while_the_node_is_down_is_not_taken_for_a_flap() {
    // Its new process announced itself before the detector believed it.
    let back = node3_after(&[
        generation("node3", 7, false),
        generation("node3", 8, false),
        generation("node3", 8, true),
    ]);
    assert_eq!(back.latency_samples, 0, "{back:?}");
    assert_eq!(back.ramp, 0.6);
}

#[test]
fn a_joiner_turning_up_starts_without_its_estimate_of_the_same_process() {
    // JOINING to UP is not a flap: what it answered while it streamed
    // does not describe the node serving reads.
    let up = node3_after(&[joining(), generation("node3", 7, true)]);
    assert_eq!(up.latency_samples, 0, "{up:?}");
}

#[test]
fn a_joiner_unreached_as_it_turns_up_still_starts_without_its_estimate() {
    // UP, but not reached yet: the last sighting before it is alive shows
    // it UP with its generation; it was JOINING since it was last served.
    let up = node3_after(&[
        joining(),
        generation("node3", 7, false),
        generation("node3", 7, true),
    ]);
    assert_eq!(up.latency_samples, 0, "{up:?}");
}

#[test]
fn a_coming_back_with_a_sighting_of_no_generation_wipes_the_estimate() {
    // Down by a mark that knows no process (a client's failed connection):
    // it may have restarted, as far as this scorer can tell.
    let marked = Candidate {
        alive: false,
        ..candidate("node3")
    };
    let back = node3_after(&[marked, generation("node3", 7, true)]);
    assert_eq!(back.latency_samples, 0, "{back:?}");
}

#[test]
fn a_member_not_yet_reached_in_the_first_view_does_not_ramp_when_reached_early() {
    let (mut s, t0) = (scorer(), Instant::now());
    let unreached = |name: &str| {
        let mut c = candidate(name);
        c.alive = false;
        c
    };
    one(&mut s, unreached("node2"), t0);
    one(&mut s, unreached("node3"), t0);
    // Reached within the first freshness periods (3 s): no slow start.
    let early = t0 + Duration::from_millis(1500);
    assert_eq!(one(&mut s, candidate("node2"), early).ramp, 1.0);
    // Down for longer than that: it came back, and ramps.
    let late = t0 + Duration::from_secs(4);
    assert_eq!(one(&mut s, candidate("node3"), late).ramp, 0.6);
    // node2, reached once, going down and up again early ramps too.
    one(
        &mut s,
        unreached("node2"),
        early + Duration::from_millis(100),
    );
    let back = early + Duration::from_millis(200);
    assert_eq!(one(&mut s, candidate("node2"), back).ramp, 0.6);
}

#[test]
fn a_host_with_two_blacklisted_nodes_is_out() {
    let (mut s, t0) = (scorer(), Instant::now());
    let on_host = |name: &str, alive: bool| {
        let mut c = candidate(name);
        c.host = "h1".into();
        c.alive = alive;
        c
    };
    let i = s.snapshot(
        &[on_host("node2", false), on_host("node4", true)],
        ask(),
        t0,
    );
    assert!(
        !i.candidates[1].host_out,
        "one blacklisted node is not enough"
    );
    for _ in 0..5 {
        s.record(&id("node3"), Op::Get, Outcome::Timeout, t0);
    }
    let i = s.snapshot(
        &[
            on_host("node2", false),
            on_host("node3", true),
            on_host("node4", true),
        ],
        ask(),
        t0,
    );
    assert!(i.candidates[2].host_out);
    assert!(matches!(i.candidates[1].breaker, BreakerInput::Open { .. }));
    let d = decide(s.settings(), &i, 1);
    assert_eq!(d.scored[2].excluded, Some(Exclusion::HostOut));
}

#[test]
fn scores_that_decline_two_periods_in_a_row_are_flagged_and_the_baseline_is_their_median() {
    let (mut s, t0) = (scorer(), Instant::now());
    let decision_with = |s: &mut Scorer, score: f64, now: Instant| {
        let i = s.snapshot(&[candidate("node2")], ask(), now);
        let mut d = decide(s.settings(), &i, 1);
        d.scored[0].score = score;
        s.observe(&i, &d, now);
    };
    for (p, score) in [0.9, 0.8, 0.7].into_iter().enumerate() {
        decision_with(&mut s, score, t0 + Duration::from_secs(p as u64));
    }
    let c = one(&mut s, candidate("node2"), t0 + Duration::from_secs(3));
    assert!(c.declining);
    assert_eq!(c.baseline, Some(0.8));
    decision_with(&mut s, 0.9, t0 + Duration::from_secs(4));
    let c = one(&mut s, candidate("node2"), t0 + Duration::from_secs(5));
    assert!(!c.declining);
    // Falls within the decline band (5%) are noise, not a decline.
    for (p, score) in [0.9, 0.88, 0.86].into_iter().enumerate() {
        decision_with(&mut s, score, t0 + Duration::from_secs(6 + p as u64));
    }
    let c = one(&mut s, candidate("node2"), t0 + Duration::from_secs(9));
    assert!(!c.declining);
}

#[test]
fn the_snitch_scores_median_latency_against_the_worst_and_forgets_after_ten_minutes() {
    let (mut s, t0) = (scorer(), Instant::now());
    for ms in [1, 2, 3] {
        s.record(&id("node2"), Op::Get, ok(ms), t0);
        s.record(&id("node3"), Op::Get, ok(ms * 4), t0);
    }
    let i = s.snapshot(&[candidate("node2"), candidate("node3")], ask(), t0);
    assert_eq!(i.candidates[0].modes.snitch, Some(0.25));
    assert_eq!(i.candidates[1].modes.snitch, Some(1.0));
    let later = t0 + Duration::from_secs(601);
    let i = s.snapshot(&[candidate("node2")], ask(), later);
    assert_eq!(i.candidates[0].modes.snitch, None);
}

#[test]
fn c3_relaxes_the_unchosen_toward_the_chosen_and_peak_ewma_jumps_then_decays() {
    let (mut s, t0) = (scorer(), Instant::now());
    s.set_mode(Mode::C3);
    s.record(&id("node2"), Op::Get, ok(1), t0);
    s.record(&id("node3"), Op::Get, ok(11), t0);
    let i = s.snapshot(&[candidate("node2"), candidate("node3")], ask(), t0);
    let d = decide(s.settings(), &i, 1);
    assert_eq!(d.order[0], id("node2"));
    s.observe(&i, &d, t0);
    let i = s.snapshot(&[candidate("node3")], ask(), t0);
    // 11 ms moved 30% of the way to 1 ms.
    assert!((i.candidates[0].modes.c3_response_us.unwrap() - 8000.0).abs() < 1e-6);
    // Peak EWMA: a slow sample counts at once, then decays with time.
    assert_eq!(i.candidates[0].modes.peak_us, Some(11_000.0));
    s.record(&id("node3"), Op::Get, ok(1), t0 + Duration::from_secs(10));
    let i = s.snapshot(&[candidate("node3")], ask(), t0 + Duration::from_secs(10));
    let peak = i.candidates[0].modes.peak_us.unwrap();
    let expected = 11_000.0 * (-1.0f64).exp() + 1_000.0 * (1.0 - (-1.0f64).exp());
    assert!((peak - expected).abs() < 1e-6, "{peak}");
}

#[test]
fn switching_modes_forgets_what_was_learned() {
    let (mut s, t0) = (scorer(), Instant::now());
    s.record(&id("node2"), Op::Get, ok(5), t0);
    s.served(42, &id("node2"));
    assert!(one(&mut s, candidate("node2"), t0).affinity);
    s.set_mode(Mode::P2c);
    assert_eq!(s.mode(), Mode::P2c);
    assert!(s.latency(&id("node2"), Op::Get).is_none());
    let c = one(&mut s, candidate("node2"), t0);
    assert!(!c.affinity);
    let i = s.snapshot(&[candidate("node2")], ask(), t0);
    assert_eq!(i.mode, Mode::P2c);
}

#[test]
fn the_local_replica_is_ranked_by_its_own_in_process_latency() {
    let (mut s, t0) = (scorer(), Instant::now());
    // A remote peer: 1 ms round trips, 200 us of which its service time.
    for _ in 0..10 {
        s.record(&id("node2"), Op::Get, ok(1), t0);
    }
    s.feedback(
        &id("node2"),
        Feedback {
            queue: 0,
            service_us: 200.0,
        },
        t0,
    );
    // The local replica answers in-process in 100 us.
    for _ in 0..10 {
        s.record(
            &id("node1"),
            Op::Get,
            Outcome::Ok {
                latency: Duration::from_micros(100),
            },
            t0,
        );
    }
    let c = one(&mut s, candidate("node1"), t0);
    assert!(c.local);
    assert_eq!(c.latency_us, Some(100.0));
    assert_eq!(c.service_us, Some(100.0));
    // Slow in-process calls (a stalled disk), over a few latency
    // windows, rank it behind the peer.
    for k in 1..=40 {
        s.record(
            &id("node1"),
            Op::Get,
            Outcome::Ok {
                latency: Duration::from_millis(5),
            },
            t0 + Duration::from_millis(50 * k),
        );
    }
    let c = one(&mut s, candidate("node1"), t0 + Duration::from_secs(2));
    assert!(c.latency_us.unwrap() > 1000.0);
}

#[test]
fn peers_whose_round_trips_differ_by_noise_do_not_take_reads_from_the_local_replica() {
    let (mut s, t0) = (scorer(), Instant::now());
    let us = Duration::from_micros;
    // Two remote peers, 900 and 1100 us round trips (20% apart: EWMA
    // noise under load), 1,000 samples each; the local replica answers
    // in-process in 150 us. Ranked as if it paid a round trip (150 us
    // plus the median peer overhead, 1,000 us) it lost to node2.
    for _ in 0..1000 {
        s.record(&id("node2"), Op::Get, Outcome::Ok { latency: us(900) }, t0);
        s.record(&id("node3"), Op::Get, Outcome::Ok { latency: us(1100) }, t0);
        s.record(&id("node1"), Op::Get, Outcome::Ok { latency: us(150) }, t0);
    }
    for peer in ["node2", "node3"] {
        let feedback = Feedback {
            queue: 0,
            service_us: 100.0,
        };
        s.feedback(&id(peer), feedback, t0);
    }
    let cands = [candidate("node2"), candidate("node1"), candidate("node3")];
    let settings = RouterSettings::default();
    for draw in 0..200 {
        let inputs = s.snapshot(&cands, ask(), t0);
        let d = decide(&settings, &inputs, draw);
        assert_eq!(d.order[0].as_str(), "node1", "draw {draw}: {d:?}");
    }
}

#[test]
fn without_the_outrun_floor_an_outrun_read_floors_nothing_until_it_is_stuck() {
    let settings = RouterSettings {
        outrun_floor: false,
        ..RouterSettings::default()
    };
    let mut s = Scorer::new(settings, id("node1")).unwrap();
    let t0 = Instant::now();
    let ms = Duration::from_millis;
    for k in 0..20 {
        s.record(&id("node2"), Op::Get, ok(1), t0 + ms(k));
    }
    let loser = s.start(&id("node2"), Op::Get, t0 + ms(21));
    s.outrun(&id("node2"));
    // 3 ms is under five read-times: not floored, outrun or not.
    let c = one(&mut s, candidate("node2"), t0 + ms(24));
    assert!(!c.outrun && !c.floored(), "{c:?}");
    // 6 ms is over five read-times: floored as any stuck peer is.
    let c = one(&mut s, candidate("node2"), t0 + ms(27));
    assert!(!c.outrun && c.floored(), "{c:?}");
    s.finish(&loser);
}

#[test]
fn a_read_hedges_only_to_a_replica_whose_own_reads_are_younger_than_its_wait() {
    let mut s = scorer();
    let t0 = Instant::now();
    let ms = Duration::from_millis;
    // Nothing in flight, or a peer never heard of: the hedge may help.
    assert!(s.hedge_may_help(&id("node2"), ms(5), t0));
    let write = s.start(&id("node2"), Op::Put, t0);
    let read = s.start(&id("node2"), Op::Get, t0 + ms(2));
    // A read 3 ms old at node2, against a wait of 5 ms: node2 answers
    // faster than the passed replica.
    assert!(s.hedge_may_help(&id("node2"), ms(5), t0 + ms(5)));
    // 6 ms old against 5: node2 is as slow; the write 8 ms old counts
    // for nothing (it waits for other replicas too).
    assert!(!s.hedge_may_help(&id("node2"), ms(5), t0 + ms(8)));
    s.finish(&read);
    assert!(s.hedge_may_help(&id("node2"), ms(5), t0 + ms(8)));
    let _late = s.start(&id("node2"), Op::Get, t0 + ms(8));
    let mut on = Scorer::new(
        RouterSettings {
            hedge_to_slow_replica: true,
            ..RouterSettings::default()
        },
        id("node1"),
    )
    .unwrap();
    let _stuck = on.start(&id("node2"), Op::Get, t0);
    assert!(on.hedge_may_help(&id("node2"), ms(5), t0 + ms(50)));
    assert!(!s.hedge_may_help(&id("node2"), ms(5), t0 + ms(50)));
    s.finish(&write);
}

/// What a coordinator sending one read every `every_ms` (R = 1, three
/// remote candidates) saw over 120 s while `node4` froze for 200 ms of
/// every second (slow-node-stall's fault) until 60 s, and then no more.
#[derive(Debug, Default)]
struct Stalled {
    /// Reads sent to `node4` first from 15 s (the warm-up) to 60 s.
    sent_stalling: usize,
    /// Of which waited out a freeze (over 50 ms).
    waited: usize,
    /// Reads sent to `node4` first in the last 10 s.
    sent_at_end: usize,
    /// Probe reads sent (to any node).
    probes: usize,
}

/// Runs [`Stalled`]'s load under `settings`. Answers arrive in time
/// order; a probe goes to its node too, and the caller does not wait for
/// it. The busy peers answer in 1-4 ms, one in a hundred in 15 ms; the
/// stalling one, idle, in 1 ms between its freezes.
fn stalled_run(settings: RouterSettings, every_ms: u64) -> Stalled {
    let mut s = Scorer::new(settings, id("node1")).unwrap();
    let t0 = Instant::now();
    let ms = Duration::from_millis;
    let cands = [candidate("node2"), candidate("node3"), candidate("node4")];
    // (answer at, ticket, node, latency)
    let mut pending: Vec<(Instant, Ticket, NodeId, Duration)> = Vec::new();
    let mut seen = Stalled::default();
    let answer_after = |node: &NodeId, sent: Duration| -> Duration {
        let into = sent.as_millis() % 1000;
        let noise = (sent.as_micros() as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 40;
        match node.as_str() {
            "node4" if into < 200 && sent < ms(60_000) => ms(200 - into as u64 + 1),
            "node4" => ms(1),
            _ if noise.is_multiple_of(100) => ms(15),
            _ => ms(1 + noise % 4),
        }
    };
    for k in 0..120_000 / every_ms {
        let at = ms(every_ms * k);
        let now = t0 + at;
        pending.sort_by_key(|p| p.0);
        while pending.first().is_some_and(|p| p.0 <= now) {
            let (done, ticket, node, latency) = pending.remove(0);
            s.finish(&ticket);
            s.record(&node, Op::Get, Outcome::Ok { latency }, done);
        }
        let ask = Ask {
            key_hash: k.wrapping_mul(0x9E37_79B9_7F4A_7C15),
            ..ask()
        };
        let inputs = s.snapshot(&cands, ask, now);
        let d = decide(s.settings(), &inputs, k);
        s.observe(&inputs, &d, now);
        let mut send = |s: &mut Scorer, node: &NodeId| {
            let latency = answer_after(node, at);
            let ticket = s.start(node, Op::Get, now);
            pending.push((now + latency, ticket, node.clone(), latency));
            latency
        };
        let latency = send(&mut s, &d.order[0]);
        if d.order[0].as_str() == "node4" {
            if at >= ms(15_000) && at < ms(60_000) {
                seen.sent_stalling += 1;
                seen.waited += usize::from(latency > ms(50));
            }
            if at >= ms(110_000) {
                seen.sent_at_end += 1;
            }
        }
        if let Some(probe) = &d.latency_probe {
            seen.probes += 1;
            send(&mut s, probe);
        }
    }
    seen
}

#[test]
fn a_peer_that_stalls_again_and_again_is_kept_out_and_probed_not_let_back_by_drift() {
    let settings = RouterSettings {
        min_latency_samples: 20,
        ..RouterSettings::default()
    };
    for every_ms in [2, 10, 20] {
        let kept = stalled_run(settings.clone(), every_ms);
        let off = stalled_run(
            RouterSettings {
                latency_probe: Duration::ZERO,
                ..settings.clone()
            },
            every_ms,
        );
        // Without it, the drift (and a few fast answers) let the stalling
        // peer back again and again; kept out, it gets only probes, about
        // one a second, while it stalls, and its reads again once its
        // slowest answer has decayed (200 ms to 1.3 ms in 50 s).
        assert!(
            off.sent_stalling > 0 && off.probes == 0,
            "{every_ms} ms: {off:?}"
        );
        assert_eq!(kept.sent_stalling, 0, "{every_ms} ms: {kept:?}");
        assert!((30..=240).contains(&kept.probes), "{every_ms} ms: {kept:?}");
        assert!(kept.sent_at_end > 0, "{every_ms} ms: {kept:?}");
    }
}

#[test]
fn a_kept_out_peer_ranks_by_its_slowest_answer_while_kept_out() {
    let (mut s, t0) = (scorer(), Instant::now());
    let ms = Duration::from_millis;
    let cands = [candidate("node2"), candidate("node3"), candidate("node4")];
    // Every peer: 1,000 answers of 2 ms; node4 one of 200 ms among them
    // (a hiccup in its regular traffic).
    for k in 0..1000 {
        for n in ["node2", "node3", "node4"] {
            s.record(&id(n), Op::Get, ok(2), t0 + Duration::from_micros(k * 100));
        }
    }
    s.record(&id("node4"), Op::Get, ok(200), t0 + ms(100));
    // Reads that put node2 first, then node3, never node4, at `at`.
    let reads = |s: &mut Scorer, at: Duration| {
        for first in ["node2", "node3"] {
            let inputs = s.snapshot(&cands, ask(), t0 + at);
            let mut d = decide(s.settings(), &inputs, 1);
            let second = if first == "node2" { "node3" } else { "node2" };
            d.order = vec![id(first), id(second), id("node4")];
            s.observe(&inputs, &d, t0 + at);
        }
    };
    reads(&mut s, ms(200));
    reads(&mut s, ms(1299));
    // Kept out, due a probe, but its earlier hiccup does not count.
    let i = s.snapshot(&cands, ask(), t0 + ms(1300));
    let node4 = &i.candidates[2];
    assert!(node4.kept_out && node4.probe_due && node4.peak_us.is_none());
    assert!(!i.candidates[0].kept_out && !i.candidates[1].kept_out);
    // Ranked by its estimate alone, it gets this read or the probe.
    let d = decide(s.settings(), &i, 1);
    assert!(d.latency_probe == Some(id("node4")) || d.order[0] == id("node4"));
    // The probe waits out a freeze: 150 ms. Now it ranks by that,
    // decayed (10 s), and no probe is due for another second.
    let ticket = s.start(&id("node4"), Op::Get, t0 + ms(1300));
    s.finish(&ticket);
    s.record(&id("node4"), Op::Get, ok(150), t0 + ms(1450));
    reads(&mut s, ms(2000));
    let i = s.snapshot(&cands, ask(), t0 + ms(2000));
    let node4 = &i.candidates[2];
    assert!(node4.kept_out && !node4.probe_due);
    let peak = node4.peak_us.unwrap();
    assert!((140_000.0..150_000.0).contains(&peak), "{peak}");
    let d = decide(s.settings(), &i, 1);
    assert_eq!(d.order.last(), Some(&id("node4")));
    assert_eq!(d.latency_probe, None);
    // Fast probes do not lower it; time does: 40 s later it is 150 ms x
    // exp(-4), under 3 ms.
    s.record(&id("node4"), Op::Get, ok(1), t0 + ms(3000));
    reads(&mut s, ms(42_000));
    let i = s.snapshot(&cands, ask(), t0 + ms(42_000));
    let peak = i.candidates[2].peak_us.unwrap();
    assert!((2_000.0..3_000.0).contains(&peak), "{peak}");
    // Turned off: never kept out.
    let mut off = Scorer::new(
        RouterSettings {
            latency_probe: Duration::ZERO,
            ..RouterSettings::default()
        },
        id("node1"),
    )
    .unwrap();
    for n in ["node2", "node3", "node4"] {
        off.record(&id(n), Op::Get, ok(2), t0);
    }
    reads(&mut off, ms(200));
    reads(&mut off, ms(1299));
    let i = off.snapshot(&cands, ask(), t0 + ms(1300));
    assert!(!i.candidates[2].kept_out && i.candidates[2].peak_us.is_none());
}
