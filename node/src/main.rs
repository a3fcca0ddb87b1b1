//! `kvnode`: one node of the store. It stores replicas (sled), coordinates
//! client requests with N/R/W quorums, gossips membership over its QUIC
//! endpoint, and routes each request by scoring the key's replicas.
//!
//! This binary is the only crate that joins storage, router, gossip and
//! transport; see ARCHITECTURE.md for the map. Usage:
//! `kvnode --config kvnode.toml` (see `node/kvnode.example.toml`).

mod cluster;
mod config;
mod coordinator;
mod handler;
mod logging;
mod node;
mod peers;
mod replica;
mod report;
mod scoring;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;

/// Command line of `kvnode`.
#[derive(Debug, Parser)]
#[command(
    name = "kvnode",
    version,
    about = "A node of the Dynamo-style key-value store"
)]
struct Cli {
    /// Path of the node's TOML configuration (see node/kvnode.example.toml).
    #[arg(long, short, env = "KVNODE_CONFIG")]
    config: PathBuf,
    /// Log format override: `human` or `json`.
    #[arg(long)]
    log_format: Option<String>,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let mut config = match config::NodeConfig::load(&cli.config) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("kvnode: {e:#}");
            return ExitCode::from(2);
        }
    };
    if let Some(format) = cli.log_format {
        config.log.format = format;
    }
    if let Err(e) = config.validate() {
        eprintln!("kvnode: {e:#}");
        return ExitCode::from(2);
    }
    logging::init(&config.log);
    let mut runtime = tokio::runtime::Builder::new_multi_thread();
    runtime.enable_all().thread_name("kvnode");
    if config.worker_threads > 0 {
        runtime.worker_threads(config.worker_threads);
    }
    let runtime = match runtime.build() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("kvnode: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(node::run(config)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!(error = format!("{e:#}"), "kvnode stopped");
            eprintln!("kvnode: {e:#}");
            ExitCode::FAILURE
        }
    }
}
