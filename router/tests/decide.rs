//! Every rule of the scoring mode and of each peer mode, on hand-made
//! inputs (no clock, no I/O): `decide` is a pure function.

#![allow(clippy::unwrap_used)] // Tests: a panic is a failed assertion.

use kv_router::modes::hwlb::capped_shares;
use kv_router::{
    BreakerInput, CandidateInputs, Decision, Exclusion, Hedge, Inputs, Mode, Op, Penalty,
    ReportInputs, RouterSettings, decide,
};
use kv_types::NodeId;

fn id(n: &str) -> NodeId {
    NodeId::new(n).unwrap()
}

/// A fresh report: idle, hit ratio 0.5, nothing hot.
fn report() -> ReportInputs {
    ReportInputs {
        age_ms: 0,
        cpu: 0.0,
        queue: 0,
        backlog: 0,
        hit_ratio: 0.5,
        hot: false,
        repair: false,
    }
}

/// A healthy candidate with a fresh report and a latency.
fn cand(name: &str, latency_us: f64) -> CandidateInputs {
    let mut c = CandidateInputs::new(id(name));
    c.zone = "z1".into();
    c.host = name.into();
    c.latency_us = Some(latency_us);
    c.latency_samples = 5000;
    c.report = Some(report());
    c
}

fn inputs(mode: Mode, candidates: Vec<CandidateInputs>) -> Inputs {
    Inputs {
        mode,
        op: Op::Get,
        key_hash: 7,
        local_zone: "z1".into(),
        r: 1,
        cluster_p99_us: None,
        coordinators: 1,
        candidates,
    }
}

fn order(d: &Decision) -> Vec<&str> {
    d.order.iter().map(NodeId::as_str).collect()
}

fn score(d: &Decision, name: &str) -> f64 {
    d.scored
        .iter()
        .find(|s| s.id.as_str() == name)
        .unwrap()
        .score
}

fn scoring() -> RouterSettings {
    RouterSettings::default()
}

/// Decides with the scoring mode.
fn ours(candidates: Vec<CandidateInputs>) -> Decision {
    decide(&scoring(), &inputs(Mode::Scoring, candidates), 1)
}

#[test]
fn the_hard_filter_leaves_the_dead_out_and_puts_the_filtered_last() {
    let mut dead = cand("a", 100.0);
    dead.alive = false;
    let mut open = cand("b", 100.0);
    open.breaker = BreakerInput::Open { remaining_ms: 500 };
    let mut failing = cand("c", 100.0);
    (failing.window_requests, failing.window_failures) = (20, 8);
    let mut host = cand("d", 100.0);
    host.host_out = true;
    let mut probing = cand("e", 100.0);
    probing.breaker = BreakerInput::Probing;
    let fine = cand("f", 900.0);
    let d = ours(vec![dead, open, failing, host, probing, fine]);
    assert_eq!(order(&d), vec!["f", "b", "c", "d", "e"]);
    let reasons: Vec<_> = d.scored.iter().map(|s| s.excluded.clone()).collect();
    assert_eq!(reasons[0], Some(Exclusion::Dead));
    assert_eq!(
        reasons[1],
        Some(Exclusion::BreakerOpen { remaining_ms: 500 })
    );
    assert!(matches!(
        reasons[2],
        Some(Exclusion::FailureRate { requests: 20, .. })
    ));
    assert_eq!(reasons[3], Some(Exclusion::HostOut));
    assert_eq!(reasons[4], Some(Exclusion::ProbeInFlight));
    assert_eq!(reasons[5], None);
    // Fewer than 10 requests: the failure rate does not filter yet.
    let mut few = cand("g", 100.0);
    (few.window_requests, few.window_failures) = (5, 5);
    let d = ours(vec![few]);
    assert!(d.scored[0].excluded.is_none());
}

