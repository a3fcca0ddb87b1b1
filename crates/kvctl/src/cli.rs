//! The command line: global flags, subcommands and their arguments (clap).
//!
//! Names, flags and defaults here are a contract: scripts and tests call
//! them. Bad flags exit with clap's usage code 2.

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};
use kv_types::NodeId;

/// kvctl: read and write keys, look at the cluster, make certificates.
///
/// Endpoints and certificates come from --endpoints/--certs (or KV_ENDPOINTS
/// and KV_CERTS), else from `.cluster/kvctl.toml` found by walking up from
/// the current directory, then from kvctl's own directory.
#[derive(Debug, Parser)]
#[command(name = "kvctl", version, about, long_about = None, after_help = crate::exit::HELP)]
pub struct Cli {
    /// Nodes to talk to, HOST:PORT[,HOST:PORT...].
    #[arg(
        long,
        global = true,
        env = "KV_ENDPOINTS",
        value_delimiter = ',',
        value_name = "HOST:PORT,..."
    )]
    pub endpoints: Vec<String>,
    /// Directory with ca.pem and the identity's certificate and key.
    #[arg(long, global = true, env = "KV_CERTS", value_name = "DIR")]
    pub certs: Option<PathBuf>,
    /// Certificate to present: `client` or `admin` (file stem in --certs).
    /// Default: `admin` for repair, drain, remove and router, `client`
    /// otherwise.
    #[arg(long, global = true, env = "KV_IDENTITY", value_name = "NAME")]
    pub identity: Option<String>,
    /// Print JSON instead of text.
    #[arg(long, global = true)]
    pub json: bool,
    /// Deadline of the whole request, failover included, in seconds.
    #[arg(long, global = true, default_value = "10", value_name = "SECS", value_parser = parse_timeout)]
    pub timeout: Duration,
    /// Longest wait for one node's handshake, in seconds (another node is
    /// tried in parallel long before: 150 ms, or three measured
    /// handshakes).
    #[arg(long, global = true, env = "KV_CONNECT_TIMEOUT", default_value = "2", value_name = "SECS", value_parser = parse_timeout)]
    pub connect_timeout: Duration,
    /// How kvctl picks the node for a key: `scoring`, `plain` (the key's
    /// replicas in ring order), `snitch`, `hwlb`, `c3` or `p2c`. Default:
    /// the cluster's mode.
    #[arg(
        long,
        global = true,
        env = "KV_ROUTER_MODE",
        value_name = "MODE",
        value_parser = ["plain", "snitch", "hwlb", "c3", "p2c", "scoring"]
    )]
    pub router_mode: Option<String>,
    /// One of kvctl's own router tunables as KEY=NUMBER (repeatable): a
    /// numeric field of the router's settings by its name, the same as the
    /// nodes' `[router]` keys (`hedge_budget=0`, `near_tie=0.1`, ...), a
    /// duration in milliseconds by its name with `_ms`, as the nodes' keys
    /// (`latency_window_ms=0`).
    /// kvctl routes each request to a coordinator and hedges reads with
    /// them; the nodes keep their own.
    #[arg(long, global = true, value_name = "KEY=NUMBER")]
    pub router_set: Vec<String>,
    /// Append kvctl's own routing decisions to FILE, one JSON object per
    /// line (every decision of a one-shot command; `bench` and
    /// `workload` sample them at `--router-set decision_log_rate`, 1 in
    /// 1,000 by default); read them with `kvctl decisions --client FILE`.
    #[arg(long, global = true, value_name = "FILE")]
    pub log_decisions: Option<PathBuf>,
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Read a key (quorum read), or one replica's versions with --node --local.
    Get(GetArgs),
    /// Write a value; pass --context from a read to supersede what it saw.
    Put(PutArgs),
    /// Delete a key; without --context, deletes exactly what a read sees now.
    Delete(DeleteArgs),
    /// Membership and ring as one node sees them (any node that answers,
    /// or the one given with --node).
    Status(StatusArgs),
    /// How a key is routed: hash, partition, replicas, every input,
    /// dimension, penalty and score of the router, the order chosen.
    Explain(ExplainArgs),
    /// The routing decisions a node logged (a sample, with their inputs:
    /// each replays exactly).
    Decisions(DecisionsArgs),
    /// The router: `kvctl router mode MODE [--node NODE]`.
    #[command(subcommand)]
    Router(RouterCommand),
    /// Run anti-entropy now on one node (or every node) and show progress
    /// (uses the admin certificate).
    Repair(RepairArgs),
    /// Drain (decommission) a node: it takes no new ownership, its data and
    /// hints move to the new owners, then it is LEFT and may be stopped
    /// (uses the admin certificate). --dry-run prints the plan only.
    #[command(alias = "decommission")]
    Drain(DrainArgs),
    /// Remove a node that is down for good from the ring: its ranges get new
    /// owners, which copy them from the other replicas (uses the admin
    /// certificate). A live node must be drained instead; one that has
    /// already LEFT (drained or removed) needs nothing: exit 0, saying so.
    Remove {
        /// The node to remove.
        node: NodeId,
    },
    /// Plan a membership change without making it.
    #[command(subcommand)]
    Plan(PlanCommand),
    /// Run a Jepsen-style workload, then check that no acknowledged write was lost.
    Workload(WorkloadArgs),
    /// Check a history written by `kvctl workload` again.
    Check(CheckArgs),
    /// Measure throughput and latency over QUIC: N clients, an operation
    /// mix, a key distribution (prints ops/s and p50/p99/p99.9).
    Bench(BenchArgs),
    /// Make the cluster CA and certificates.
    #[command(subcommand)]
    Certs(CertsCommand),
    /// Print a shell completion script.
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
    },
}

