//! `kvctl workload --duration SECS --clients N --keys N --seed N --history
//! FILE [--settle SECS]`: run the workload of `kv-workload` against the
//! cluster, then check its history.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::Context;

use anyhow::Result;
use kv_client::Client;
use kv_workload::{FaultMoments, FaultSplit, WorkloadSettings};

use crate::cli::WorkloadArgs;
use crate::commands::check::print_verdict;
use crate::exit::Outcome;

/// Runs the workload and prints the verdict.
pub async fn run(client: Arc<Client>, args: &WorkloadArgs, json: bool) -> Result<Outcome> {
    let mut config = WorkloadSettings::new(
        Duration::from_secs(args.duration),
        args.clients,
        args.keys,
        args.seed,
    );
    config.settle = Duration::from_secs(args.settle);
    config.namespace = namespace();
    eprintln!(
        "kvctl: workload for {} s: {} clients, {} registers and {} sets under {}/, seed {}; history {}",
        args.duration,
        args.clients,
        args.keys,
        config.sets,
        config.namespace,
        args.seed,
        args.history.display()
    );
    let started_unix_ms = unix_ms(SystemTime::now());
    let mut report = kv_workload::run(client, &config, &args.history).await?;
    if let Some(file) = &args.faults {
        let moments = FaultMoments::read(file)?;
        let entries = kv_workload::read_history(&args.history)
            .with_context(|| "re-reading the history to split it at the faults")?;
        report.faults = Some(FaultSplit::of(
            &entries,
            &moments.relative_to(started_unix_ms),
        ));
    }
    print_verdict(&report, &args.history, json)
}

/// Milliseconds since the Unix epoch (0 for a clock before it).
fn unix_ms(at: SystemTime) -> u64 {
    at.duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// A key prefix of its own for every run (`w<unix seconds>`), so that the
/// values an earlier run left on the cluster never show up as unexpected.
fn namespace() -> String {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    format!("w{secs}")
}
