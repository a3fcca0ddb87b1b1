//! The fixed seed set CI runs (through `cargo test --workspace`, which
//! `scripts/test` runs): seeds 1,000 to 1,019, 5 nodes, 300 client steps,
//! every fault kind. About 30 s in a debug build here; the bound is 5
//! minutes.

use kv_sim::{SimSettings, run_seed};

/// The first seed of the set.
const FIRST: u64 = 1_000;

/// Seeds in the set.
const COUNT: u64 = 20;

#[test]
fn a_fixed_set_of_seeds_passes() {
    let settings = SimSettings::default();
    let mut failed = Vec::new();
    for seed in FIRST..FIRST + COUNT {
        let outcome = match run_seed(seed, &settings) {
            Ok(outcome) => outcome,
            Err(e) => panic!("seed {seed} could not run: {e}"),
        };
        if outcome.failed() {
            let verdict = match (&outcome.report, &outcome.panic) {
                (_, Some(panic)) => format!("panic: {panic}"),
                (Some(report), None) => report.detail_lines().join("; "),
                (None, None) => String::new(),
            };
            failed.push(format!(
                "seed {seed}: {verdict}; replay: scripts/simulate --seeds 1 --from {seed} --trace"
            ));
        }
    }
    assert!(failed.is_empty(), "failing seeds:\n{}", failed.join("\n"));
}
