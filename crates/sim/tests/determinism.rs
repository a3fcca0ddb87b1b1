//! The simulation is deterministic, and a fixed set of seeds passes
//! (what CI runs through `cargo test --workspace`).

use kv_sim::{Faults, SimSettings, run_seed};

fn settings() -> SimSettings {
    SimSettings {
        ops: 150,
        ..SimSettings::default()
    }
}

#[test]
fn the_same_seed_gives_the_same_history_byte_for_byte() -> kv_sim::Result<()> {
    let settings = settings();
    let first = run_seed(42, &settings)?;
    let second = run_seed(42, &settings)?;
    assert!(!first.history.is_empty());
    assert!(
        first.trace.iter().any(|l| l.contains("fault:")),
        "no fault was injected"
    );
    assert_eq!(first.trace, second.trace);
    assert!(
        first.history == second.history,
        "seed 42 gave two different histories"
    );
    let other = run_seed(43, &settings)?;
    assert!(
        other.history != first.history,
        "seeds 42 and 43 gave the same history"
    );
    Ok(())
}

#[test]
fn a_fault_free_seed_passes_with_everything_acknowledged() -> kv_sim::Result<()> {
    let settings = SimSettings {
        faults: Faults::none(),
        ..settings()
    };
    let outcome = run_seed(7, &settings)?;
    let report = outcome.report.as_ref().expect("no panic");
    assert_eq!(report.exit_code(), 0, "{}", report.summary_line());
    assert_eq!(report.counts.failed + report.counts.indeterminate, 0);
    assert!(report.counts.acked > 50, "{}", report.summary_line());
    Ok(())
}