#[test]
fn without_fresh_reports_it_probes_and_falls_back_to_the_preference_order() {
    let mut a = cand("a", 9000.0);
    a.report = None;
    let mut b = cand("b", 5000.0);
    b.report.as_mut().unwrap().age_ms = 3001;
    let c = cand("c", 100.0);
    let d = ours(vec![a, b, c]);
    assert_eq!(order(&d), vec!["a", "b", "c"]);
    assert!(d.fallback.as_deref().unwrap().contains("2 of 3"));
    assert_eq!(d.probes, vec![id("a"), id("b")]);

    // One stale of three: scored, at its decaying baseline.
    let mut b = cand("b", 100.0);
    b.report.as_mut().unwrap().age_ms = 20_000;
    b.stale_periods = 20;
    b.baseline = Some(0.6);
    let d = ours(vec![cand("a", 100.0), b, cand("c", 100.0)]);
    assert!(d.fallback.is_none());
    assert_eq!(d.probes, vec![id("b")]);
    let expected = 0.6 * 0.9f64.powi(10);
    assert!(
        (score(&d, "b") - expected).abs() < 1e-9,
        "{}",
        score(&d, "b")
    );
    assert_eq!(order(&d).last(), Some(&"b"));
    let stale = d.scored[1]
        .penalties
        .iter()
        .find(|a| a.rule == Penalty::Stale);
    assert!(stale.is_some());
}

#[test]
fn load_is_the_worst_of_cpu_queue_backlog_and_in_flight() {
    let s = scoring();
    let mut c = cand("a", 100.0);
    c.in_flight = 32; // half the in-flight limit
    c.report.as_mut().unwrap().cpu = 0.2;
    c.report.as_mut().unwrap().backlog = 1024; // a quarter
    let d = ours(vec![c.clone()]);
    let load = d.scored[0].dimensions.unwrap().load;
    assert!((load - 0.5).abs() < 1e-9, "{load}");
    // The piggybacked queue is fresher than the reported one.
    c.in_flight = 0;
    c.report.as_mut().unwrap().queue = 2048;
    c.queue = Some(f64::from(s.max_queue) * 0.1);
    let d = ours(vec![c]);
    let load = d.scored[0].dimensions.unwrap().load;
    assert!((load - 0.75).abs() < 1e-9, "{load}");
}

#[test]
fn the_coordinators_own_cpu_does_not_count_against_its_local_replica() {
    let mut local = cand("a", 100.0);
    local.local = true;
    local.report.as_mut().unwrap().cpu = 0.9;
    let mut remote = cand("b", 100.0);
    remote.report.as_mut().unwrap().cpu = 0.9;
    let d = ours(vec![local.clone(), remote]);
    let load = |n: &str| {
        d.scored
            .iter()
            .find(|s| s.id.as_str() == n)
            .unwrap()
            .dimensions
            .unwrap()
            .load
    };
    assert!((load("a") - 1.0).abs() < 1e-9, "{}", load("a"));
    assert!((load("b") - 0.1).abs() < 1e-9, "{}", load("b"));
    assert_eq!(order(&d), ["a", "b"]);
    // Its queue still counts: a replica whose requests pile up is loaded.
    local.queue = Some(2048.0);
    let d = ours(vec![local]);
    assert!(d.scored[0].dimensions.unwrap().load.abs() < 1e-9);
}

