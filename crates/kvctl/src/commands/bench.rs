//! `kvctl bench`: a load generator over QUIC, through the client library,
//! closed loop (throughput) or open loop (latency, `--rate`).
//!
//! Closed loop, `--clients N` tasks share one [`Client`] (one QUIC
//! connection per node; the client routes each request to a replica of its
//! key). Each task loops until `--duration`: pick an operation by `--mix`,
//! a key by `--distribution` over `--keys` keys, send, wait, record the
//! latency. Latency percentiles are of successful operations; failures are
//! counted by kind and printed with an example message.
//!
//! Open loop (`--rate OPS`), requests leave on a fixed schedule whatever
//! the answers (at most `--max-in-flight` at a time), and each latency is
//! measured from the request's intended send time, so a stall delays every
//! request scheduled during it (no coordinated omission: Tene, "How NOT to
//! Measure Latency", 2015). A request unanswered at its deadline
//! (`--timeout`) counts as a `timeout` failure at that latency, and every
//! failure counts in the percentiles as well as by kind. The run's send
//! lag (actual minus intended send time) is reported: when it is large, the
//! generator itself was late and the figures are not the cluster's.
//!
//! Keys are `PREFIX<index>`; values `--value-size` random bytes. Puts carry
//! the causal context of the last put of the same key this run saw
//! (remembered for up to [`MAX_CONTEXTS`] keys), so that repeated puts of a
//! hot key supersede each other instead of piling up siblings; the first
//! put of a key is blind. `--warmup` runs the load before measuring;
//! `--interval` adds a time series, `--trace` a line per request; the
//! nodes' hedges and cache hit ratio over the run come from their admin
//! endpoints (`/metrics`).

mod keys;
mod scrape;
mod series;
mod stats;
mod trace;

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use anyhow::{Result, bail};
use kv_client::Client;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::json;
use tokio::time::Instant;

use tokio::sync::Semaphore;

use self::keys::{KeyDist, Zipf};
use self::series::Recorder;
use self::stats::{OpStats, per_second};
use self::trace::Trace;
use crate::cli::{BenchArgs, Distribution};
use crate::exit::Outcome;
use crate::output;
use crate::progress::Progress;

/// Keys whose last put context is remembered; the map is emptied when full.
const MAX_CONTEXTS: usize = 100_000;

/// The operations a mix may name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BenchOp {
    /// Quorum read.
    Get,
    /// Quorum write.
    Put,
}

/// Parses `--mix`: `OP:WEIGHT,...` with OP `get` or `put`, e.g.
/// `get:90,put:10`. Returns the cumulative weights.
///
/// # Errors
/// A malformed entry, an unknown operation, or weights summing to 0.
pub fn parse_mix(text: &str) -> Result<Vec<(BenchOp, u32)>, String> {
    let mut out = Vec::new();
    let mut total = 0u32;
    for entry in text.split(',').filter(|e| !e.is_empty()) {
        let (op, weight) = entry
            .split_once(':')
            .ok_or_else(|| format!("{entry:?} is not OP:WEIGHT (e.g. get:90)"))?;
        let op = match op {
            "get" => BenchOp::Get,
            "put" => BenchOp::Put,
            other => return Err(format!("unknown operation {other:?}: use get or put")),
        };
        let weight: u32 = weight
            .parse()
            .map_err(|_| format!("weight {weight:?} is not a whole number"))?;
        total = total.saturating_add(weight);
        out.push((op, total));
    }
    if total == 0 {
        return Err("the weights add up to 0: give e.g. get:90,put:10".into());
    }
    Ok(out)
}

/// What every task shares.
struct Shared {
    client: Arc<Client>,
    args: BenchArgs,
    mix: Vec<(BenchOp, u32)>,
    keys: KeyDist,
    /// Last put context per key index.
    contexts: Mutex<HashMap<u64, Vec<u8>>>,
    /// Operations finished so far (for the progress bar).
    done: AtomicU64,
    /// Operations started so far (for `--requests`).
    issued: AtomicU64,
    /// A request's deadline: the client's timeout (a request still
    /// unanswered then counts as timed out, at this latency).
    timeout: Duration,
    /// `--trace`: every measured request.
    trace: Option<Mutex<Trace>>,
}

