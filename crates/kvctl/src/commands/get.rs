//! `kvctl get KEY [--r N]` and `kvctl get --node NODE --local KEY`.

use anyhow::Result;
use kv_client::{Client, NodeId};

use crate::cli::GetArgs;
use crate::exit::Outcome;
use crate::output;

/// Reads the key with a quorum, or from one replica with `--local`.
pub async fn run(client: &Client, args: &GetArgs, json: bool) -> Result<Outcome> {
    if let (true, Some(node)) = (args.local, &args.node) {
        return local(client, node, &args.key, json).await;
    }
    let reply = client.get(args.key.as_bytes(), args.r).await?;
    if json {
        output::print_json(&output::get_json(&args.key, &reply))?;
    } else {
        output::print(&output::get_text(&reply))?;
        if reply.values.len() > 1 {
            eprintln!(
                "{}",
                output::siblings_note(&args.key, reply.values.len(), &reply.context)
            );
        }
    }
    if reply.deleted {
        eprintln!("not found");
        return Ok(Outcome::NotFound);
    }
    Ok(Outcome::Done)
}

/// The versions one replica stores, without a quorum.
async fn local(client: &Client, node: &NodeId, key: &str, json: bool) -> Result<Outcome> {
    let object = client
        .local_get(node, key.as_bytes())
        .await?
        .unwrap_or_default();
    if json {
        output::print_json(&output::local_json(node.as_str(), key, &object))?;
    } else {
        output::print(&output::local_text(&object))?;
    }
    if object.is_empty() {
        eprintln!("not found on {node}");
        return Ok(Outcome::NotFound);
    }
    Ok(Outcome::Done)
}