/// `kvctl drain`.
#[derive(Debug, Args)]
pub struct DrainArgs {
    /// The node to drain.
    pub node: NodeId,
    /// Print what would move, change nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Return once the drain started instead of following it to LEFT.
    #[arg(long)]
    pub no_wait: bool,
}

/// `kvctl plan`.
#[derive(Debug, Subcommand)]
pub enum PlanCommand {
    /// What a new node in ZONE would receive.
    Join {
        /// Zone of the new node.
        #[arg(long)]
        zone: String,
        /// Weight of the new node (1..=1000).
        #[arg(long, default_value = "1", value_parser = clap::value_parser!(u32).range(1..=1000))]
        weight: u32,
    },
}

/// `kvctl status`.
#[derive(Debug, Args)]
pub struct StatusArgs {
    /// Ask this node and no other: the command fails (exit 3) when it does
    /// not answer, so scripts can tell whether one node is up.
    #[arg(long, value_name = "NODE")]
    pub node: Option<NodeId>,
    /// List the nodes that have LEFT the ring too (drained or removed; a
    /// node's gossip keeps them for a day). Without it the table shows the
    /// members only and names the LEFT nodes on a line of their own;
    /// `--json` always lists every node, each with its status.
    #[arg(long)]
    pub all: bool,
}

/// `kvctl repair`.
#[derive(Debug, Args)]
pub struct RepairArgs {
    /// The node to repair; every node of the cluster when omitted.
    pub node: Option<NodeId>,
}

/// `kvctl get`.
#[derive(Debug, Args)]
pub struct GetArgs {
    /// The key.
    pub key: String,
    /// Replicas that must answer (overrides the cluster's R).
    #[arg(long, value_parser = clap::value_parser!(u8).range(1..))]
    pub r: Option<u8>,
    /// The node whose stored versions to show (with --local).
    #[arg(long, requires = "local", value_name = "NODE")]
    pub node: Option<NodeId>,
    /// Show what one replica stores, without a quorum (needs --node).
    #[arg(long, requires = "node", conflicts_with = "r")]
    pub local: bool,
}

/// `kvctl put`.
#[derive(Debug, Args)]
pub struct PutArgs {
    /// The key.
    pub key: String,
    /// The value; `-` reads it from standard input.
    pub value: OsString,
    /// Causal context printed by `kvctl get` (base64url).
    #[arg(long, value_name = "CTX")]
    pub context: Option<String>,
    /// Durable acks required (overrides the cluster's W).
    #[arg(long, value_parser = clap::value_parser!(u8).range(1..))]
    pub w: Option<u8>,
}