/// When a run measures: `warmup` after `started`, for `duration`.
#[derive(Clone, Copy, Debug)]
struct Window {
    started: Instant,
    measure_from: Instant,
    until: Instant,
}

/// Runs the benchmark and prints its figures. `timeout` is the client's
/// request deadline (`--timeout`).
pub async fn run(
    client: Arc<Client>,
    args: &BenchArgs,
    timeout: Duration,
    json: bool,
) -> Result<Outcome> {
    let keys = match args.distribution {
        Distribution::Uniform => KeyDist::Uniform { n: args.keys },
        Distribution::Sequential => KeyDist::Sequential {
            n: args.keys,
            next: Arc::default(),
        },
        Distribution::Zipf => match Zipf::new(args.keys, args.zipf_s) {
            Some(z) => KeyDist::Zipf(z),
            None => bail!("--zipf-s must be more than 0 (e.g. 0.99)"),
        },
    };
    let mix = match parse_mix(&args.mix) {
        Ok(mix) => mix,
        Err(e) => bail!("--mix {}: {e}", args.mix),
    };
    let shared = Arc::new(Shared {
        client,
        mix,
        args: args.clone(),
        keys,
        contexts: Mutex::new(HashMap::new()),
        done: AtomicU64::new(0),
        issued: AtomicU64::new(0),
        timeout,
        trace: args.trace.as_ref().map(|_| Mutex::new(Trace::new())),
    });
    let load = match args.rate {
        Some(rate) => format!(
            "open loop at {rate} ops/s (at most {} in flight)",
            args.max_in_flight
        ),
        None => format!("{} clients", args.clients),
    };
    eprintln!(
        "kvctl bench: {load} for {} s{}, mix {}, {} keys ({:?}), {}-byte values, R={} W={}",
        args.duration,
        if args.warmup > 0 {
            format!(" after {} s of warm-up", args.warmup)
        } else {
            String::new()
        },
        args.mix,
        args.keys,
        args.distribution,
        args.value_size,
        args.r.map_or_else(|| "cluster".into(), |r| r.to_string()),
        args.w.map_or_else(|| "cluster".into(), |w| w.to_string()),
    );
    let targets = admin_targets(&shared.client).await;
    let before = scrape::scrape(&targets).await;

    let started = Instant::now();
    let measure_from = started + Duration::from_secs(args.warmup);
    let window = Window {
        started,
        measure_from,
        until: measure_from + Duration::from_secs(args.duration),
    };
    let total = args.warmup + args.duration;
    let progress = Arc::new(Mutex::new(Progress::new(
        json,
        "{elapsed_precise} [{bar:40}] {pos}/{len} s  {msg}",
        "",
        "s",
        total,
        None,
    )));
    let ticker = {
        let (shared, progress) = (shared.clone(), progress.clone());
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_millis(250));
            loop {
                tick.tick().await;
                let elapsed = started.elapsed();
                let done = shared.done.load(Ordering::Relaxed);
                progress.lock().unwrap_or_else(|p| p.into_inner()).update(
                    elapsed.as_secs().min(total),
                    total,
                    "",
                    &format!("{done} ops, {:.0} ops/s", per_second(done, elapsed)),
                );
            }
        })
    };
    let (recorder, lag, offered) = match args.rate {
        Some(rate) => {
            let (recorder, lag, offered) = open_loop(shared.clone(), rate, window).await;
            (recorder, Some(lag), Some(offered))
        }
        None => (closed_loop(shared.clone(), window).await?, None, None),
    };
    ticker.abort();
    progress
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .finish_and_clear();
    let after = scrape::scrape(&targets).await;
    let all = recorder.all();
    if all.ok_count() == 0 && all.error_count() > 0 {
        for line in all.error_lines("all") {
            eprintln!("kvctl: {line}");
        }
        bail!("every operation failed; check that the cluster is up (`kvctl status`)");
    }
    let routing = Routing {
        mode: shared.client.routing_mode().as_str(),
        coordinated: shared.client.coordinated(),
        hedges: shared.client.hedges(),
    };
    let report = Report {
        elapsed: Duration::from_secs(args.duration),
        recorder: &recorder,
        all: &all,
        offered,
        lag: lag.as_ref(),
        nodes: scrape::run_delta(&before, &after),
        routing: &routing,
    };
    print(args, json, &report)?;
    // After the figures: a trace file that cannot be written fails the
    // command without losing what the run measured.
    if let (Some(path), Some(trace)) = (&args.trace, &shared.trace) {
        trace
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .write(path)?;
    }
    Ok(Outcome::Done)
}

