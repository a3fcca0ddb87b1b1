//! `kvctl decisions` and `kvctl router mode`.

use anyhow::Result;
use kv_client::Client;
use serde_json::Value;

use crate::cli::{DecisionsArgs, RouterCommand};
use crate::exit::Outcome;
use crate::output;
use crate::routing::{self, Record};

/// Prints the decisions a node logged.
pub async fn run(client: &Client, args: &DecisionsArgs, json: bool) -> Result<Outcome> {
    let key = args.key.as_deref().map(str::as_bytes);
    let (node, raw) = client.decisions(args.node.as_ref(), key, args.last).await?;
    let records: Vec<Record> = raw
        .iter()
        .map(|r| Record::parse(r))
        .collect::<Result<_>>()?;
    if json {
        let values: Vec<Value> = records
            .iter()
            .map(serde_json::to_value)
            .collect::<std::result::Result<_, _>>()?;
        output::print_json(&serde_json::json!({ "node": node, "decisions": values }))?;
    } else if records.is_empty() {
        output::print(&format!(
            "{node} has logged no decision{} yet (it logs one in `[router] decision_log_rate`)",
            args.key
                .as_deref()
                .map_or_else(String::new, |k| format!(" of key {k}"))
        ))?;
    } else {
        let text: Vec<String> = records.iter().map(routing::text).collect();
        output::print(&text.join("\n"))?;
    }
    Ok(Outcome::Done)
}

/// `kvctl router mode MODE [--node NODE]`: switches every node (or one).
pub async fn router(client: &Client, command: &RouterCommand, json: bool) -> Result<Outcome> {
    let RouterCommand::Mode { mode, node } = command;
    let nodes = match node {
        Some(node) => vec![node.clone()],
        None => client
            .status()
            .await?
            .nodes
            .iter()
            .filter(|n| n.alive && n.status != "LEFT")
            .filter_map(|n| kv_client::NodeId::new(n.id.as_str()).ok())
            .collect(),
    };
    for n in &nodes {
        client.router_mode(n, mode).await?;
    }
    let names: Vec<&str> = nodes.iter().map(kv_client::NodeId::as_str).collect();
    if json {
        output::print_json(&serde_json::json!({ "mode": mode, "nodes": names }))?;
    } else {
        output::print(&format!("routing mode {mode} on {}", names.join(", ")))?;
    }
    Ok(Outcome::Done)
}
