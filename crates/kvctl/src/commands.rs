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
    let router_settings = crate::router_set::parse(&cli.router_set)?;
    let sampled = matches!(cli.command, Command::Bench(_) | Command::Workload(_));
    let decision_log_rate = log_rate(
        cli.log_decisions.is_some(),
        sampled,
        router_settings.as_ref(),
    );
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
        router_settings,
        decision_log_rate,
        cache_file,
        identity,
        timeout: cli.timeout,
    })
    .await?;
    Ok(client)
}

/// The share of kvctl's own routing decisions to log: none without
/// `--log-decisions`; for a benchmark or workload, a sample like the
/// nodes' (`--router-set decision_log_rate=X` when given, else the
/// router's default, 1 in 1,000); for a one-shot call, every decision.
fn log_rate(logging: bool, sampled: bool, set: Option<&kv_router::RouterSettings>) -> f64 {
    match (logging, sampled) {
        (false, _) => 0.0,
        (true, true) => set.map_or_else(
            || kv_router::RouterSettings::default().decision_log_rate,
            |s| s.decision_log_rate,
        ),
        (true, false) => 1.0,
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::time::{Duration, SystemTime};

    use super::{expiry_warning, log_rate};

    #[test]
    fn a_benchmark_logs_its_decisions_at_the_rate_router_set_gives() {
        let default = kv_router::RouterSettings::default().decision_log_rate;
        assert_eq!(log_rate(false, true, None), 0.0);
        assert_eq!(log_rate(true, false, None), 1.0);
        assert_eq!(log_rate(true, true, None), default);
        let set = crate::router_set::parse(&["decision_log_rate=0.05".to_string()])
            .unwrap()
            .unwrap();
        assert_eq!(log_rate(true, true, Some(&set)), 0.05);
        // Other settings leave the benchmark's rate at the default.
        let other = crate::router_set::parse(&["near_tie=0.1".to_string()])
            .unwrap()
            .unwrap();
        assert_eq!(log_rate(true, true, Some(&other)), default);
    }

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