#[test]
fn latency_is_graded_by_ratio_and_a_stuck_request_counts_at_once() {
    // Beyond twice as slow (latency_tie 0.5), graded by the ratio to the
    // fastest: (best / (0.5 x latency))^2, at least 0.1.
    let d = ours(vec![cand("a", 900.0), cand("b", 100.0), cand("c", 300.0)]);
    let lat = |n: &str| {
        d.scored
            .iter()
            .find(|s| s.id.as_str() == n)
            .unwrap()
            .dimensions
            .unwrap()
            .latency
    };
    for (got, want) in [
        (lat("b"), 1.0),
        (lat("c"), (100.0_f64 / 150.0).powi(2)),
        (lat("a"), 0.1),
    ] {
        assert!((got - want).abs() < 1e-9, "{got} {want}");
    }
    // b first; c (3x) scores above a (9x), but within the near-tie band
    // (17% apart), so the second place goes per key.
    assert_eq!(order(&d)[0], "b");
    assert!(score(&d, "c") > score(&d, "a"));
    // The local replica's in-process latency is no yardstick for the
    // peers' round trips: they are graded against the fastest peer.
    let mut local = cand("l", 50.0);
    local.local = true;
    let d = ours(vec![local, cand("p", 1000.0), cand("q", 5000.0)]);
    let lat = |n: &str| {
        d.scored
            .iter()
            .find(|s| s.id.as_str() == n)
            .unwrap()
            .dimensions
            .unwrap()
            .latency
    };
    for (got, want) in [(lat("l"), 1.0), (lat("p"), 1.0), (lat("q"), 0.16)] {
        assert!((got - want).abs() < 1e-9, "{got} {want}");
    }
    // Less than twice as slow: the same grade.
    let d = ours(vec![cand("a", 100.0), cand("b", 190.0)]);
    let dims: Vec<f64> = d
        .scored
        .iter()
        .map(|s| s.dimensions.unwrap().latency)
        .collect();
    assert_eq!(dims, vec![1.0, 1.0]);
    // A peer frozen for 150 ms looks 150 ms slow now, whatever its EWMA.
    let mut frozen = cand("b", 100.0);
    frozen.oldest_us = Some(150_000.0);
    let d = ours(vec![cand("a", 500.0), frozen]);
    assert_eq!(order(&d), vec!["a", "b"]);
    assert_eq!(d.scored[1].latency_us, Some(150_000.0));
    // An oldest request within STUCK_FACTOR of the EWMA is the tail every
    // busy peer has in flight: it changes nothing.
    let mut busy = cand("b", 100.0);
    busy.oldest_us = Some(450.0);
    let d = ours(vec![cand("a", 100.0), busy]);
    assert_eq!(d.scored[1].latency_us, Some(100.0));
    assert_eq!(
        d.scored[0].dimensions.unwrap().latency,
        d.scored[1].dimensions.unwrap().latency
    );
    // A request abandoned unanswered (its caller cancelled) floors it at once,
    // and a floored latency has no tie band: 1.5x the other's is graded
    // lower.
    let mut lost = cand("b", 100.0);
    (lost.oldest_us, lost.abandoned) = (Some(150.0), true);
    let d = ours(vec![lost, cand("a", 100.0)]);
    assert_eq!(d.scored[0].latency_us, Some(150.0));
    assert_eq!(order(&d), vec!["a", "b"]);
}

#[test]
fn cache_heat_favours_affinity_and_hit_ratio() {
    let mut hot = cand("a", 100.0);
    hot.report.as_mut().unwrap().hot = true;
    let mut warm = cand("b", 100.0);
    warm.affinity = true;
    let mut cold = cand("c", 100.0);
    cold.report.as_mut().unwrap().hit_ratio = 0.0;
    let d = ours(vec![hot, warm, cold, cand("d", 100.0)]);
    let hit = |i: usize| d.scored[i].dimensions.unwrap().hit;
    assert!((hit(0) - 0.75).abs() < 1e-9);
    assert!((hit(1) - 0.75).abs() < 1e-9);
    assert!((hit(2) - 0.5 * 0.7).abs() < 1e-9);
    assert!((hit(3) - 0.75 * 0.7).abs() < 1e-9);
    // Hot or affine, the same; then warm without affinity; then cold.
    assert!((score(&d, "a") - score(&d, "b")).abs() < 1e-9);
    assert!(score(&d, "b") > score(&d, "d") && score(&d, "d") > score(&d, "c"));
}

#[test]
fn availability_falls_twice_as_fast_as_the_failure_rate_grows() {
    let mut c = cand("a", 100.0);
    (c.window_requests, c.window_failures) = (100, 10);
    let d = ours(vec![c]);
    let a = d.scored[0].dimensions.unwrap().availability;
    assert!((a - 0.8).abs() < 1e-9, "{a}");
}

#[test]
fn the_latency_weight_rises_when_the_cluster_is_slow() {
    let mut i = inputs(Mode::Scoring, vec![cand("a", 100.0), cand("b", 200.0)]);
    let calm = decide(&scoring(), &i, 1).scored[0].weights.unwrap();
    assert_eq!(calm, kv_router::Weights::MIXED);
    i.cluster_p99_us = Some(7500.0);
    let slow = decide(&scoring(), &i, 1).scored[0].weights.unwrap();
    assert_eq!(slow, kv_router::Weights::MIXED.with_latency_factor(1.5));
    i.cluster_p99_us = Some(50_000.0);
    let capped = decide(&scoring(), &i, 1).scored[0].weights.unwrap();
    assert_eq!(capped, kv_router::Weights::MIXED.with_latency_factor(2.0));
}

