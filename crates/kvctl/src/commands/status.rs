//! `kvctl status`.

use anyhow::Result;
use kv_client::Client;

use crate::exit::Outcome;
use crate::output;

/// Prints membership and ring as the answering node sees them.
pub async fn run(client: &Client, json: bool) -> Result<Outcome> {
    let report = client.status().await?;
    if json {
        output::print_json(&output::status_json(&report))?;
    } else {
        output::print(&output::status_text(&report))?;
    }
    Ok(Outcome::Done)
}