/// `kvctl delete`.
#[derive(Debug, Args)]
pub struct DeleteArgs {
    /// The key.
    pub key: String,
    /// Causal context printed by `kvctl get` (base64url); default: read first.
    #[arg(long, value_name = "CTX")]
    pub context: Option<String>,
    /// Replicas that must answer the read a delete without --context makes
    /// first (overrides the cluster's R).
    #[arg(long, conflicts_with = "context", value_parser = clap::value_parser!(u8).range(1..))]
    pub r: Option<u8>,
    /// Durable acks required (overrides the cluster's W).
    #[arg(long, value_parser = clap::value_parser!(u8).range(1..))]
    pub w: Option<u8>,
}

/// `kvctl explain`.
#[derive(Debug, Args)]
pub struct ExplainArgs {
    /// The key.
    pub key: String,
    /// Explain a read (`get`, the default) or a write (`put`).
    #[arg(long, default_value = "get", value_parser = ["get", "put"])]
    pub op: String,
}

/// `kvctl decisions`.
#[derive(Debug, Args)]
pub struct DecisionsArgs {
    /// Only the decisions of this key.
    #[arg(long)]
    pub key: Option<String>,
    /// Ask this node (default: any endpoint).
    #[arg(long, conflicts_with = "client")]
    pub node: Option<NodeId>,
    /// Read kvctl's own decisions from FILE (written with
    /// --log-decisions) instead of a node's.
    #[arg(long, value_name = "FILE")]
    pub client: Option<PathBuf>,
    /// At most this many, the newest.
    #[arg(long, default_value = "20", value_name = "N", value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub last: u32,
}

/// `kvctl router`.
#[derive(Debug, Subcommand)]
pub enum RouterCommand {
    /// Switch the routing mode (plain, snitch, hwlb, c3, p2c, scoring) of
    /// every node, or of --node only; each router forgets what it learned
    /// (uses the admin certificate).
    Mode {
        /// The mode.
        #[arg(value_parser = ["plain", "snitch", "hwlb", "c3", "p2c", "scoring"])]
        mode: String,
        /// Only this node.
        #[arg(long)]
        node: Option<NodeId>,
    },
}

/// `kvctl workload`.
#[derive(Debug, Args)]
pub struct WorkloadArgs {
    /// How long clients issue operations, in seconds.
    #[arg(long, default_value = "60", value_name = "SECS", value_parser = clap::value_parser!(u64).range(1..=86_400))]
    pub duration: u64,
    /// Concurrent clients.
    #[arg(long, default_value = "8", value_name = "N", value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub clients: u32,
    /// Registers (`reg-0` ...); a few grow-only sets come on top.
    #[arg(long, default_value = "64", value_name = "N", value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub keys: u32,
    /// Seed of the clients' choices.
    #[arg(long, default_value = "1", value_name = "N")]
    pub seed: u64,
    /// The history file to write (JSON lines).
    #[arg(long, value_name = "FILE")]
    pub history: PathBuf,
    /// Longest wait after the run for every node to be alive and the final
    /// reads to succeed, in seconds.
    #[arg(long, default_value = "120", value_name = "SECS", value_parser = clap::value_parser!(u64).range(1..=3600))]
    pub settle: u64,
    /// A file of fault moments (`UNIX_MS DESCRIPTION` per line, as
    /// scripts/chaos writes while the workload runs), read after the run:
    /// the operations in flight at a moment are reported apart from the
    /// others (the summary line gains `in_flight_at_faults=...
    /// others_p999_ms=...`).
    #[arg(long, value_name = "FILE")]
    pub faults: Option<PathBuf>,
}

