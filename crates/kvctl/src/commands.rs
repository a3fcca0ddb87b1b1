//! One module per subcommand; this one connects and dispatches.
//!
//! Commands print their result themselves (text or JSON) and return an
//! [`Outcome`]; failures travel up as `anyhow` errors wrapping a
//! [`kv_client::Error`] where there is one, so that `main` can pick the
//! exit code.

mod bench;
mod certs;
mod check;
mod decisions;
mod delete;
mod drain;
mod explain;
mod get;
mod put;
mod repair;
mod status;
mod workload;

use std::sync::Arc;

use anyhow::Result;
use clap::CommandFactory;
use kv_client::{Client, ClientSettings};

use crate::cli::{Cli, Command};
use crate::exit::Outcome;
use crate::settings;

/// Runs the command of `cli`.
pub async fn run(cli: Cli) -> Result<Outcome> {
    match &cli.command {
        Command::Certs(command) => return certs::run(command, cli.json),
        Command::Check(args) => return check::run(args, cli.json),
        Command::Completions { shell } => {
            clap_complete::generate(*shell, &mut Cli::command(), "kvctl", &mut std::io::stdout());
            return Ok(Outcome::Done);
        }
        _ => {}
    }
    if let Command::Decisions(args) = &cli.command
        && let Some(file) = &args.client
    {
        return decisions::from_file(file, args, cli.json);
    }
    let client = Arc::new(connect(&cli).await?);
    let json = cli.json;
    let result = match &cli.command {
        Command::Workload(args) => workload::run(Arc::clone(&client), args, json).await,
        Command::Bench(args) => bench::run(Arc::clone(&client), args, cli.timeout, json).await,
        Command::Get(args) => get::run(&client, args, json).await,
        Command::Put(args) => put::run(&client, args, json).await,
        Command::Delete(args) => delete::run(&client, args, json).await,
        Command::Status(args) => status::run(&client, args, json).await,
        Command::Explain(args) => explain::run(&client, args, json).await,
        Command::Decisions(args) => decisions::run(&client, args, json).await,
        Command::Router(command) => decisions::router(&client, command, json).await,
        Command::Repair(args) => repair::run(&client, args, json).await,
        Command::Drain(args) => drain::run(&client, args, json).await,
        Command::Plan(command) => drain::plan(&client, command, json).await,
        Command::Remove { node } => drain::remove(&client, node, json).await,
        Command::Certs(_) | Command::Check(_) | Command::Completions { .. } => Ok(Outcome::Done),
    };
    if let Some(file) = &cli.log_decisions
        && let Err(e) = decisions::append(file, &client.take_decisions())
    {
        eprintln!("kvctl: cannot log decisions to {}: {e}", file.display());
    }
    client.save_cache().await;
    client.close().await;
    result
}

/// A client for the cluster the flags, environment or settings file name.
async fn connect(cli: &Cli) -> Result<Client> {
    let found = settings::resolve(
        &cli.endpoints,
        cli.certs.as_deref(),
        &settings::default_starts(),
    )?;
    let cache_file = found.cache_file();
    let decision_log_rate = match (&cli.log_decisions, &cli.command) {
        (None, _) => 0.0,
        // A benchmark samples like the nodes do; a one-shot call logs all.
        (Some(_), Command::Bench(_) | Command::Workload(_)) => {
            kv_router::RouterSettings::default().decision_log_rate
        }
        (Some(_), _) => 1.0,
    };
    let client = Client::connect(ClientSettings {
        endpoints: found.endpoints,
        certs_dir: found.certs,
        connect_timeout: cli.connect_timeout,
        router_mode: cli.router_mode.clone(),
        decision_log_rate,
        cache_file,
        // Admin operations present the admin certificate unless the user
        // chose an identity (even `client`: then the node refuses).
        identity: match &cli.identity {
            Some(identity) => identity.clone(),
            None if matches!(
                cli.command,
                Command::Repair(_)
                    | Command::Drain(_)
                    | Command::Remove { .. }
                    | Command::Router(_)
            ) =>
            {
                "admin".to_string()
            }
            None => kv_client::DEFAULT_IDENTITY.to_string(),
        },
        timeout: cli.timeout,
    })
    .await?;
    Ok(client)
}
