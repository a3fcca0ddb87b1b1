//! `kvctl bench`: a closed-loop load generator over QUIC, through the
//! client library.
//!
//! `--clients N` tasks share one [`Client`] (one QUIC connection per node;
//! every request starts at a random endpoint, so coordination spreads over
//! the nodes given). Each task loops until `--duration`: pick an operation
//! by `--mix`, a key by `--distribution` over `--keys` keys, send, wait,
//! record the latency. Keys are `PREFIX<index>`; values `--value-size`
//! random bytes.
//!
//! Puts carry the causal context of the last put of the same key this run
//! saw (remembered for up to [`MAX_CONTEXTS`] keys), so that repeated puts
//! of a hot key supersede each other instead of piling up siblings; the
//! first put of a key is blind.
//!
//! Latency percentiles are of successful operations; failures are counted
//! by kind and printed with an example message.

mod keys;
mod stats;

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

use self::keys::{KeyDist, Zipf};
use self::stats::{OpStats, per_second};
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
}

/// Runs the benchmark and prints its figures.
pub async fn run(client: Arc<Client>, args: &BenchArgs, json: bool) -> Result<Outcome> {
    let keys = match args.distribution {
        Distribution::Uniform => KeyDist::Uniform { n: args.keys },
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
    });
    eprintln!(
        "kvctl bench: {} clients for {} s, mix {}, {} keys ({:?}), {}-byte values, R={} W={}",
        args.clients,
        args.duration,
        args.mix,
        args.keys,
        args.distribution,
        args.value_size,
        args.r.map_or_else(|| "cluster".into(), |r| r.to_string()),
        args.w.map_or_else(|| "cluster".into(), |w| w.to_string()),
    );
    let duration = Duration::from_secs(args.duration);
    let started = Instant::now();
    let deadline = started + duration;
    let progress = Arc::new(Mutex::new(Progress::new(
        json,
        "{elapsed_precise} [{bar:40}] {pos}/{len} s  {msg}",
        "",
        "s",
        duration.as_secs(),
        None,
    )));
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..args.clients {
        let shared = shared.clone();
        tasks.spawn(worker(
            shared,
            args.seed.wrapping_add(u64::from(i)),
            deadline,
        ));
    }
    let ticker = {
        let (shared, progress) = (shared.clone(), progress.clone());
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_millis(250));
            loop {
                tick.tick().await;
                let elapsed = started.elapsed();
                let done = shared.done.load(Ordering::Relaxed);
                progress.lock().unwrap_or_else(|p| p.into_inner()).update(
                    elapsed.as_secs().min(duration.as_secs()),
                    duration.as_secs(),
                    "",
                    &format!("{done} ops, {:.0} ops/s", per_second(done, elapsed)),
                );
            }
        })
    };
    let (mut get, mut put) = (OpStats::default(), OpStats::default());
    while let Some(result) = tasks.join_next().await {
        let (g, p) = result?;
        get.merge(&g);
        put.merge(&p);
    }
    ticker.abort();
    progress
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .finish_and_clear();
    let elapsed = started.elapsed();
    let mut all = get.clone();
    all.merge(&put);
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
    print(
        args,
        json,
        elapsed,
        &[("get", &get), ("put", &put), ("all", &all)],
        &routing,
    )?;
    Ok(Outcome::Done)
}

/// One closed-loop client until `deadline`: its (get, put) figures.
async fn worker(shared: Arc<Shared>, seed: u64, deadline: Instant) -> (OpStats, OpStats) {
    let mut rng = StdRng::seed_from_u64(seed);
    let value: Vec<u8> = (0..shared.args.value_size)
        .map(|_| rng.random_range(b'a'..=b'z'))
        .collect();
    let total = shared.mix.last().map_or(1, |(_, w)| *w);
    let (mut get, mut put) = (OpStats::default(), OpStats::default());
    while Instant::now() < deadline {
        let pick = rng.random_range(0..total);
        let op = shared
            .mix
            .iter()
            .find(|(_, w)| pick < *w)
            .map_or(BenchOp::Get, |(op, _)| *op);
        let index = shared.keys.sample(&mut rng);
        let key = format!("{}{index}", shared.args.prefix);
        let start = Instant::now();
        match op {
            BenchOp::Get => match shared.client.get(key.as_bytes(), shared.args.r).await {
                Ok(_) => get.ok(start.elapsed()),
                Err(e) => get.failed(e.to_string()),
            },
            BenchOp::Put => {
                let context = shared.context(index);
                match shared
                    .client
                    .put(key.as_bytes(), &value, &context, shared.args.w)
                    .await
                {
                    Ok(context) => {
                        put.ok(start.elapsed());
                        shared.remember(index, context);
                    }
                    Err(e) => put.failed(e.to_string()),
                }
            }
        }
        shared.done.fetch_add(1, Ordering::Relaxed);
    }
    (get, put)
}

impl Shared {
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

/// Prints the table (or JSON) of the run.
fn print(
    args: &BenchArgs,
    json: bool,
    elapsed: Duration,
    rows: &[(&str, &OpStats)],
    routing: &Routing,
) -> Result<()> {
    let measured: Vec<&(&str, &OpStats)> = rows
        .iter()
        .filter(|(name, s)| *name == "all" || s.ok_count() + s.error_count() > 0)
        .collect();
    if json {
        let ops: serde_json::Map<String, serde_json::Value> = measured
            .iter()
            .map(|(name, s)| ((*name).to_string(), s.json(elapsed)))
            .collect();
        output::print_json(&json!({
            "clients": args.clients,
            "duration_s": elapsed.as_secs_f64(),
            "mix": args.mix,
            "keys": args.keys,
            "distribution": format!("{:?}", args.distribution).to_lowercase(),
            "value_size": args.value_size,
            "r": args.r,
            "w": args.w,
            "ops": ops,
            "router_mode": routing.mode,
            "coordinated": routing.coordinated,
            "client_hedges": {"sent": routing.hedges.0, "denied": routing.hedges.1},
        }))?;
        return Ok(());
    }
    let table: Vec<Vec<String>> = measured
        .iter()
        .map(|(name, s)| s.row(name, elapsed))
        .collect();
    let mut text = output::table(
        &[
            "OP", "OPS", "OPS/S", "P50 MS", "P99 MS", "P99.9 MS", "ERRORS",
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
}
