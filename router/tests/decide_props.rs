//! Properties of every decision, over random inputs: the order holds each
//! live candidate once (the passing ones first, in score order for ours),
//! never a dead one; the same inputs and draw decide the same; and a
//! candidate better on every dimension never ranks below one worse on
//! every dimension (temperature 0, equal penalties, a gap beyond the
//! near-tie band).

#![allow(clippy::unwrap_used)] // Tests: a panic is a failed assertion.

use kv_router::{
    BreakerInput, CandidateInputs, Inputs, Mode, Op, ReportInputs, RouterSettings, decide,
};
use kv_types::NodeId;
use proptest::prelude::*;

fn candidate() -> impl Strategy<Value = CandidateInputs> {
    (
        (any::<bool>(), 0u8..10, 1.0f64..20_000.0, 0u32..80),
        (0.0f64..1.0, 0.0f64..1.0, any::<bool>(), 0u64..40),
        (prop::option::of(0u64..10_000), 0.6f64..1.0, any::<bool>()),
    )
        .prop_map(
            |(
                (alive, breaker, latency, in_flight),
                (cpu, hit, hot, failures),
                (age, ramp, aff),
            )| {
                let mut c = CandidateInputs::new(NodeId::new("x").unwrap());
                c.alive = alive || breaker > 7;
                c.breaker = match breaker {
                    0 => BreakerInput::Open { remaining_ms: 10 },
                    1 => BreakerInput::Probing,
                    _ => BreakerInput::Closed,
                };
                c.latency_us = Some(latency);
                c.latency_samples = 5000;
                c.in_flight = in_flight;
                c.window_requests = 40;
                c.window_failures = failures.min(40);
                c.report = age.map(|age_ms| ReportInputs {
                    age_ms,
                    cpu,
                    queue: 0,
                    backlog: 0,
                    hit_ratio: hit,
                    hot,
                    repair: false,
                });
                c.ramp = if ramp > 0.95 { 1.0 } else { ramp };
                c.affinity = aff;
                c
            },
        )
}

fn inputs(mode: Mode, mut candidates: Vec<CandidateInputs>) -> Inputs {
    for (i, c) in candidates.iter_mut().enumerate() {
        c.id = NodeId::new(format!("node{i}")).unwrap();
        c.zone = format!("z{}", i % 2).into();
    }
    Inputs {
        mode,
        op: Op::Get,
        key_hash: 1,
        local_zone: "z0".into(),
        r: 2,
        cluster_p99_us: None,
        coordinators: 2,
        candidates,
    }
}

fn mode() -> impl Strategy<Value = Mode> {
    prop::sample::select(Mode::ALL.to_vec())
}

proptest! {
    #[test]
    fn the_order_holds_every_live_candidate_once_and_no_dead_one(
        m in mode(),
        cands in prop::collection::vec(candidate(), 1..6),
        draw in any::<u64>(),
    ) {
        let i = inputs(m, cands);
        let d = decide(&RouterSettings::default(), &i, draw);
        let live: Vec<&NodeId> = i.candidates.iter().filter(|c| c.alive).map(|c| &c.id).collect();
        prop_assert_eq!(d.order.len(), live.len());
        for id in &live {
            prop_assert_eq!(d.order.iter().filter(|o| o == id).count(), 1);
        }
        // Ours: the passing candidates first, then the filtered ones.
        if m == Mode::Scoring && d.fallback.is_none() {
            let passing = d.scored.iter().filter(|s| s.excluded.is_none()).count();
            for id in &d.order[..passing] {
                let s = d.scored.iter().find(|s| &s.id == id).unwrap();
                prop_assert!(s.excluded.is_none());
            }
        }
    }

    #[test]
    fn the_same_inputs_and_draw_decide_the_same(
        m in mode(),
        cands in prop::collection::vec(candidate(), 1..6),
        draw in any::<u64>(),
    ) {
        let i = inputs(m, cands);
        let s = RouterSettings::default();
        prop_assert_eq!(decide(&s, &i, draw), decide(&s, &i, draw));
        // And the inputs survive the decision log's encoding unchanged.
        let json = serde_json::to_string(&i).unwrap();
        let back: Inputs = serde_json::from_str(&json).unwrap();
        prop_assert_eq!(decide(&s, &back, draw), decide(&s, &i, draw));
    }

    #[test]
    fn better_on_every_dimension_never_ranks_below_worse_on_every_dimension(
        cands in prop::collection::vec(candidate(), 2..5),
        draw in any::<u64>(),
    ) {
        let mut cands = cands;
        for c in &mut cands {
            // Equal penalties (none), fresh, passing, no slow start.
            c.alive = true;
            c.breaker = BreakerInput::Closed;
            c.window_failures = 0;
            c.ramp = 1.0;
            if let Some(r) = c.report.as_mut() { r.age_ms = 0; }
            c.report.get_or_insert(ReportInputs {
                age_ms: 0, cpu: 0.0, queue: 0, backlog: 0, hit_ratio: 0.5, hot: false, repair: false,
            });
        }
        let settings = RouterSettings::default();
        let i = inputs(Mode::Scoring, cands);
        let d = decide(&settings, &i, draw);
        let pos = |id: &NodeId| d.order.iter().position(|o| o == id).unwrap();
        for a in &d.scored {
            for b in &d.scored {
                let (da, db) = (a.dimensions.unwrap(), b.dimensions.unwrap());
                let dominates = da.load >= db.load && da.latency >= db.latency
                    && da.hit >= db.hit && da.availability >= db.availability;
                if dominates && a.score * (1.0 - settings.near_tie) > b.score {
                    prop_assert!(pos(&a.id) < pos(&b.id), "{} {} vs {} {}", a.id, a.score, b.id, b.score);
                }
            }
        }
    }
}
