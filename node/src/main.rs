//! `kvnode`: one node of the store. It stores replicas (sled), coordinates
//! client requests with N/R/W quorums, gossips membership over its QUIC
//! endpoint, and routes each request by scoring the key's replicas.
//!
//! This binary joins the replication core (`kv-replication`, which joins
//! storage and router) with gossip, the QUIC transport and the front doors;
//! see ARCHITECTURE.md for the map. Usage:
//! `kvnode --config kvnode.toml` (see `node/kvnode.example.toml`); flags such
//! as `--id` or `--listen` override keys of the file (or replace it), and
//! `kvnode health --addr HOST:PORT --certs DIR --id NODE` checks a running
//! node (the container health check).

mod admin;
mod certs;
mod config;
mod cpu_quota;
mod front;
mod handler;
mod health;
mod logging;
mod membership;
mod metrics;
mod network;
mod node;
mod report;
mod resp;
mod translate;

/// mimalloc instead of glibc's malloc: a node allocates and frees many
/// small buffers per request (frames, objects, sled's copied tree nodes);
/// RESP SET/GET gained 21%/17% in an A/B/A/B run (docs/benchmarks.md).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Command line of `kvnode`.
#[derive(Debug, Parser)]
#[command(
    name = "kvnode",
    version,
    about = "A node of the Dynamo-style key-value store",
    args_conflicts_with_subcommands = true
)]
struct Cli {
    /// Something else than running a node.
    #[command(subcommand)]
    command: Option<Command>,
    /// Running a node.
    #[command(flatten)]
    run: RunArgs,
}

/// Subcommands.
#[derive(Debug, Subcommand)]
enum Command {
    /// Check that a running node answers a status request and lists itself
    /// (exit 0), or say why not (exit 1). For container health checks.
    Health(health::HealthArgs),
}

/// Flags of a running node: the config file, and keys that override it.
#[derive(Debug, clap::Args)]
struct RunArgs {
    /// Path of the node's TOML configuration (see node/kvnode.example.toml).
    /// May be omitted when --id, --listen, --zone, --host, --data-dir and
    /// --certs-dir are all given.
    #[arg(long, short, env = "KVNODE_CONFIG")]
    config: Option<PathBuf>,
    /// Node id (`id`), also the name of its certificate files.
    #[arg(long)]
    id: Option<String>,
    /// UDP address the QUIC endpoint binds (`listen`).
    #[arg(long)]
    listen: Option<SocketAddr>,
    /// Address peers reach this node at (`advertise`).
    #[arg(long)]
    advertise: Option<SocketAddr>,
    /// Address clients reach this node at (`client_advertise`).
    #[arg(long)]
    client_advertise: Option<SocketAddr>,
    /// Zone label (`zone`).
    #[arg(long)]
    zone: Option<String>,
    /// Host label (`host`).
    #[arg(long)]
    host: Option<String>,
    /// Seed nodes, `HOST:PORT,HOST:PORT,...` (`seeds`, the whole list).
    #[arg(long, value_delimiter = ',')]
    seeds: Option<Vec<String>>,
    /// Directory of the database (`data_dir`).
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// Directory of the certificates (`certs.dir`).
    #[arg(long)]
    certs_dir: Option<PathBuf>,
    /// Tokio worker threads, 0 = one per core (`worker_threads`).
    #[arg(long)]
    worker_threads: Option<usize>,
    /// Log format: `human` or `json` (`log.format`).
    #[arg(long)]
    log_format: Option<String>,
    /// Join a running cluster: start as JOINING, pull the partitions this
    /// node will own from their current holders, then become UP. Only used
    /// the first time a data directory starts (a restart resumes the status
    /// it had); without it a new node is UP at once (a new cluster).
    #[arg(long)]
    join: bool,
    /// Start on a data directory the node would otherwise refuse: one
    /// whose database sled reports damaged (moved aside to
    /// `DATA_DIR.damaged-UNIXSECS`, kept, and replaced by an empty one), or
    /// one holding data without a readable incarnation or identity record.
    /// The node takes a new incarnation (a new clock actor) and is refilled
    /// from its replicas by anti-entropy and hinted handoff. Never takes
    /// another node's or cluster's directory.
    #[arg(long)]
    rebuild: bool,
    /// Address RESP clients reach this node at, shown by `kvctl status`
    /// (`resp.advertise`).
    #[arg(long)]
    resp_advertise: Option<SocketAddr>,
    /// Address the admin endpoint is reached at (`admin.advertise`).
    #[arg(long)]
    admin_advertise: Option<SocketAddr>,
}

impl RunArgs {
    /// The flags that override config keys.
    fn overrides(&self) -> config::Overrides {
        config::Overrides {
            id: self.id.clone(),
            listen: self.listen,
            advertise: self.advertise,
            client_advertise: self.client_advertise,
            zone: self.zone.clone(),
            host: self.host.clone(),
            seeds: self.seeds.clone(),
            data_dir: self.data_dir.clone(),
            certs_dir: self.certs_dir.clone(),
            worker_threads: self.worker_threads,
            log_format: self.log_format.clone(),
            resp_advertise: self.resp_advertise,
            admin_advertise: self.admin_advertise,
        }
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if let Some(Command::Health(args)) = &cli.command {
        return health::main(args);
    }
    let overrides = cli.run.overrides();
    if cli.run.config.is_none() && overrides == config::Overrides::default() {
        eprintln!(
            "kvnode: give --config FILE (or --id, --listen, --zone, --host, --data-dir and --certs-dir); see --help"
        );
        return ExitCode::from(2);
    }
    let config = match config::NodeConfig::load(cli.run.config.as_deref(), &overrides) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("kvnode: {e:#}");
            return ExitCode::from(2);
        }
    };
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
    match runtime.block_on(node::run(config, cli.run.join, cli.run.rebuild)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!(error = format!("{e:#}"), "kvnode stopped");
            eprintln!("kvnode: {e:#}");
            ExitCode::FAILURE
        }
    }
}