/// `kvctl bench`.
#[derive(Clone, Debug, Args)]
pub struct BenchArgs {
    /// Concurrent clients (closed loop: each waits for its answer).
    #[arg(long, default_value = "50", value_name = "N", value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub clients: u32,
    /// How long to run, in seconds.
    #[arg(long, default_value = "10", value_name = "SECS", value_parser = clap::value_parser!(u64).range(1..=86_400))]
    pub duration: u64,
    /// Operation mix, OP:WEIGHT,... with OP get or put.
    #[arg(long, default_value = "get:90,put:10", value_name = "MIX")]
    pub mix: String,
    /// Distinct keys (`PREFIX0` .. `PREFIX<N-1>`).
    #[arg(long, default_value = "1000000", value_name = "N", value_parser = clap::value_parser!(u64).range(1..=1_000_000_000))]
    pub keys: u64,
    /// How keys are picked.
    #[arg(long, value_enum, default_value = "uniform")]
    pub distribution: Distribution,
    /// Exponent of the Zipf distribution (larger: hotter hot keys).
    #[arg(long, default_value = "0.99", value_name = "S")]
    pub zipf_s: f64,
    /// Bytes of each written value.
    #[arg(long, default_value = "100", value_name = "BYTES", value_parser = clap::value_parser!(u32).range(0..=1_048_576))]
    pub value_size: u32,
    /// Read quorum (overrides the cluster's R).
    #[arg(long, value_parser = clap::value_parser!(u8).range(1..))]
    pub r: Option<u8>,
    /// Write quorum (overrides the cluster's W).
    #[arg(long, value_parser = clap::value_parser!(u8).range(1..))]
    pub w: Option<u8>,
    /// Key prefix.
    #[arg(long, default_value = "bench:", value_name = "TEXT")]
    pub prefix: String,
    /// Zero-pads each key's number to this many digits (`--prefix key:
    /// --key-width 12` names keys as `redis-benchmark -r` does:
    /// `key:000000000042`); 0: no padding.
    #[arg(long, default_value = "0", value_name = "DIGITS", value_parser = clap::value_parser!(u32).range(0..=40))]
    pub key_width: u32,
    /// Seed of the clients' choices.
    #[arg(long, default_value = "1", value_name = "N")]
    pub seed: u64,
    /// Open loop: send OPS requests per second on a fixed schedule,
    /// whatever the answers, and measure each latency from its intended
    /// send time (`--clients` is then unused).
    #[arg(long, value_name = "OPS", value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub rate: Option<u32>,
    /// Open loop: most requests in flight at once (the schedule waits
    /// beyond it, which shows as send lag).
    #[arg(long, default_value = "10000", value_name = "N", value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub max_in_flight: u32,
    /// Seconds of load before measuring.
    #[arg(long, default_value = "0", value_name = "SECS", value_parser = clap::value_parser!(u64).range(0..=3600))]
    pub warmup: u64,
    /// Stops after N requests (or at `--duration`, whichever comes first).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub requests: Option<u64>,
    /// Adds a time series of latency per SECS seconds (0: none).
    #[arg(long, default_value = "0", value_name = "SECS", value_parser = clap::value_parser!(u64).range(0..=3600))]
    pub interval: u64,
    /// Writes every measured request to FILE, one line each: `UNIX_US
    /// LATENCY_US OP KEY REPLICAS OUTCOME` (the intended send time in
    /// microseconds since the Unix epoch, the key's preference list; at
    /// most 5,000,000 requests), to line latencies up with outside events
    /// such as a fault script's.
    #[arg(long, value_name = "FILE")]
    pub trace: Option<std::path::PathBuf>,
}

/// Key distributions of `kvctl bench`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Distribution {
    /// Every key equally likely.
    Uniform,
    /// Zipf: a few hot keys, a long tail (see --zipf-s).
    Zipf,
    /// Every key in turn from 0 (with `--mix put:100 --requests N`, loads
    /// N keys).
    Sequential,
}

/// `kvctl check`.
#[derive(Debug, Args)]
pub struct CheckArgs {
    /// The history file to check.
    #[arg(long, value_name = "FILE")]
    pub history: PathBuf,
}

