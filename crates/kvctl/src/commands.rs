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

/// Days before its certificate expires from which kvctl warns.
const EXPIRY_WARNING_DAYS: u64 = 30;

/// The warning to print when a certificate valid until `not_after` expires
/// within [`EXPIRY_WARNING_DAYS`] of `now` (`None` otherwise).
fn expiry_warning(
    cert: &std::path::Path,
    not_after: std::time::SystemTime,
    now: std::time::SystemTime,
) -> Option<String> {
    let left = not_after.duration_since(now).ok()?;
    let days = left.as_secs() / 86_400;
    (days < EXPIRY_WARNING_DAYS).then(|| {
        format!(
            "warning: the certificate {} expires in {days} day(s); sign a new one with the cluster CA before then",
            cert.display()
        )
    })
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
    // Admin operations present the admin certificate unless the user chose
    // an identity (even `client`: then the node refuses).
    let identity = match &cli.identity {
        Some(identity) => identity.clone(),
        None if matches!(
            cli.command,
            Command::Repair(_) | Command::Drain(_) | Command::Remove { .. } | Command::Router(_)
        ) =>
        {
            "admin".to_string()
        }
        None => kv_client::DEFAULT_IDENTITY.to_string(),
    };
    // Loading twice costs a millisecond; a certificate that does not load
    // is reported by the connect below.
    if let Ok(creds) = kv_tls::load(&kv_tls::TlsFiles::in_dir(&found.certs, &identity))
        && let Some(warning) = expiry_warning(
            &creds.files().cert,
            creds.not_after(),
            std::time::SystemTime::now(),
        )
    {
        eprintln!("{warning}");
    }
    let client = Client::connect(ClientSettings {
        endpoints: found.endpoints,
        certs_dir: found.certs,
        connect_timeout: cli.connect_timeout,
        router_mode: cli.router_mode.clone(),
        router_settings: crate::router_set::parse(&cli.router_set)?,
        decision_log_rate,
        cache_file,
        identity,
        timeout: cli.timeout,
    })
    .await?;
    Ok(client)
}

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::time::{Duration, SystemTime};

    use super::expiry_warning;

    #[test]
    fn a_certificate_expiring_within_30_days_is_warned_about() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        let days = |d: u64| now + Duration::from_secs(d * 86_400);
        let cert = Path::new("certs/client.pem");
        let warning = expiry_warning(cert, days(29), now).unwrap();
        assert!(
            warning.contains("certs/client.pem expires in 29 day(s)"),
            "{warning}"
        );
        assert!(expiry_warning(cert, days(0) + Duration::from_secs(60), now).is_some());
        assert_eq!(expiry_warning(cert, days(30), now), None);
        assert_eq!(expiry_warning(cert, days(1800), now), None);
        // An expired certificate does not load at all (its own error).
        assert_eq!(
            expiry_warning(cert, now - Duration::from_secs(1), now),
            None
        );
    }
}
