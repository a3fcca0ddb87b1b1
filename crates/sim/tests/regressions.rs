//! Every seed on which the simulation found a bug, kept as a regression
//! test with the settings it failed with (see docs/simulation.md).

use kv_sim::{SimSettings, run_seed};

/// Runs `seed` with the default settings (5 nodes, 300 steps, every
/// fault) and asserts that it passes.
fn passes(seed: u64) {
    let outcome = match run_seed(seed, &SimSettings::default()) {
        Ok(outcome) => outcome,
        Err(e) => panic!("seed {seed} could not run: {e}"),
    };
    if outcome.failed() {
        let tail: Vec<&String> = outcome.trace.iter().rev().take(30).collect();
        panic!("seed {seed} failed; the end of its trace: {tail:#?}");
    }
}

/// A write whose flush failed stayed applied in storage while the read
/// cache kept the older object: reads and anti-entropy served the stale
/// cached copy, and the replicas never converged.
#[test]
fn seed_15_a_failed_flush_leaves_no_stale_cache_entry() {
    passes(15);
}

/// The same bug, another schedule.
#[test]
fn seed_18_a_failed_flush_leaves_no_stale_cache_entry() {
    passes(18);
}