/// The admin endpoints of the cluster's nodes, from `status` (none when
/// it fails: the run's node counters are then unknown).
async fn admin_targets(client: &Client) -> Vec<String> {
    match client.status().await {
        Ok(status) => status
            .nodes
            .iter()
            .filter(|n| n.alive)
            .filter_map(|n| scrape::admin_target(&n.admin, &n.addr))
            .collect(),
        Err(_) => Vec::new(),
    }
}

/// `--clients` closed-loop workers until the window ends.
async fn closed_loop(shared: Arc<Shared>, window: Window) -> Result<Recorder> {
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..shared.args.clients {
        let seed = shared.args.seed.wrapping_add(u64::from(i));
        tasks.spawn(worker(shared.clone(), seed, window));
    }
    let mut recorder = Recorder::new(false, interval(&shared.args));
    while let Some(result) = tasks.join_next().await {
        recorder.merge(&result?);
    }
    Ok(recorder)
}

/// The series interval of `args` (zero: none).
fn interval(args: &BenchArgs) -> Duration {
    Duration::from_secs(args.interval)
}

/// One closed-loop client until the window ends: its figures.
async fn worker(shared: Arc<Shared>, seed: u64, window: Window) -> Recorder {
    let mut rng = StdRng::seed_from_u64(seed);
    let value = value(&shared.args, &mut rng);
    let mut recorder = Recorder::new(false, interval(&shared.args));
    while Instant::now() < window.until && shared.issue() {
        let (op, index) = shared.pick(&mut rng);
        let start = Instant::now();
        let outcome = shared.request(op, index, &value).await;
        if start >= window.measure_from {
            let latency = start.elapsed();
            shared.traced(start, latency, op, index, outcome.is_ok());
            recorder.record(op, start - window.measure_from, latency, outcome);
        }
        shared.done.fetch_add(1, Ordering::Relaxed);
    }
    recorder
}

