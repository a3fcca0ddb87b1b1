//! `kvctl repair [NODE]`: a full anti-entropy pass now, following its
//! progress (bars on a terminal, a line per step otherwise: see
//! [`crate::progress`]).

use std::time::Duration;

use anyhow::Result;
use indicatif::MultiProgress;
use kv_client::Client;
use kv_types::NodeId;
use kv_wire::RepairReport;

use crate::cli::RepairArgs;
use crate::exit::Outcome;
use crate::output;
use crate::progress::Progress;

/// How often progress is polled.
const POLL: Duration = Duration::from_millis(250);

/// Starts a pass on the node (or every node) and follows it to the end.
///
/// A node that is down, or does not answer the start of its pass, is
/// listed as not repaired (`"unreached"` in `--json`) and makes the
/// outcome [`Outcome::Incomplete`] (exit 4): its data was not compared.
pub async fn run(client: &Client, args: &RepairArgs, json: bool) -> Result<Outcome> {
    let mut unreached: Vec<(String, String)> = Vec::new();
    let nodes: Vec<NodeId> = match &args.node {
        Some(n) => vec![n.clone()],
        None => {
            let status = client.status().await?;
            let mut alive = Vec::new();
            for n in &status.nodes {
                if n.status == "LEFT" {
                    continue;
                }
                match (n.alive, NodeId::new(n.id.as_str())) {
                    (true, Ok(id)) => alive.push(id),
                    _ => unreached.push((n.id.clone(), format!("{} sees it down", status.node))),
                }
            }
            alive
        }
    };
    let bars = MultiProgress::new();
    let mut followed: Vec<(NodeId, Progress)> = Vec::new();
    for node in nodes {
        let report = match client.repair(&node).await {
            Ok(report) => report,
            // One node's failure must not hide the others' passes.
            Err(e) if args.node.is_none() && !matches!(e, kv_client::Error::Refused { .. }) => {
                unreached.push((node.to_string(), e.to_string()));
                continue;
            }
            Err(e) => return Err(e.into()),
        };
        let mut progress = Progress::new(
            json,
            "{prefix:>7} [{bar:40}] {pos}/{len} partitions  {msg}",
            node.as_str(),
            "partitions",
            report.partitions_total,
            Some(&bars),
        );
        progress.update(
            report.partitions_done,
            report.partitions_total,
            "",
            &repaired(&report),
        );
        followed.push((node, progress));
    }
    let mut finals: Vec<RepairReport> = Vec::new();
    while !followed.is_empty() {
        tokio::time::sleep(POLL).await;
        let mut still = Vec::new();
        for (node, mut progress) in followed {
            let report = client.repair_status(&node).await?;
            progress.update(
                report.partitions_done,
                report.partitions_total,
                "",
                &repaired(&report),
            );
            if report.running {
                still.push((node, progress));
            } else {
                progress.finish();
                finals.push(report);
            }
        }
        followed = still;
    }
    finals.sort_by(|a, b| output::natural_cmp(&a.node, &b.node));
    if json {
        let reports: Vec<serde_json::Value> = finals
            .iter()
            .map(|r| {
                serde_json::json!({
                    "node": r.node,
                    "partitions": r.partitions_total,
                    "keys_repaired": r.keys_repaired,
                    "segments_differing": r.segments_differing,
                    "failures": r.failures,
                })
            })
            .collect();
        let unreached: Vec<serde_json::Value> = unreached
            .iter()
            .map(|(node, reason)| serde_json::json!({ "node": node, "reason": reason }))
            .collect();
        output::print_json(&serde_json::json!({ "repaired": reports, "unreached": unreached }))?;
    } else {
        let mut lines: Vec<(String, String)> = finals
            .iter()
            .map(|r| {
                let line = format!(
                    "{}: {} partitions compared, {} keys repaired since start\n",
                    r.node, r.partitions_total, r.keys_repaired
                );
                (r.node.clone(), line)
            })
            .collect();
        lines.extend(
            unreached
                .iter()
                .map(|(node, reason)| (node.clone(), format!("{node}: not repaired: {reason}\n"))),
        );
        lines.sort_by(|a, b| output::natural_cmp(&a.0, &b.0));
        output::print(&lines.into_iter().map(|(_, line)| line).collect::<String>())?;
    }
    let mut incomplete: Vec<String> = finals
        .iter()
        .filter(|r| r.failures > 0)
        .map(|r| format!("{} ({} steps)", r.node, r.failures))
        .collect();
    incomplete.extend(
        unreached
            .iter()
            .map(|(node, _)| format!("{node} (not reached)")),
    );
    if incomplete.is_empty() {
        return Ok(Outcome::Done);
    }
    eprintln!(
        "kvctl: the pass could not compare everything on {}: a node, a peer or a local store did not answer (a node's log says which); what they cover is unproven: run `kvctl repair` again once every node is up",
        incomplete.join(", ")
    );
    Ok(Outcome::Incomplete)
}

/// The figure shown beside a node's progress.
fn repaired(report: &RepairReport) -> String {
    format!("{} keys repaired", report.keys_repaired)
}
