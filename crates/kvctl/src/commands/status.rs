//! `kvctl status`.

use anyhow::Result;
use kv_client::Client;

use crate::cli::StatusArgs;
use crate::exit::Outcome;
use crate::output;

/// Prints membership and ring as the answering node (or `args.node`)
/// sees them: the members, and the nodes that LEFT apart (in the table
/// with `--all`).
pub async fn run(client: &Client, args: &StatusArgs, json: bool) -> Result<Outcome> {
    let report = match &args.node {
        Some(node) => client.status_of(node).await?,
        None => client.status().await?,
    };
    if json {
        output::print_json(&output::status_json(&report))?;
    } else {
        output::print(&output::status_text(&report, args.all))?;
    }
    Ok(Outcome::Done)
}