/// Open loop: requests on a fixed schedule of `rate` per second from the
/// window's start, whatever the answers, at most `--max-in-flight` at a
/// time. Each latency counts from the request's intended send time; a
/// request unanswered at its deadline counts as a `timeout` failure at
/// that latency. Returns the figures, the send lag (actual minus intended
/// send time) and the requests offered while measuring.
async fn open_loop(shared: Arc<Shared>, rate: u32, window: Window) -> (Recorder, OpStats, u64) {
    let mut rng = StdRng::seed_from_u64(shared.args.seed);
    let value: Arc<[u8]> = value(&shared.args, &mut rng).into();
    let recorder = Arc::new(Mutex::new(Recorder::new(true, interval(&shared.args))));
    let permits = Arc::new(Semaphore::new(shared.args.max_in_flight as usize));
    let mut lag = OpStats::default();
    let mut offered = 0u64;
    let mut tasks = tokio::task::JoinSet::new();
    let schedule = Schedule::new(rate, &window);
    let (mut ticks, _thread) = pacer(schedule);
    while let Some(intended) = ticks.recv().await {
        if !shared.issue() {
            break;
        }
        let Ok(permit) = permits.clone().acquire_owned().await else {
            break;
        };
        let measured = intended >= window.measure_from;
        if measured {
            lag.ok(Instant::now().saturating_duration_since(intended));
            offered += 1;
        }
        let (op, index) = shared.pick(&mut rng);
        let (shared, recorder, value) = (shared.clone(), recorder.clone(), value.clone());
        tasks.spawn(async move {
            let deadline = intended + shared.timeout;
            let outcome =
                match tokio::time::timeout_at(deadline, shared.request(op, index, &value)).await {
                    Ok(outcome) => outcome,
                    Err(_) => Err(format!("timeout: no answer within {:?}", shared.timeout)),
                };
            let latency = Instant::now().saturating_duration_since(intended);
            if measured {
                shared.traced(intended, latency, op, index, outcome.is_ok());
                recorder.lock().unwrap_or_else(|p| p.into_inner()).record(
                    op,
                    intended - window.measure_from,
                    latency,
                    outcome,
                );
            }
            shared.done.fetch_add(1, Ordering::Relaxed);
            drop(permit);
        });
        while tasks.try_join_next().is_some() {}
    }
    while tasks.join_next().await.is_some() {}
    let recorder = recorder.lock().unwrap_or_else(|p| p.into_inner()).clone();
    (recorder, lag, offered)
}

/// The open loop's send times: request `i` at `started + i / rate`, up to
/// the window's end.
#[derive(Clone, Copy)]
struct Schedule {
    started: std::time::Instant,
    until: std::time::Instant,
    nanos_per_request: f64,
}

impl Schedule {
    fn new(rate: u32, window: &Window) -> Self {
        Schedule {
            started: window.started.into_std(),
            until: window.until.into_std(),
            nanos_per_request: 1e9 / f64::from(rate.max(1)),
        }
    }

    /// Request `i`'s intended send time, or None past the window.
    fn at(&self, i: u64) -> Option<std::time::Instant> {
        let at = self.started + Duration::from_nanos((i as f64 * self.nanos_per_request) as u64);
        (at < self.until).then_some(at)
    }
}

/// Requests handed out on schedule, as their intended send times.
///
/// A thread of its own sleeps until each send time (`nanosleep`: tens of
/// microseconds late at most, none of tokio's timer wheel, which rounds a
/// deadline up to its next millisecond tick) and hands it to the open loop
/// over a channel, whose wake-up reaches the runtime at once. This removes
/// the timer's rounding (up to 1 ms per send) from the send lag; it did
/// not measurably lower the lag's p99.9 at about 2,000 requests per second
/// (2-4 ms with or without it, docs/benchmarks.md): that is the loop's own
/// thread, busy with answers when a send falls due. Ends when the schedule does or
/// the receiver is dropped; at most 1,024 ticks wait (a loop that cannot
/// keep up then holds the thread back, and its lag shows).
/// Returns the ticks and the thread (None if it could not start).
fn pacer(
    schedule: Schedule,
) -> (
    tokio::sync::mpsc::Receiver<Instant>,
    Option<std::thread::JoinHandle<()>>,
) {
    let (tx, rx) = tokio::sync::mpsc::channel(1024);
    let spawned = std::thread::Builder::new()
        .name("kvctl-pacer".into())
        .spawn(move || {
            for i in 0u64.. {
                let Some(at) = schedule.at(i) else { break };
                let now = std::time::Instant::now();
                if at > now {
                    std::thread::sleep(at - now);
                }
                if tx.blocking_send(Instant::from_std(at)).is_err() {
                    break;
                }
            }
        });
    match spawned {
        Ok(thread) => (rx, Some(thread)),
        Err(e) => {
            // Without the thread the channel closes at once and nothing is
            // sent; say so rather than report an empty run silently.
            eprintln!("kvctl bench: cannot start the pacer thread: {e}");
            (rx, None)
        }
    }
}

/// `--value-size` random lowercase letters.
fn value(args: &BenchArgs, rng: &mut StdRng) -> Vec<u8> {
    (0..args.value_size)
        .map(|_| rng.random_range(b'a'..=b'z'))
        .collect()
}

