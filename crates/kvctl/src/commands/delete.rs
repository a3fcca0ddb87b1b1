//! `kvctl delete KEY [--context CTX] [--r N] [--w N]`.

use anyhow::Result;
use kv_client::{Client, decode_context};

use crate::cli::DeleteArgs;
use crate::exit::Outcome;
use crate::output;

/// Deletes the key: with `--context`, exactly what that context saw;
/// without, exactly what a quorum read (`--r`) sees now (a write racing the
/// delete survives as a sibling instead of being erased unseen).
///
/// Deleting a key that is absent or already deleted succeeds (exit 0:
/// deletes are idempotent, as in Riak) and says so; the tombstone is
/// written anyway, since a replica the read did not ask may hold a value.
pub async fn run(client: &Client, args: &DeleteArgs, json: bool) -> Result<Outcome> {
    let key = args.key.as_bytes();
    // Whether the read found a live value; unknown with --context (no read).
    let (context, existed) = match &args.context {
        Some(text) => (decode_context(text)?, None),
        None => {
            let read = client.get(key, args.r).await?;
            (read.context, Some(!read.deleted))
        }
    };
    let new_context = client.delete(key, &context, args.w).await?;
    if json {
        output::print_json(&output::deleted_json(&args.key, &new_context, existed))?;
    } else if existed == Some(false) {
        output::print("OK (nothing was there: the key was absent or already deleted)\n")?;
    } else {
        output::print("OK\n")?;
    }
    Ok(Outcome::Done)
}