/// Sets one input of a candidate.
type Setter = Box<dyn Fn(&mut CandidateInputs)>;

#[test]
fn each_penalty_multiplies_the_score() {
    let s = scoring();
    let base = score(&ours(vec![cand("a", 100.0)]), "a");
    let cases: Vec<(Penalty, f64, Setter)> = vec![
        (Penalty::Declining, 0.85, Box::new(|c| c.declining = true)),
        (Penalty::Cooldown, 0.2, Box::new(|c| c.cooldown = 0.2)),
        (
            Penalty::Queue,
            0.6,
            Box::new(|c| {
                c.queue = Some(f64::from(RouterSettings::default().queue_threshold) + 1.0)
            }),
        ),
        (Penalty::Suspect, 0.2, Box::new(|c| c.suspect = true)),
        (Penalty::Hints, 0.8, Box::new(|c| c.hints_pending = 3)),
        (
            Penalty::Repair,
            0.9,
            Box::new(|c| c.report.as_mut().unwrap().repair = true),
        ),
        (Penalty::HopCredit, 1.3, Box::new(|c| c.local = true)),
    ];
    for (rule, factor, set) in cases {
        let mut c = cand("a", 100.0);
        set(&mut c);
        let d = ours(vec![c]);
        let applied = &d.scored[0].penalties;
        assert_eq!(applied.len(), 1, "{rule:?}: {applied:?}");
        assert_eq!(applied[0].rule, rule);
        assert!((applied[0].factor - factor).abs() < 1e-9, "{rule:?}");
        // The queue penalty's load change aside, the score is base x factor.
        if rule != Penalty::Queue {
            assert!((score(&d, "a") - base * factor).abs() < 1e-9, "{rule:?}");
        }
    }
    // Errors: over 5% of recent requests failed (availability drops too).
    let mut c = cand("a", 100.0);
    (c.window_requests, c.window_failures) = (100, 6);
    let d = ours(vec![c]);
    assert!(
        d.scored[0]
            .penalties
            .iter()
            .any(|a| a.rule == Penalty::Errors && (a.factor - s.penalties.errors).abs() < 1e-9)
    );
}

#[test]
fn near_ties_go_one_way_per_key_either_way_across_keys_and_prefer_the_local_zone() {
    let tied = || vec![cand("a", 100.0), cand("b", 102.0)];
    // One key: the same first whatever the draw (every coordinator and
    // client breaks its ties alike).
    let firsts: std::collections::BTreeSet<String> = (0..50)
        .map(|draw| order(&decide(&scoring(), &inputs(Mode::Scoring, tied()), draw))[0].to_string())
        .collect();
    assert_eq!(firsts.len(), 1, "one key, one winner: {firsts:?}");
    // Across keys, each comes first about half the time.
    let a_first = (0..2000u64)
        .filter(|k| {
            let mut i = inputs(Mode::Scoring, tied());
            i.key_hash = k.wrapping_mul(0x9E37_79B9_7F4A_7C15);
            order(&decide(&scoring(), &i, 0))[0] == "a"
        })
        .count();
    assert!((850..1150).contains(&a_first), "{a_first} of 2000");
    // Among near-ties, the coordinator's zone first, for every key.
    let mut far = cand("a", 100.0);
    far.zone = "z2".into();
    for k in 0..50u64 {
        let mut i = inputs(Mode::Scoring, vec![far.clone(), cand("b", 102.0)]);
        i.key_hash = k;
        assert_eq!(order(&decide(&scoring(), &i, k))[0], "b");
    }
    // Beyond the band, the better one always, whatever the key and draw.
    for k in 0..50u64 {
        let mut i = inputs(Mode::Scoring, vec![cand("a", 100.0), cand("b", 400.0)]);
        i.key_hash = k;
        assert_eq!(order(&decide(&scoring(), &i, k)), vec!["a", "b"]);
    }
}

