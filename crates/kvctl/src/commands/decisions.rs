//! `kvctl decisions` and `kvctl router mode`.

use std::io::Write;
use std::path::Path;

use anyhow::{Context, Result};
use kv_client::{Client, DecisionRecord};
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
        .map(|r| routing::parse(r))
        .collect::<Result<_>>()?;
    print(&node, &records, args, json)
}

/// Largest decision file `--client` reads, bytes.
const MAX_CLIENT_LOG_BYTES: u64 = 64 << 20;

/// `kvctl decisions --client FILE`: kvctl's own decisions, from the file
/// `--log-decisions` wrote.
pub fn from_file(file: &Path, args: &DecisionsArgs, json: bool) -> Result<Outcome> {
    let len = std::fs::metadata(file)
        .with_context(|| format!("cannot read {}", file.display()))?
        .len();
    anyhow::ensure!(
        len <= MAX_CLIENT_LOG_BYTES,
        "{} is larger than {MAX_CLIENT_LOG_BYTES} bytes",
        file.display()
    );
    let text =
        std::fs::read_to_string(file).with_context(|| format!("cannot read {}", file.display()))?;
    let key = args.key.as_deref().map(str::as_bytes);
    let mut records = Vec::new();
    for (n, line) in text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
    {
        let record =
            routing::parse(line).with_context(|| format!("{} line {}", file.display(), n + 1))?;
        if key.is_none_or(|k| record.key == k) {
            records.push(record);
        }
    }
    let last = usize::try_from(args.last).unwrap_or(usize::MAX);
    let skip = records.len().saturating_sub(last);
    records.drain(..skip);
    print("kvctl", &records, args, json)
}

/// Appends `records` to `file`, one JSON object per line.
///
/// # Errors
/// When the file cannot be opened or written.
pub fn append(file: &Path, records: &[DecisionRecord]) -> std::io::Result<()> {
    if records.is_empty() {
        return Ok(());
    }
    let mut out = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(file)?;
    let mut text = String::new();
    for r in records {
        text.push_str(&serde_json::to_string(r).map_err(std::io::Error::other)?);
        text.push('\n');
    }
    out.write_all(text.as_bytes())
}

fn print(node: &str, records: &[Record], args: &DecisionsArgs, json: bool) -> Result<Outcome> {
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
