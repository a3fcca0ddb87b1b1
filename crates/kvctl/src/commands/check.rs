//! `kvctl check --history FILE`, and the verdict printing that `kvctl
//! workload` shares.

use std::path::Path;

use anyhow::Result;
use kv_workload::{AnomalyKind, Report};
use serde_json::json;

use crate::cli::CheckArgs;
use crate::exit::Outcome;
use crate::output;

/// Re-checks a saved history and prints the verdict.
pub fn run(args: &CheckArgs, json: bool) -> Result<Outcome> {
    let entries = kv_workload::read_history(&args.history)?;
    let report = kv_workload::check(&entries);
    print_verdict(&report, &args.history, json)
}

/// Prints the summary line (or, with `--json`, one JSON object) on standard
/// output and every anomaly, unchecked key and note on standard error;
/// returns the outcome whose exit code scripts rely on.
pub fn print_verdict(report: &Report, history: &Path, json: bool) -> Result<Outcome> {
    if json {
        output::print_json(&report_json(report))?;
    } else {
        output::print(&format!("{}\n", report.summary_line()))?;
    }
    for line in report.detail_lines() {
        eprintln!("{line}");
    }
    let outcome = match report.exit_code() {
        0 => Outcome::Done,
        kv_workload::EXIT_ANOMALY => {
            eprintln!(
                "kvctl: {} anomalies found (lost, unexpected or duplicated writes); the history is {}",
                report.anomalies.len(),
                history.display()
            );
            Outcome::Anomalies
        }
        _ => {
            eprintln!(
                "kvctl: the final reads could not complete: {} key(s) unchecked, so the run proves nothing about them; the history is {}",
                report.unchecked.len(),
                history.display()
            );
            Outcome::Unchecked
        }
    };
    Ok(outcome)
}

/// The verdict as JSON: the summary's fields, then the details.
fn report_json(report: &Report) -> serde_json::Value {
    let anomalies: Vec<serde_json::Value> = report
        .anomalies
        .iter()
        .map(|a| json!({ "kind": a.kind.name(), "key": a.key, "value": a.value, "detail": a.detail }))
        .collect();
    json!({
        "acked": report.counts.acked,
        "failed": report.counts.failed,
        "indeterminate": report.counts.indeterminate,
        "lost": report.count(AnomalyKind::Lost),
        "unexpected": report.count(AnomalyKind::Unexpected),
        "duplicated": report.count(AnomalyKind::Duplicated),
        "p50_ms": report.stats.p50_ms,
        "p99_ms": report.stats.p99_ms,
        "p999_ms": report.stats.p999_ms,
        "ops_per_s": report.stats.ops_per_s,
        "resurrected": report.count(AnomalyKind::Resurrected),
        "unchecked": report.unchecked,
        "anomalies": anomalies,
        "notes": report.notes,
        "faults": report.faults.as_ref().map(|f| json!({
            "moments": f.moments,
            "in_flight_at_faults": f.in_flight(),
            "in_flight_ok": f.in_flight_ok,
            "in_flight_indeterminate": f.in_flight_indeterminate,
            "in_flight_failed": f.in_flight_failed,
            "in_flight_max_ms": f.in_flight_max_ms,
            "others_p99_ms": f.others.p99_ms,
            "others_p999_ms": f.others.p999_ms,
        })),
    })
}