#[test]
fn a_keys_favourite_is_passed_over_while_its_requests_in_flight_exceed_the_load_bound() {
    // Three near-ties; find the key's favourite with nothing in flight.
    let tied = |loads: [u32; 3]| {
        ["a", "b", "c"]
            .iter()
            .zip(loads)
            .map(|(n, l)| {
                let mut c = cand(n, 100.0);
                // A few in flight move the load dimension by under 5%,
                // inside the near-tie band: only the bound decides.
                c.in_flight = l;
                c
            })
            .collect::<Vec<_>>()
    };
    let pick = |loads: [u32; 3], s: &RouterSettings| {
        order(&decide(s, &inputs(Mode::Scoring, tied(loads)), 0))[0].to_string()
    };
    let s = RouterSettings {
        tie_load_bound: 0.25,
        ..scoring()
    };
    let favourite = pick([0, 0, 0], &s);
    let at = ["a", "b", "c"]
        .iter()
        .position(|n| *n == favourite)
        .unwrap();
    let with = |n: u32| {
        let mut loads = [1, 1, 1];
        loads[at] = n;
        loads
    };
    // Equal loads, or one more than the others: the favourite keeps the
    // key (its cache stays useful).
    assert_eq!(pick(with(1), &s), favourite);
    assert_eq!(pick(with(2), &s), favourite);
    // cap = ceil(1.25 x (3 + 1 + 1 + 1) / 3) = 3: three in flight (a frozen
    // replica collecting requests) and the next by rendezvous weight
    // takes it, before any latency estimate moved.
    let moved = pick(with(3), &s);
    assert_ne!(moved, favourite);
    // It is the same one for every coordinator (no draw involved).
    for draw in 0..20 {
        assert_eq!(
            order(&decide(&s, &inputs(Mode::Scoring, tied(with(3))), draw))[0],
            moved
        );
    }
    // The default is 1.0; bound off: pure per-key ties, whatever is in
    // flight.
    assert_eq!(scoring().tie_load_bound, 1.0);
    // At the default, cap = ceil(2 x (n + 1 + 1 + 1) / 3): five in flight
    // (six with the new one, cap 6) keep the key on its favourite, six
    // (seven, cap 6) move it.
    assert_eq!(pick(with(5), &scoring()), favourite);
    assert_ne!(pick(with(6), &scoring()), favourite);
    let off = RouterSettings {
        tie_load_bound: 0.0,
        ..scoring()
    };
    assert_eq!(pick(with(9), &off), favourite);
    // The least loaded always fits: even a bound near zero picks someone
    // in the band, and it is the least loaded one here.
    let tight = RouterSettings {
        tie_load_bound: 1e-9,
        ..scoring()
    };
    let mut loads = [4, 4, 4];
    loads[(at + 1) % 3] = 0;
    assert_eq!(pick(loads, &tight), ["a", "b", "c"][(at + 1) % 3]);
}

#[test]
fn softmax_spreads_by_score_when_a_temperature_is_set() {
    let mut s = scoring();
    s.temperature = 0.05;
    let i = inputs(Mode::Scoring, vec![cand("a", 100.0), cand("b", 400.0)]);
    let firsts = (0..2000)
        .filter(|draw| decide(&s, &i, *draw).order[0].as_str() == "b")
        .count();
    // b's latency grade is 0.25 (4x as slow), its score 0.35 x 0.75 lower:
    // exp(-0.2625 / 0.05) ~ 0.0052 of a's weight.
    assert!(firsts < 20, "{firsts}");
    s.temperature = 1.0;
    let firsts = (0..2000)
        .filter(|draw| decide(&s, &i, *draw).order[0].as_str() == "b")
        .count();
    assert!((600..=1000).contains(&firsts), "{firsts}");
}

