//! `kv-sim`: runs seeds of the deterministic simulation and prints one
//! summary line; `scripts/simulate` calls it. A failing seed is printed
//! with the command that replays it with its trace.

use std::io::Write;
use std::time::Instant;

use anyhow::{Context, Result};
use clap::Parser;
use kv_sim::{Faults, SeedOutcome, SimSettings, run_seed};
use kv_workload::AnomalyKind;

/// Deterministic simulation of the whole cluster.
#[derive(Parser, Debug)]
#[command(name = "kv-sim")]
struct Args {
    /// How many seeds to run.
    #[arg(long, default_value_t = 100)]
    seeds: u64,
    /// The first seed.
    #[arg(long, default_value_t = 0)]
    from: u64,
    /// Nodes per cluster (3 to 7).
    #[arg(long, default_value_t = 5)]
    nodes: usize,
    /// Client steps per seed.
    #[arg(long, default_value_t = 300)]
    ops: u64,
    /// Fault kinds: all, none, or a list (crash,wipe,pause,partition,link,clock,storage,membership).
    #[arg(long, default_value = "all")]
    faults: String,
    /// Seeds run in parallel (one single-threaded runtime each).
    #[arg(long, default_value_t = 1)]
    jobs: usize,
    /// Replay: print the trace (and the core's logs at RUST_LOG, default
    /// debug) of each seed as it runs.
    #[arg(long)]
    trace: bool,
}

#[derive(Default)]
struct Totals {
    seeds: u64,
    failed: Vec<u64>,
    ops: u64,
    lost: usize,
    unexpected: usize,
    duplicated: usize,
    resurrected: usize,
    max_converge_ms: f64,
}

impl Totals {
    fn add(&mut self, outcome: &SeedOutcome) {
        self.seeds += 1;
        if outcome.failed() {
            self.failed.push(outcome.seed);
        }
        if let Some(r) = &outcome.report {
            self.ops += r.stats.ops as u64;
            self.lost += r.count(AnomalyKind::Lost);
            self.unexpected += r.count(AnomalyKind::Unexpected);
            self.duplicated += r.count(AnomalyKind::Duplicated);
            self.resurrected += r.count(AnomalyKind::Resurrected);
            if let Some(c) = &r.convergence {
                self.max_converge_ms = self.max_converge_ms.max(c.max_ms);
            }
        }
    }
}

fn main() -> Result<()> {
    let args = Args::parse();
    let faults: Faults = args.faults.parse().context("--faults")?;
    if args.trace {
        let filter = tracing_subscriber::EnvFilter::try_from_default_env()
            .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("kv_replication=debug"));
        tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
            .without_time()
            .with_writer(std::io::stderr)
            .init();
    }
    let settings = SimSettings {
        nodes: args.nodes,
        ops: args.ops,
        faults,
        echo: args.trace,
        ..SimSettings::default()
    };
    // A panic inside a seed fails that seed (its report shows it): one
    // line here instead of the default hook's backtrace.
    std::panic::set_hook(Box::new(|info| {
        eprintln!("  seed panicked: {info}");
    }));
    let started = Instant::now();
    let seeds: Vec<u64> = (args.from..args.from.saturating_add(args.seeds)).collect();
    let jobs = args.jobs.max(1);
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::scope(|scope| -> Result<()> {
        for worker in 0..jobs {
            let (tx, seeds, settings) = (tx.clone(), &seeds, &settings);
            scope.spawn(move || {
                for seed in seeds.iter().skip(worker).step_by(jobs) {
                    let outcome = run_seed(*seed, settings);
                    if tx.send((*seed, outcome)).is_err() {
                        return;
                    }
                }
            });
        }
        drop(tx);
        let mut totals = Totals::default();
        for (seed, outcome) in rx {
            let outcome = outcome.with_context(|| format!("seed {seed}"))?;
            totals.add(&outcome);
            if outcome.failed() {
                report_failure(&outcome, &args);
            }
        }
        let elapsed = started.elapsed().as_secs_f64();
        totals.failed.sort_unstable();
        println!(
            "seeds={} failed={} ops={} lost={} unexpected={} duplicated={} resurrected={} \
             max_converge_ms={:.0} seeds_per_s={:.2}",
            totals.seeds,
            totals.failed.len(),
            totals.ops,
            totals.lost,
            totals.unexpected,
            totals.duplicated,
            totals.resurrected,
            totals.max_converge_ms,
            totals.seeds as f64 / elapsed.max(1e-9),
        );
        std::io::stdout().flush().ok();
        if !totals.failed.is_empty() {
            let list: Vec<String> = totals.failed.iter().map(ToString::to_string).collect();
            eprintln!("failed seeds: {}", list.join(" "));
            std::process::exit(1);
        }
        Ok(())
    })
}

fn report_failure(outcome: &SeedOutcome, args: &Args) {
    let mut err = std::io::stderr().lock();
    let _ = writeln!(err, "FAILED seed {}", outcome.seed);
    match (&outcome.report, &outcome.panic) {
        (_, Some(panic)) => {
            let _ = writeln!(err, "  panic: {panic}");
        }
        (Some(report), None) => {
            let _ = writeln!(err, "  {}", report.summary_line());
            for line in report.detail_lines().iter().take(20) {
                let _ = writeln!(err, "  {line}");
            }
        }
        (None, None) => {}
    }
    let _ = writeln!(
        err,
        "  replay: scripts/simulate --seeds 1 --from {} --nodes {} --ops {} --faults {} --trace",
        outcome.seed, args.nodes, args.ops, args.faults
    );
}
