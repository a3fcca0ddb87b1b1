//! One seed, start to end: build the cluster, run the workload's clients
//! under the nemesis, heal, measure convergence, let the workload settle
//! and check; all on one single-threaded tokio runtime whose clock is
//! paused, so the seed alone decides the schedule.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::time::Duration;

use kv_replication::testkit::{ClusterSpec, Link, TestCluster, test_settings};
use kv_router::RouterSettings;
use kv_workload::{Report, WorkloadSettings};

use crate::faults::Faults;
use crate::nemesis::Nemesis;
use crate::store::SimStore;
use crate::trace::Trace;
use crate::world::World;
use crate::{Error, Result};

/// The most simulated time one seed may take: far beyond a healthy run
/// (a few seconds of faults, the 60 s settle deadline, the 30 s
/// convergence bound), so only a livelock reaches it.
const SIMULATED_LIMIT: Duration = Duration::from_secs(600);

/// What one seed runs.
#[derive(Clone, Debug)]
pub struct SimSettings {
    /// Nodes (3 to 7).
    pub nodes: usize,
    /// Client steps in all.
    pub ops: u64,
    /// Concurrent clients.
    pub clients: u32,
    /// Registers (few, so that writes contend).
    pub keys: u32,
    /// The fault kinds the nemesis may inject.
    pub faults: Faults,
    /// Print the trace (and the core's debug logs, when a subscriber is
    /// installed) as the seed runs.
    pub echo: bool,
}

impl Default for SimSettings {
    /// 5 nodes, 300 steps by 4 clients over 6 registers and 2 sets, every
    /// fault kind.
    fn default() -> Self {
        SimSettings {
            nodes: 5,
            ops: 300,
            clients: 4,
            keys: 6,
            faults: Faults::all(),
            echo: false,
        }
    }
}

/// The outcome of one seed.
#[derive(Debug)]
pub struct SeedOutcome {
    /// The seed.
    pub seed: u64,
    /// The checker's verdict, convergence included (`None` when the run
    /// panicked).
    pub report: Option<Report>,
    /// The panic message, when the run panicked (a bug, or an invariant
    /// the testkit checks).
    pub panic: Option<String>,
    /// The history, byte for byte.
    pub history: Vec<u8>,
    /// The trace lines.
    pub trace: Vec<String>,
}

impl SeedOutcome {
    /// Whether the seed failed: a panic, an anomaly, an unchecked key or
    /// replicas that did not converge.
    pub fn failed(&self) -> bool {
        self.report.as_ref().is_none_or(|r| r.exit_code() != 0)
    }
}

/// Runs `seed`.
///
/// # Errors
/// [`Error::Invalid`] for unusable settings; [`Error::Io`] when the
/// runtime or the scratch directory cannot be created.
pub fn run_seed(seed: u64, settings: &SimSettings) -> Result<SeedOutcome> {
    if !(3..=7).contains(&settings.nodes) {
        return Err(Error::Invalid(format!(
            "--nodes must be 3 to 7, not {}",
            settings.nodes
        )));
    }
    let dir = tempfile::tempdir()?;
    let history = dir.path().join("history.jsonl");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()?;
    // The trace's time zero is read from the runtime's paused clock.
    let trace = {
        let _clock = runtime.enter();
        Trace::new(settings.echo)
    };
    let run = catch_unwind(AssertUnwindSafe(|| {
        runtime.block_on(async {
            let limit = tokio::time::timeout(
                SIMULATED_LIMIT,
                simulate(seed, settings, &history, trace.clone()),
            );
            match limit.await {
                Ok(report) => report,
                Err(_) => panic!(
                    "the seed ran {} s of simulated time without finishing (a livelock)",
                    SIMULATED_LIMIT.as_secs()
                ),
            }
        })
    }));
    let (report, panic) = match run {
        Ok(report) => (Some(report?), None),
        Err(payload) => {
            let message = payload
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| payload.downcast_ref::<&str>().map(ToString::to_string))
                .unwrap_or_else(|| "a panic without a message".into());
            let _clock = runtime.enter();
            trace.note(format!("panic: {message}"));
            (None, Some(message))
        }
    };
    // Dropping the runtime drops every task still parked in it.
    drop(runtime);
    Ok(SeedOutcome {
        seed,
        report,
        panic,
        history: std::fs::read(&history).unwrap_or_default(),
        trace: trace.lines(),
    })
}

async fn simulate(
    seed: u64,
    settings: &SimSettings,
    history: &std::path::Path,
    trace: Trace,
) -> Result<Report> {
    let cluster = TestCluster::build(ClusterSpec {
        nodes: settings.nodes,
        zones: 3,
        settings: test_settings(),
        router: RouterSettings::default(),
        seed,
        journaled: true,
    })
    .await;
    // Every message takes 0.5 ms plus up to 2 ms of jitter by default.
    cluster.network.set_default_link(Link {
        delay: Duration::from_micros(500),
        jitter: Duration::from_millis(2),
        ..Link::default()
    });
    let ids = cluster.ids();
    for id in &ids {
        cluster.start_background(id);
    }
    trace.note(format!(
        "seed {seed}: {} nodes, {} steps, faults {}",
        ids.len(),
        settings.ops,
        settings.faults
    ));
    let world = World::new(cluster, seed, trace);
    let nemesis = Nemesis::new(world.clone(), settings.faults.clone(), ids, seed);
    let mut nemesis = tokio::spawn(nemesis.run());
    let converged = {
        let world = world.clone();
        tokio::spawn(async move {
            world.wait_phase(|p| p == crate::world::Phase::Healed).await;
            crate::converge::measure(world).await
        })
    };
    let mut workload = WorkloadSettings::new(
        Duration::from_secs(3600),
        settings.clients,
        settings.keys,
        seed,
    );
    workload.sets = 2;
    workload.settle = Duration::from_secs(60);
    workload.max_ops = Some(settings.ops);
    let store = Arc::new(SimStore::new(world.clone()));
    let workload = kv_workload::run(store, &workload, history);
    tokio::pin!(workload);
    // The nemesis ends once it healed everything (the workload's settle
    // phase waits for that); if it panicked, fail the seed with its panic
    // instead of waiting forever.
    let (mut report, nemesis) = tokio::select! {
        biased;
        report = &mut workload => (report?, Some(nemesis)),
        joined = &mut nemesis => {
            if let Err(e) = joined && e.is_panic() {
                std::panic::resume_unwind(e.into_panic());
            }
            (workload.await?, None)
        }
    };
    if let Some(nemesis) = nemesis
        && let Err(e) = nemesis.await
        && e.is_panic()
    {
        std::panic::resume_unwind(e.into_panic());
    }
    report.convergence = converged.await.ok();
    world
        .trace
        .note(format!("verdict: {}", report.summary_line()));
    for line in report.detail_lines() {
        world.trace.note(line);
    }
    Ok(report)
}