#[test]
fn slow_start_caps_a_new_nodes_share_at_its_ramp_by_whole_keys() {
    let mut new = cand("a", 100.0);
    new.ramp = 0.6;
    // Alone at the top (clearly faster), it would get every first place.
    let mut i = inputs(Mode::Scoring, vec![new, cand("b", 400.0), cand("c", 400.0)]);
    let n = 4000u64;
    let a_first = |i: &Inputs, draw: u64| decide(&scoring(), i, draw).order[0].as_str() == "a";
    let firsts = (0..n)
        .filter(|k| {
            i.key_hash = k.wrapping_mul(0x9E37_79B9_7F4A_7C15);
            a_first(&i, *k)
        })
        .count();
    let share = firsts as f64 / n as f64;
    assert!((share - 0.6).abs() < 0.04, "{share}");
    // Per key, all or nothing: the draw does not move a key.
    for k in 0..50u64 {
        i.key_hash = k;
        let first = a_first(&i, 0);
        assert!((1..20).all(|draw| a_first(&i, draw) == first), "key {k}");
    }
    i.key_hash = 7;
    // Passed over, it still comes before the filtered and is never lost.
    let d = decide(&scoring(), &i, 3);
    assert_eq!(d.order.len(), 3);
}

#[test]
fn plain_is_the_preference_order_without_the_dead() {
    let mut dead = cand("b", 1.0);
    dead.alive = false;
    let mut open = cand("c", 1.0);
    open.breaker = BreakerInput::Open { remaining_ms: 1 };
    let d = decide(
        &scoring(),
        &inputs(Mode::Plain, vec![cand("a", 900.0), dead, open]),
        1,
    );
    assert_eq!(order(&d), vec!["a", "c"]);
    assert_eq!(d.hedge, Hedge::Never);
}

#[test]
fn the_snitch_keeps_the_order_unless_a_replica_is_badly_worse() {
    let snitch = |name: &str, score: f64| {
        let mut c = cand(name, 100.0);
        c.modes.snitch = Some(score);
        c
    };
    let keep = decide(
        &scoring(),
        &inputs(Mode::Snitch, vec![snitch("a", 1.0), snitch("b", 0.95)]),
        1,
    );
    assert_eq!(order(&keep), vec!["a", "b"]);
    let sort = decide(
        &scoring(),
        &inputs(Mode::Snitch, vec![snitch("a", 1.0), snitch("b", 0.5)]),
        1,
    );
    assert_eq!(order(&sort), vec!["b", "a"]);
    assert_eq!(sort.hedge, Hedge::Speculative { quantile: 0.99 });
    // No score counts 0.0 (best), as upstream.
    let unknown = decide(
        &scoring(),
        &inputs(Mode::Snitch, vec![snitch("a", 1.0), cand("b", 100.0)]),
        1,
    );
    assert_eq!(order(&unknown), vec!["b", "a"]);
}

#[test]
fn hwlb_reads_in_proportion_to_one_over_the_miss_ratio_capped_at_one_over_r() {
    assert_eq!(capped_shares(&[1.0, 1.0], 1.0), vec![0.5, 0.5]);
    let shares = capped_shares(&[10.0, 1.0, 1.0], 0.5);
    assert!((shares[0] - 0.5).abs() < 1e-9 && (shares[1] - 0.25).abs() < 1e-9);
    let heat = |name: &str, hit: f64| {
        let mut c = cand(name, 100.0);
        c.report.as_mut().unwrap().hit_ratio = hit;
        c
    };
    // Hit ratios 0.9 and 0.5: weights 10 and 2, R=1: shares 5/6 and 1/6.
    let i = inputs(Mode::Hwlb, vec![heat("a", 0.9), heat("b", 0.5)]);
    let n = 6000;
    let a = (0..n)
        .filter(|draw| decide(&scoring(), &i, *draw).order[0].as_str() == "a")
        .count();
    let share = a as f64 / n as f64;
    assert!((share - 5.0 / 6.0).abs() < 0.03, "{share}");
    // Equal hit ratios: off, the preference order.
    let i = inputs(Mode::Hwlb, vec![heat("a", 0.5), heat("b", 0.505)]);
    for draw in 0..20 {
        assert_eq!(order(&decide(&scoring(), &i, draw)), vec!["a", "b"]);
    }
}