impl Shared {
    /// The name of key number `index`.
    fn key(&self, index: u64) -> String {
        format!(
            "{}{index:0width$}",
            self.args.prefix,
            width = self.args.key_width as usize
        )
    }

    /// Adds a measured request to the `--trace`, if one is kept.
    fn traced(&self, intended: Instant, latency: Duration, op: BenchOp, index: u64, ok: bool) {
        if let Some(trace) = &self.trace {
            let replicas = self.client.preference_list(self.key(index).as_bytes());
            trace.lock().unwrap_or_else(|p| p.into_inner()).push(
                intended,
                latency,
                op,
                index,
                replicas.as_deref(),
                ok,
            );
        }
    }

    /// Counts one more request; false once `--requests` were issued.
    fn issue(&self) -> bool {
        let issued = self.issued.fetch_add(1, Ordering::Relaxed);
        self.args.requests.is_none_or(|n| issued < n)
    }

    /// The next operation by `--mix` and key index by `--distribution`.
    fn pick(&self, rng: &mut StdRng) -> (BenchOp, u64) {
        let total = self.mix.last().map_or(1, |(_, w)| *w);
        let pick = rng.random_range(0..total);
        let op = self
            .mix
            .iter()
            .find(|(_, w)| pick < *w)
            .map_or(BenchOp::Get, |(op, _)| *op);
        (op, self.keys.sample(rng))
    }

    /// Sends one request; `Err` holds the client error's text.
    async fn request(&self, op: BenchOp, index: u64, value: &[u8]) -> series::Outcome {
        let key = self.key(index);
        match op {
            BenchOp::Get => match self.client.get(key.as_bytes(), self.args.r).await {
                Ok(_) => Ok(()),
                Err(e) => Err(e.to_string()),
            },
            BenchOp::Put => {
                let context = self.context(index);
                match self
                    .client
                    .put(key.as_bytes(), value, &context, self.args.w)
                    .await
                {
                    Ok(context) => {
                        self.remember(index, context);
                        Ok(())
                    }
                    Err(e) => Err(e.to_string()),
                }
            }
        }
    }

    fn context(&self, index: u64) -> Vec<u8> {
        let map = self.contexts.lock().unwrap_or_else(|p| p.into_inner());
        map.get(&index).cloned().unwrap_or_default()
    }

    fn remember(&self, index: u64, context: Vec<u8>) {
        let mut map = self.contexts.lock().unwrap_or_else(|p| p.into_inner());
        if map.len() >= MAX_CONTEXTS && !map.contains_key(&index) {
            map.clear();
        }
        map.insert(index, context);
    }
}

/// How the client routed the run's requests.
struct Routing {
    /// The routing mode it used.
    mode: &'static str,
    /// Requests each node answered (coordinated).
    coordinated: std::collections::BTreeMap<String, u64>,
    /// `(sent, denied)` hedged reads.
    hedges: (u64, u64),
}

/// Everything a run prints.
struct Report<'a> {
    /// The measured duration.
    elapsed: Duration,
    recorder: &'a Recorder,
    all: &'a OpStats,
    /// Open loop: requests offered while measuring.
    offered: Option<u64>,
    /// Open loop: the send lag.
    lag: Option<&'a OpStats>,
    /// The nodes' counters over the run (`None`: no admin endpoint answered).
    nodes: Option<scrape::Counters>,
    routing: &'a Routing,
}

/// Hedges (the coordinators' and the client's) per request of the run, in
/// percent: the share the hedge budget bounds (5% by default).
fn hedge_pct(nodes: &scrape::Counters, routing: &Routing, all: &OpStats) -> Option<f64> {
    let requests = all.ok_count() + all.error_count();
    (requests > 0).then(|| 100.0 * (nodes.hedges_sent + routing.hedges.0 as f64) / requests as f64)
}

