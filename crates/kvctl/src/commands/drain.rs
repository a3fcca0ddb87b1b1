//! `kvctl drain NODE [--dry-run]` and `kvctl plan join --zone Z`.

use std::time::Duration;

use anyhow::Result;
use kv_client::Client;
use kv_wire::PlanReport;

use crate::cli::{DrainArgs, PlanCommand};
use crate::exit::Outcome;
use crate::output;
use crate::progress::Progress;

/// How often a drain's progress is polled.
const POLL: Duration = Duration::from_millis(500);

/// Drains a node (or prints the plan), then follows it until it is LEFT.
pub async fn run(client: &Client, args: &DrainArgs, json: bool) -> Result<Outcome> {
    let plan = client.drain(&args.node, args.dry_run).await?;
    print_plan(&plan, json)?;
    if args.dry_run || args.no_wait {
        return Ok(Outcome::Done);
    }
    let mut progress = Progress::new(
        json,
        "{spinner} [{bar:40}] {pos}/{len} partitions pulled  {msg}",
        "",
        "partitions pulled",
        1,
        None,
    );
    loop {
        tokio::time::sleep(POLL).await;
        let status = client.status().await?;
        let (mut done, mut total) = (0u64, 0u64);
        for n in &status.nodes {
            if let Some((d, t)) = n.transfer.split_once('/')
                && let (Ok(d), Ok(t)) = (d.parse::<u64>(), t.parse::<u64>())
            {
                done += d;
                total += t;
            }
        }
        let state = status
            .nodes
            .iter()
            .find(|n| n.id == args.node.as_str())
            .map_or("gone", |n| n.status.as_str())
            .to_string();
        progress.update(
            if total == 0 { 1 } else { done },
            total.max(1),
            &format!("{} is {state}", args.node),
            "",
        );
        if state == "LEFT" || state == "gone" {
            progress.finish();
            if !json {
                output::print(&format!(
                    "{} has LEFT: every partition moved; it can be stopped\n",
                    args.node
                ))?;
            }
            return Ok(Outcome::Done);
        }
    }
}

/// `kvctl remove NODE`. A node that has already LEFT the ring (drained,
/// or removed before) is out of it: nothing to do, exit 0, and it says so
/// (`--json`: `"already_left": true`), as a delete of what is not there.
pub async fn remove(client: &Client, node: &kv_types::NodeId, json: bool) -> Result<Outcome> {
    let status = client.status().await?;
    let left = status
        .nodes
        .iter()
        .any(|n| n.id == node.as_str() && n.status == output::LEFT);
    if left {
        if json {
            output::print_json(
                &serde_json::json!({ "removed": node.as_str(), "already_left": true }),
            )?;
        } else {
            output::print(&format!(
                "{node} has already LEFT the ring (drained or removed): nothing to remove\n"
            ))?;
        }
        return Ok(Outcome::Done);
    }
    client.remove(node).await?;
    if json {
        output::print_json(
            &serde_json::json!({ "removed": node.as_str(), "already_left": false }),
        )?;
    } else {
        output::print(&format!(
            "{node} removed: its ranges move to new owners, which copy them from the other replicas\n"
        ))?;
    }
    Ok(Outcome::Done)
}

/// `kvctl plan join`.
pub async fn plan(client: &Client, command: &PlanCommand, json: bool) -> Result<Outcome> {
    match command {
        PlanCommand::Join { zone, weight } => {
            let plan = client.plan_join(zone, *weight).await?;
            print_plan(&plan, json)?;
        }
    }
    Ok(Outcome::Done)
}

/// Prints a plan, its moves in natural order of node ids (`node2` before
/// `node10`).
fn print_plan(plan: &PlanReport, json: bool) -> Result<()> {
    let mut plan = plan.clone();
    plan.moves.sort_by(|a, b| output::natural_cmp(&a.to, &b.to));
    for m in &mut plan.moves {
        m.from.sort_by(|a, b| output::natural_cmp(a, b));
    }
    if json {
        let moves: Vec<serde_json::Value> = plan
            .moves
            .iter()
            .map(|m| {
                serde_json::json!({
                    "to": m.to,
                    "from": m.from,
                    "partitions": m.partitions,
                    "keys": m.keys,
                    "bytes": m.bytes,
                })
            })
            .collect();
        output::print_json(&serde_json::json!({
            "change": plan.change,
            "started": plan.started,
            "partitions": plan.partitions,
            "moves": moves,
        }))?;
        return Ok(());
    }
    let mut text = format!(
        "{}: {} partitions change replicas{}\n",
        plan.change,
        plan.partitions,
        if plan.started {
            " (started)"
        } else {
            " (plan only, nothing moved)"
        }
    );
    text.push_str(&format!(
        "{:<14} {:>10} {:>10} {:>12}  FROM\n",
        "TO", "PARTITIONS", "KEYS", "BYTES"
    ));
    for m in &plan.moves {
        text.push_str(&format!(
            "{:<14} {:>10} {:>10} {:>12}  {}\n",
            m.to,
            m.partitions,
            m.keys,
            m.bytes,
            m.from.join(",")
        ));
    }
    output::print(&text)?;
    Ok(())
}