#[test]
fn c3_ranks_by_response_service_and_the_cube_of_the_queue() {
    let c3 = |name: &str, r: f64, s: f64, q: f64, os: u32| {
        let mut c = cand(name, 100.0);
        c.modes.c3_response_us = Some(r);
        c.modes.c3_service_us = Some(s);
        c.modes.c3_queue = Some(q);
        c.in_flight = os;
        c
    };
    // rank = R - s + (1 + os*n + q)^3 * s
    let a = c3("a", 1000.0, 100.0, 0.0, 0); // 1000 - 100 + 1 * 100 = 1000
    let b = c3("b", 500.0, 100.0, 1.0, 0); // 500 - 100 + 8 * 100 = 1200
    let mut i = inputs(Mode::C3, vec![a, b]);
    let d = decide(&scoring(), &i, 1);
    assert!((score(&d, "a") - 1000.0).abs() < 1e-9);
    assert!((score(&d, "b") - 1200.0).abs() < 1e-9);
    assert_eq!(order(&d), vec!["a", "b"]);
    // Outstanding requests count n times: with 3 coordinators, one request
    // in flight to a makes its qhat 4.
    i.coordinators = 3;
    i.candidates[0].in_flight = 1;
    let d = decide(&scoring(), &i, 1);
    assert!((score(&d, "a") - (900.0 + 64.0 * 100.0)).abs() < 1e-9);
    assert_eq!(order(&d), vec!["b", "a"]);
}

#[test]
fn p2c_takes_the_cheaper_of_two_random_candidates() {
    let peak = |name: &str, us: f64, in_flight: u32| {
        let mut c = cand(name, 100.0);
        c.modes.peak_us = Some(us);
        c.in_flight = in_flight;
        c
    };
    // With two candidates, the cheaper always comes first.
    let i = inputs(Mode::P2c, vec![peak("a", 100.0, 3), peak("b", 300.0, 0)]);
    for draw in 0..20 {
        assert_eq!(order(&decide(&scoring(), &i, draw)), vec!["b", "a"]);
    }
    // With three, the most expensive never comes first.
    let i = inputs(
        Mode::P2c,
        vec![
            peak("a", 100.0, 0),
            peak("b", 200.0, 0),
            peak("c", 900.0, 0),
        ],
    );
    for draw in 0..100 {
        assert_ne!(order(&decide(&scoring(), &i, draw))[0], "c");
    }
}

#[test]
fn a_kept_out_candidate_is_ranked_by_its_slowest_answer_and_named_for_a_probe_on_reads() {
    // b's estimate is the fastest, but it is kept out and its slowest
    // recent answer (decayed) is 80 ms: it ranks last, and a read due a
    // probe names it.
    let mut b = cand("b", 500.0);
    b.kept_out = true;
    b.peak_us = Some(80_000.0);
    b.probe_due = true;
    let d = ours(vec![cand("a", 1000.0), b.clone(), cand("c", 1000.0)]);
    assert_eq!(d.order.last(), Some(&id("b")));
    assert_eq!(d.latency_probe, Some(id("b")));
    assert_eq!(d.scored[1].latency_us, Some(80_000.0));
    // Not due: no probe; a write never probes.
    let mut not_due = b.clone();
    not_due.probe_due = false;
    let d = ours(vec![cand("a", 1000.0), not_due, cand("c", 1000.0)]);
    assert_eq!(d.latency_probe, None);
    let mut write = inputs(
        Mode::Scoring,
        vec![cand("a", 1000.0), b.clone(), cand("c", 1000.0)],
    );
    write.op = Op::Put;
    let d = decide(&scoring(), &write, 1);
    assert_eq!(d.latency_probe, None);
    // A candidate among the R asked is not probed (it gets the read),
    // nor one the hard filter leaves out (the breaker probes it).
    let mut two = inputs(
        Mode::Scoring,
        vec![cand("a", 1000.0), b.clone(), cand("c", 1000.0)],
    );
    two.r = 3;
    assert_eq!(decide(&scoring(), &two, 1).latency_probe, None);
    let mut open = b.clone();
    open.breaker = BreakerInput::Open { remaining_ms: 100 };
    let d = ours(vec![cand("a", 1000.0), open, cand("c", 1000.0)]);
    assert_eq!(d.latency_probe, None);
    // The peers' modes never probe.
    for mode in [Mode::Plain, Mode::Snitch, Mode::Hwlb, Mode::C3, Mode::P2c] {
        let i = inputs(mode, vec![cand("a", 1000.0), b.clone(), cand("c", 1000.0)]);
        assert_eq!(decide(&scoring(), &i, 1).latency_probe, None, "{mode}");
    }
}
