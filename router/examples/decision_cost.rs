//! The router's in-process cost of one read: three candidates snapshotted,
//! decided and observed, and one answer recorded, in ns per decision. Pure
//! logic, no I/O: builds against any version of the crate with this API,
//! so two versions can be compared in one interleaved run (docs/benchmarks.md).
//!
//! Run: `cargo run --release -p kv-router --example decision_cost [N]`

use std::sync::Arc;
use std::time::{Duration, Instant};

use kv_router::{Ask, Candidate, Op, Outcome, ReportInputs, RouterSettings, Scorer, decide};
use kv_types::NodeId;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let n: u64 = std::env::args()
        .nth(1)
        .map_or(Ok(1_000_000), |a| a.parse())?;
    let ids = ["node1", "node2", "node3"]
        .map(|s| NodeId::new(s).map_err(|e| e.to_string()))
        .into_iter()
        .collect::<Result<Vec<_>, _>>()?;
    let mut scorer = Scorer::new(RouterSettings::default(), ids[0].clone())?;
    let zone: Arc<str> = "z1".into();
    let candidates: Vec<Candidate> = ids
        .iter()
        .enumerate()
        .map(|(i, id)| Candidate {
            id: id.clone(),
            alive: true,
            up: true,
            suspect: false,
            zone: if i == 1 {
                "z2".into()
            } else {
                Arc::clone(&zone)
            },
            host: id.as_str().into(),
            report: Some(ReportInputs {
                age_ms: 100,
                cpu: 0.1,
                queue: 0,
                backlog: 0,
                hit_ratio: 0.7,
                hot: false,
                repair: false,
            }),
            hints_pending: 0,
            generation: Some(1),
        })
        .collect();
    let t0 = Instant::now();
    let mut key = 0x9E37_79B9_7F4A_7C15u64;
    let mut firsts = [0u64; 3];
    for i in 0..n {
        // Time moves 0.2 ms a decision (5,000 a second).
        let now = t0 + Duration::from_micros(200 * i);
        key = key.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
        let ask = Ask {
            op: Op::Get,
            key_hash: key,
            r: 1,
            zone: &zone,
            members: 3,
        };
        let inputs = scorer.snapshot(&candidates, ask, now);
        let decision = decide(scorer.settings(), &inputs, key);
        scorer.observe(&inputs, &decision, now);
        let Some(best) = decision.order.first().cloned() else {
            continue;
        };
        let first = ids.iter().position(|id| *id == best).unwrap_or(0);
        firsts[first] += 1;
        let ticket = scorer.start(&best, Op::Get, now);
        scorer.finish(&ticket);
        let latency = Duration::from_micros(500 + (key >> 54));
        scorer.record(&best, Op::Get, Outcome::Ok { latency }, now);
    }
    let ns = t0.elapsed().as_nanos() as f64 / n as f64;
    println!("{ns:.0} ns per decision ({n} decisions; first places {firsts:?})");
    Ok(())
}
