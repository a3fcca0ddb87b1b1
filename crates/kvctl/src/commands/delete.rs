//! `kvctl delete KEY [--context CTX] [--w N]`.

use anyhow::Result;
use kv_client::{Client, decode_context};

use crate::cli::DeleteArgs;
use crate::exit::Outcome;
use crate::output;

/// Deletes the key: with `--context`, exactly what that context saw;
/// without, exactly what a quorum read sees now (a write racing the delete
/// survives as a sibling instead of being erased unseen).
pub async fn run(client: &Client, args: &DeleteArgs, json: bool) -> Result<Outcome> {
    let key = args.key.as_bytes();
    let context = match &args.context {
        Some(text) => decode_context(text)?,
        None => client.get(key, None).await?.context,
    };
    let new_context = client.delete(key, &context, args.w).await?;
    if json {
        output::print_json(&output::written_json(&args.key, &new_context))?;
    } else {
        output::print("OK\n")?;
    }
    Ok(Outcome::Done)
}
