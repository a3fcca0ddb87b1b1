//! `kvctl status`.

use anyhow::Result;
use kv_client::{Client, NodeId};

use crate::cli::StatusArgs;
use crate::exit::Outcome;
use crate::output;

/// Prints membership and ring as the answering node (or `args.node`)
/// sees them: the members, and the nodes that LEFT apart (in the table
/// with `--all`), with every node's certificate as the same node knows
/// them. The certificates are a second request to that node; when it
/// fails (a node of a build that does not answer it, or one that stopped
/// answering since), they show as unknown and the status is printed all
/// the same.
pub async fn run(client: &Client, args: &StatusArgs, json: bool) -> Result<Outcome> {
    let report = match &args.node {
        Some(node) => client.status_of(node).await?,
        None => client.status().await?,
    };
    let certs = match NodeId::new(report.node.as_str()) {
        Ok(answering) => client.certs_of(&answering).await.ok(),
        Err(_) => None,
    };
    if json {
        output::print_json(&output::status_json(&report, certs.as_ref()))?;
    } else {
        output::print(&output::status_text(&report, certs.as_ref(), args.all))?;
    }
    Ok(Outcome::Done)
}
