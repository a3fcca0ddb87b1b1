//! `kvctl workload --duration SECS --clients N --keys N --seed N --history
//! FILE [--settle SECS]`: run the workload of `kv-workload` against the
//! cluster, then check its history.

use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::Result;
use kv_client::Client;
use kv_workload::WorkloadSettings;

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
    let report = kv_workload::run(client, &config, &args.history).await?;
    print_verdict(&report, &args.history, json)
}

/// A key prefix of its own for every run (`w<unix seconds>`), so that the
/// values an earlier run left on the cluster never show up as unexpected.
fn namespace() -> String {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    format!("w{secs}")
}
