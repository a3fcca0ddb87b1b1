//! `kvctl explain KEY`.

use anyhow::Result;
use kv_client::Client;

use crate::cli::ExplainArgs;
use crate::exit::Outcome;
use crate::output;

/// Prints how the answering node would route the key, and why.
pub async fn run(client: &Client, args: &ExplainArgs, json: bool) -> Result<Outcome> {
    let report = client
        .explain(args.key.as_bytes(), args.op == "put")
        .await?;
    if json {
        output::print_json(&output::explain_json(&args.key, &report))?;
    } else {
        output::print(&output::explain_text(&args.key, &report))?;
    }
    Ok(Outcome::Done)
}
