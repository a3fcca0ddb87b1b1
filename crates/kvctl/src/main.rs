//! kvctl: the command-line client of the store.
//!
//! It reads and writes keys (`get`, `put`, `delete`) with causal contexts,
//! shows the cluster (`status`, `explain`, `decisions`, `get --node
//! --local`), switches the routing mode (`router mode`), runs the
//! workload that checks no acknowledged write is lost (`workload`, and
//! `check` for a saved history; both in `kv-workload`) and makes the
//! cluster's certificates (`certs init|add`) and rotates the cluster CA
//! (`certs rotate`). Inputs: the command line,
//! `KV_*` environment variables and `.cluster/kvctl.toml`; outputs: text or
//! JSON on standard output, one-line errors on standard error, and the exit
//! codes of [`exit`], which scripts rely on. Every network request goes
//! through `kv-client`; this binary holds no protocol logic of its own.

mod cli;
mod commands;
mod exit;
mod output;
mod progress;
mod router_set;
mod routing;
mod settings;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    let cli = cli::Cli::parse();
    let quorum = exit::quorum_advice(&cli.command);
    init_logging();
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            let e = anyhow::Error::new(e).context("cannot start the runtime");
            return exit::fail(&e, quorum);
        }
    };
    match runtime.block_on(commands::run(cli)) {
        Ok(outcome) => ExitCode::from(outcome.code()),
        Err(error) => exit::fail(&error, quorum),
    }
}

/// Logs to standard error, quiet unless `RUST_LOG` asks for more.
fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
}