/// Prints the table (or JSON) of the run.
fn print(args: &BenchArgs, json: bool, report: &Report<'_>) -> Result<()> {
    let elapsed = report.elapsed;
    let routing = report.routing;
    let rows = [
        ("get", &report.recorder.get),
        ("put", &report.recorder.put),
        ("all", report.all),
    ];
    let measured: Vec<&(&str, &OpStats)> = rows
        .iter()
        .filter(|(name, s)| *name == "all" || s.ok_count() + s.error_count() > 0)
        .collect();
    let lag_json = |lag: &OpStats| {
        json!({
            "p50_ms": lag.quantile_ms(0.50),
            "p99_ms": lag.quantile_ms(0.99),
            "p999_ms": lag.quantile_ms(0.999),
            "max_ms": lag.max_ms(),
        })
    };
    if json {
        let ops: serde_json::Map<String, serde_json::Value> = measured
            .iter()
            .map(|(name, s)| ((*name).to_string(), s.json(elapsed)))
            .collect();
        let all = report.all;
        output::print_json(&json!({
            "loop": if args.rate.is_some() { "open" } else { "closed" },
            "clients": args.clients,
            "rate": args.rate,
            "duration_s": elapsed.as_secs_f64(),
            "warmup_s": args.warmup,
            "mix": args.mix,
            "keys": args.keys,
            "distribution": format!("{:?}", args.distribution).to_lowercase(),
            "value_size": args.value_size,
            "r": args.r,
            "w": args.w,
            "ops": ops,
            "offered_ops_per_s": report.offered.map(|n| per_second(n, elapsed)),
            "ops_per_s": per_second(all.ok_count(), elapsed),
            "p50_ms": all.quantile_ms(0.50),
            "p99_ms": all.quantile_ms(0.99),
            "p999_ms": all.quantile_ms(0.999),
            "p9999_ms": all.quantile_ms(0.9999),
            "max_ms": all.max_ms(),
            "errors": all.error_count(),
            "send_lag": report.lag.map(lag_json),
            "hedges": report.nodes.as_ref().map(|n| json!({
                "sent": n.hedges_sent,
                "won": n.hedges_won,
                "denied": n.hedges_denied,
                "reads": n.reads,
                "client_sent": routing.hedges.0,
                "pct": hedge_pct(n, routing, all),
            })),
            "hit_ratio": report.nodes.as_ref().and_then(scrape::Counters::hit_ratio),
            "series": report.recorder.series_json(),
            "router_mode": routing.mode,
            "coordinated": routing.coordinated,
            "client_hedges": {"sent": routing.hedges.0, "denied": routing.hedges.1},
        }))?;
        return Ok(());
    }
    let table: Vec<Vec<String>> = measured
        .iter()
        .map(|(name, s)| {
            let mut row = s.row(name, elapsed);
            row.insert(6, format!("{:.3}", s.max_ms()));
            row
        })
        .collect();
    let mut text = output::table(
        &[
            "OP", "OPS", "OPS/S", "P50 MS", "P99 MS", "P99.9 MS", "MAX MS", "ERRORS",
        ],
        table,
    );
    for (name, s) in &measured {
        if *name != "all" {
            for line in s.error_lines(name) {
                text.push_str(&line);
                text.push('\n');
            }
        }
    }
    if let (Some(offered), Some(lag)) = (report.offered, report.lag) {
        text.push_str(&format!(
            "open loop: {:.0} ops/s offered, {:.0} completed; send lag p50 {:.3} p99 {:.3} p99.9 {:.3} max {:.3} ms\n",
            per_second(offered, elapsed),
            per_second(report.all.ok_count(), elapsed),
            lag.quantile_ms(0.50),
            lag.quantile_ms(0.99),
            lag.quantile_ms(0.999),
            lag.max_ms(),
        ));
    }
    match &report.nodes {
        Some(n) => text.push_str(&format!(
            "nodes: {} hedged reads of {} ({} of the run's requests with the client's), {} denied by the budget; cache hit ratio {}\n",
            n.hedges_sent,
            n.reads,
            hedge_pct(n, routing, report.all).map_or("-".into(), |p| format!("{p:.2}%")),
            n.hedges_denied,
            n.hit_ratio().map_or("-".into(), |r| format!("{r:.3}")),
        )),
        None => {
            text.push_str("nodes: no admin endpoint answered; hedges and cache hit ratio unknown\n")
        }
    }
    let mut by_node: Vec<(&String, &u64)> = routing.coordinated.iter().collect();
    by_node.sort_by(|a, b| crate::output::natural_cmp(a.0, b.0));
    let by_node: Vec<String> = by_node.iter().map(|(n, c)| format!("{n} {c}")).collect();
    text.push_str(&format!(
        "routing {}: coordinated by {}; client hedges {} sent, {} denied by the budget\n",
        routing.mode,
        if by_node.is_empty() {
            "-".to_string()
        } else {
            by_node.join(", ")
        },
        routing.hedges.0,
        routing.hedges.1
    ));
    for point in report.recorder.series_json() {
        text.push_str(&format!(
            "t={}s ops {} errors {} p50 {:.3} p99 {:.3} max {:.3} ms\n",
            point["t_s"],
            point["ops"],
            point["errors"],
            point["p50_ms"].as_f64().unwrap_or(0.0),
            point["p99_ms"].as_f64().unwrap_or(0.0),
            point["max_ms"].as_f64().unwrap_or(0.0),
        ));
    }
    output::print(&text)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mixes_parse_to_cumulative_weights() {
        assert_eq!(
            parse_mix("get:90,put:10"),
            Ok(vec![(BenchOp::Get, 90), (BenchOp::Put, 100)])
        );
        assert_eq!(parse_mix("put:1"), Ok(vec![(BenchOp::Put, 1)]));
        assert!(parse_mix("get:0").is_err());
        assert!(parse_mix("scan:5").is_err());
        assert!(parse_mix("get=5").is_err());
        assert!(parse_mix("get:x").is_err());
    }

    fn window(seconds: u64) -> Window {
        let started = Instant::now();
        Window {
            started,
            measure_from: started,
            until: started + Duration::from_secs(seconds),
        }
    }

    #[test]
    fn the_schedule_spaces_requests_by_the_rate_and_ends_with_the_window() {
        let w = window(1);
        let schedule = Schedule::new(4, &w);
        let start = w.started.into_std();
        let times: Vec<_> = (0..6).map(|i| schedule.at(i)).collect();
        assert_eq!(times[0], Some(start));
        assert_eq!(times[1], Some(start + Duration::from_millis(250)));
        assert_eq!(times[3], Some(start + Duration::from_millis(750)));
        assert_eq!(times[4], None, "the window's end is not a send time");
        assert_eq!(times[5], None);
    }

    #[tokio::test]
    async fn the_pacer_hands_out_every_send_time_in_order_and_none_early() {
        let w = window(1);
        let (mut ticks, _) = pacer(Schedule::new(200, &w));
        let mut seen = Vec::new();
        while let Some(at) = ticks.recv().await {
            assert!(Instant::now() >= at, "a tick came before its send time");
            seen.push(at);
        }
        assert_eq!(seen.len(), 200);
        assert!(seen.windows(2).all(|p| p[0] < p[1]));
        assert_eq!(seen[0], w.started);
    }

    #[tokio::test]
    async fn the_pacer_stops_when_the_loop_does() {
        let w = window(3600);
        let (mut ticks, thread) = pacer(Schedule::new(1000, &w));
        let thread = thread.expect("the pacer thread starts");
        assert!(ticks.recv().await.is_some());
        drop(ticks);
        // The send fails on the closed channel at its next tick (within a
        // millisecond here, not at the hour-long window's end).
        let joined = tokio::time::timeout(
            Duration::from_secs(10),
            tokio::task::spawn_blocking(move || thread.join()),
        )
        .await;
        assert!(
            matches!(joined, Ok(Ok(Ok(())))),
            "the pacer outlived its loop"
        );
    }
}