/// `kvctl certs ...`.
#[derive(Debug, Subcommand)]
pub enum CertsCommand {
    /// Create a cluster CA and certificates for the nodes, `client` and `admin`.
    Init {
        /// Directory to write (created if missing; an existing CA is never replaced).
        #[arg(long, value_name = "DIR")]
        out: PathBuf,
        /// Node ids, comma-separated.
        #[arg(long, value_delimiter = ',', required = true, value_name = "NODE,...")]
        nodes: Vec<NodeId>,
    },
    /// Sign a certificate for a new node with the CA in --out.
    Add {
        /// The new node's id.
        node: NodeId,
        /// Directory holding ca.pem and ca.key.
        #[arg(long, value_name = "DIR")]
        out: PathBuf,
    },
    /// Rotate the cluster CA without downtime, one step at a time; reload
    /// every node (SIGHUP, `scripts/cluster reload`) and long-running client
    /// after each step before the next.
    ///
    /// begin (the default): a new CA and certificates for every identity of
    /// DIR, staged in DIR/next/, and ca.pem trusting the old and the new CA.
    /// switch: the new certificates in place (the old ones kept in
    /// DIR/previous/). finish: the new CA alone in ca.pem and ca.key.
    /// abort: undo begin (before switch). status: where DIR stands.
    Rotate {
        /// The step to run.
        #[arg(value_enum, default_value_t = RotateStep::Begin)]
        step: RotateStep,
        /// The certificate directory (ca.pem, ca.key and the certificates
        /// `certs init` and `certs add` wrote).
        #[arg(long, value_name = "DIR")]
        out: PathBuf,
    },
}

/// A step of `kvctl certs rotate`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum RotateStep {
    /// Make the new CA and certificates; trust both CAs.
    Begin,
    /// Present the new certificates.
    Switch,
    /// Trust the new CA alone.
    Finish,
    /// Undo begin (before switch).
    Abort,
    /// Say where the directory stands, change nothing.
    Status,
}

