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

/// How long a drain that has LEFT waits for the other live members to
/// learn it by gossip (seconds while the leaver runs) before it says the
/// node can be stopped anyway, with a warning.
const AGREE_WAIT: Duration = Duration::from_secs(30);

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
    let mut left_at: Option<tokio::time::Instant> = None;
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
            // A node turns LEFT itself; the others learn it from its gossip.
            // Stopped before they do, it would stay DRAINING in their view
            // for good, so "it can be stopped" waits until every live member
            // that answers says LEFT too.
            if state == "LEFT" {
                let since = *left_at.get_or_insert_with(tokio::time::Instant::now);
                if let Some(member) = unaware_member(client, &status, &args.node).await {
                    if since.elapsed() < AGREE_WAIT {
                        continue;
                    }
                    eprintln!(
                        "warning: {member} still does not see {} as LEFT after {} s; \
                         it learns it by gossip from the other members",
                        args.node,
                        AGREE_WAIT.as_secs()
                    );
                }
            }
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

/// The first live member (other than `node`) that answers and does not
/// see `node` as LEFT yet; `None` when every one that answers does. A
/// member that does not answer is passed over: it learns the state from
/// the others' gossip when it is back.
async fn unaware_member(
    client: &Client,
    status: &kv_wire::StatusReport,
    node: &kv_types::NodeId,
) -> Option<String> {
    for member in &status.nodes {
        if member.id == node.as_str() || !member.alive || member.status == output::LEFT {
            continue;
        }
        let Ok(id) = kv_types::NodeId::new(member.id.as_str()) else {
            continue;
        };
        let Ok(view) = client.status_of(&id).await else {
            continue;
        };
        let sees_left = view
            .nodes
            .iter()
            .find(|n| n.id == node.as_str())
            .is_none_or(|n| n.status == output::LEFT);
        if !sees_left {
            return Some(member.id.clone());
        }
    }
    None
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