/// Parses `--timeout`: a positive number of seconds, fractions allowed.
fn parse_timeout(text: &str) -> Result<Duration, String> {
    let secs: f64 = text
        .parse()
        .map_err(|_| format!("{text:?} is not a number of seconds"))?;
    if !(secs > 0.0 && secs <= 3600.0) {
        return Err("must be more than 0 and at most 3600 seconds".into());
    }
    Ok(Duration::from_secs_f64(secs))
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::*;

    #[test]
    fn help_lists_every_exit_code() {
        let help = Cli::command().render_help().to_string();
        for code in [
            "0 done",
            "1 not found",
            "2 usage",
            "3 unavailable",
            "4 indeterminate",
            "5 refused",
            "6 `workload`",
        ] {
            assert!(help.contains(code), "no {code:?} in:\n{help}");
        }
    }

    fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
        Cli::try_parse_from(std::iter::once("kvctl").chain(args.iter().copied()))
    }

    #[test]
    fn the_command_line_is_well_formed() {
        Cli::command().debug_assert();
    }

    #[test]
    fn global_flags_go_before_or_after_the_subcommand() {
        let cli = parse(&[
            "--endpoints",
            "127.0.0.1:7101,127.0.0.1:7102",
            "get",
            "k",
            "--json",
            "--timeout",
            "2.5",
            "--certs",
            "/c",
        ])
        .unwrap();
        assert_eq!(cli.endpoints, ["127.0.0.1:7101", "127.0.0.1:7102"]);
        assert!(cli.json);
        assert_eq!(cli.timeout, Duration::from_millis(2500));
        assert_eq!(cli.certs, Some(PathBuf::from("/c")));
        assert_eq!(cli.identity, None);
        assert!(
            matches!(cli.command, Command::Get(GetArgs { ref key, r: None, .. }) if key == "k")
        );
    }

    #[test]
    fn put_takes_a_context_and_a_quorum() {
        let cli = parse(&["put", "k", "v", "--context", "AQI", "--w", "3"]).unwrap();
        let Command::Put(put) = cli.command else {
            panic!("not a put")
        };
        assert_eq!(put.value, "v");
        assert_eq!(put.context.as_deref(), Some("AQI"));
        assert_eq!(put.w, Some(3));
        assert_eq!(cli.timeout, Duration::from_secs(10));
    }

    #[test]
    fn local_reads_need_a_node() {
        let cli = parse(&["get", "--node", "node2", "--local", "k"]).unwrap();
        let Command::Get(get) = cli.command else {
            panic!("not a get")
        };
        assert_eq!(get.node.unwrap().as_str(), "node2");
        assert!(get.local);
        assert!(parse(&["get", "--local", "k"]).is_err());
        assert!(parse(&["get", "--node", "node2", "k"]).is_err());
        assert!(parse(&["get", "--node", "Bad_Id", "--local", "k"]).is_err());
    }

    #[test]
    fn bad_values_are_usage_errors() {
        for args in [
            &["get", "k", "--r", "0"][..],
            &["put", "k", "v", "--w", "256"],
            &["get", "k", "--timeout", "0"],
            &["get", "k", "--timeout", "soon"],
            &["put", "k"],
            &["frobnicate"],
            &["certs", "init", "--out", "/tmp/x"],
        ] {
            let e = parse(args).unwrap_err();
            assert_eq!(e.exit_code(), 2, "{args:?}");
        }
    }

    #[test]
    fn workload_and_check_take_their_flags() {
        let cli = parse(&[
            "workload",
            "--duration",
            "20",
            "--clients",
            "8",
            "--keys",
            "50",
            "--seed",
            "7",
            "--history",
            "h.jsonl",
        ])
        .unwrap();
        let Command::Workload(w) = cli.command else {
            panic!("not a workload")
        };
        assert_eq!(
            (w.duration, w.clients, w.keys, w.seed, w.settle),
            (20, 8, 50, 7, 120)
        );
        assert_eq!(w.history, PathBuf::from("h.jsonl"));
        let cli = parse(&["check", "--history", "h.jsonl"]).unwrap();
        assert!(matches!(cli.command, Command::Check(_)));
        for bad in [
            &["workload", "--duration", "20"][..],
            &["workload", "--history", "h", "--clients", "0"],
            &["check"],
        ] {
            assert_eq!(parse(bad).unwrap_err().exit_code(), 2, "{bad:?}");
        }
    }

    #[test]
    fn bench_takes_its_flags() {
        let cli = parse(&[
            "bench",
            "--clients",
            "8",
            "--duration",
            "3",
            "--mix",
            "get:50,put:50",
            "--distribution",
            "zipf",
            "--value-size",
            "10",
            "--r",
            "1",
        ])
        .unwrap();
        let Command::Bench(b) = cli.command else {
            panic!("not bench")
        };
        assert_eq!(
            (b.clients, b.duration, b.value_size, b.r),
            (8, 3, 10, Some(1))
        );
        assert_eq!(b.distribution, Distribution::Zipf);
        assert_eq!(b.mix, "get:50,put:50");
        assert_eq!(
            parse(&["bench", "--clients", "0"]).unwrap_err().exit_code(),
            2
        );
    }

    #[test]
    fn certs_commands_parse() {
        let cli = parse(&["certs", "init", "--out", "d", "--nodes", "node1,node2"]).unwrap();
        let Command::Certs(CertsCommand::Init { out, nodes }) = cli.command else {
            panic!("not certs init")
        };
        assert_eq!(out, PathBuf::from("d"));
        assert_eq!(nodes.len(), 2);
        let cli = parse(&["certs", "rotate", "--out", "d"]).unwrap();
        let Command::Certs(CertsCommand::Rotate { step, out }) = cli.command else {
            panic!("not certs rotate")
        };
        assert_eq!((step, out), (RotateStep::Begin, PathBuf::from("d")));
        let cli = parse(&["certs", "rotate", "finish", "--out", "d"]).unwrap();
        assert!(matches!(
            cli.command,
            Command::Certs(CertsCommand::Rotate {
                step: RotateStep::Finish,
                ..
            })
        ));
        assert!(parse(&["certs", "rotate", "later", "--out", "d"]).is_err());
        assert!(parse(&["certs", "rotate"]).is_err());
        let cli = parse(&["certs", "add", "node6", "--out", "d"]).unwrap();
        assert!(matches!(
            cli.command,
            Command::Certs(CertsCommand::Add { .. })
        ));
    }
}
