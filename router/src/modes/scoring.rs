//! `scoring`: ours (docs/design.md, "The scoring model"; design notes 000
//! and 003).
//!
//! 1. **Hard filter**: dead, breaker open or probing, failure rate over 30%
//!    of at least 10 requests in the last minute, host out. Filtered
//!    candidates that are alive come last, in preference order.
//! 2. **Fresh state**: a report older than `freshness_periods` periods is
//!    unconfirmed: its node is probed, and it is scored by its historical
//!    median (its baseline), decaying by `baseline_decay` per period after
//!    `baseline_grace_periods`. If more than half the candidates lack a
//!    fresh report, the order falls back to the preference list.
//! 3. **Dimensions** in [0, 1]: load = 1 - max(cpu, queue / max queue,
//!    backlog / max backlog, in-flight / in-flight limit), the queue being
//!    the piggybacked one when known (fresher) else the reported one, and
//!    the cpu left out for the coordinator's own replica (routing away
//!    from it does not relieve the coordinator, whose CPU the request
//!    spends either way);
//!    latency graded by the ratio of the effective latency (the age of the
//!    oldest outstanding request once it is over `STUCK_FACTOR` times the
//!    estimate; for a kept-out candidate at least its slowest read answer
//!    since it was kept out, [`CandidateInputs::peak_us`]) to the fastest
//!    peer's: 1.0 within `latency_tie` of it (2x),
//!    then `(fastest / ((1 - latency_tie) x latency))^2`, at least 0.1 (3x
//!    as slow 0.44, 4x 0.25, 6x and more 0.1); hit = (0.5 + 0.5 x hit ratio), 30% lower without
//!    affinity (the coordinator served the key there recently, or the key
//!    is among its reported hot keys); availability = 1 - 2 x failure rate.
//!    We combine affinity and hit ratio this way so that a cold replica
//!    (hit ratio 0) still scores 0.5 on the dimension: heat decides among
//!    healthy replicas, it does not shut one out.
//! 4. **Weights** (mixed by default); when the cluster's p99 is above
//!    `slow_cluster_p99_ms`, the latency weight is multiplied by
//!    min(2, p99 / that) and the weights scaled back to a sum of 1.
//! 5. **Penalties** (multiplicative): declining x0.85, error rate over 5%
//!    x0.4, cool-down weight, queue above its threshold x0.6, suspect x0.2,
//!    hints pending x0.8, repair running x0.9; the local replica's hop
//!    credit x1.3.
//! 6. **Selection**: by score; among near-ties (within `near_tie`, 20%, of the best left)
//!    the coordinator's zone first, then at random per key: the tie goes
//!    to the candidate with the highest rendezvous weight
//!    `xxh3(node id, seed = key hash)`, so every coordinator and every
//!    client breaks the ties of one key alike (and the ties of different
//!    keys uniformly at random). A key's reads then land on the same R
//!    replicas, which cache it, instead of on all N in turn; a random
//!    pick per request cost the read cache 3 points of hit ratio
//!    (docs/benchmarks.md, "Per-key ties"). With a load bound set
//!    (`tie_load_bound`, 1.0 by default), the
//!    favourite is passed over while its requests in flight exceed it
//!    (consistent hashing with bounded loads). With a temperature T > 0,
//!    softmax(score / T) instead. A candidate in slow start (ramp r
//!    < 1) that would be picked is passed over for a fraction 1 - r of the
//!    keys (fixed per key: `ramp_unit`), so its share of first places is
//!    r times what it would be.
//! 7. **Latency probe** (reads): the first candidate after the R asked
//!    that passed the filter and is due a probe (kept out by this
//!    coordinator, no read to it for `latency_probe`:
//!    [`CandidateInputs::probe_due`]) is named in
//!    [`Decision::latency_probe`]; the caller sends it the read too.

use kv_types::NodeId;

use crate::decide::{
    Applied, Decision, Dimensions, Exclusion, Hedge, Penalty, Scored, assemble, hard_filter,
};
use crate::draw::Draws;
use crate::inputs::{CandidateInputs, Inputs};
use crate::scorer::Op;
use crate::{RouterSettings, Weights};

/// The baseline of a node whose report is stale and that has no history.
const DEFAULT_BASELINE: f64 = 0.55;

/// The hit ratio assumed for a node that reported none.
const UNKNOWN_HIT_RATIO: f64 = 0.5;

/// Whether `c`'s report is fresh.
fn fresh(settings: &RouterSettings, c: &CandidateInputs) -> bool {
    let ttl = settings.report_period * settings.freshness_periods;
    c.report
        .as_ref()
        .is_some_and(|r| u128::from(r.age_ms) <= ttl.as_millis())
}

/// The weights of this decision (the latency weight rises when the
/// cluster is slow).
pub fn weights(settings: &RouterSettings, inputs: &Inputs) -> Weights {
    let slow_us = settings.slow_cluster_p99_ms * 1000.0;
    match inputs.cluster_p99_us {
        Some(p99) if p99 > slow_us => settings
            .weights
            .with_latency_factor((p99 / slow_us).min(2.0)),
        _ => settings.weights,
    }
}

/// The latency dimension of each candidate (`None` for filtered ones):
/// graded by its latency's ratio to the fastest peer's (the local
/// replica's in-process time is no yardstick for round trips: beside it
/// every peer would be at the floor; it is graded against the peers like
/// any candidate), 1.0 within
/// `latency_tie` of the fastest (0.5: up to twice as slow), then falling
/// with the square of the ratio beyond it (`(best / ((1 - latency_tie) x
/// latency))^2`: 3x as slow 0.44, 4x 0.25, 6x and more `worst_rank_score`,
/// 0.1, as the slowest rank was); a latency floored by
/// a request its peer does not answer has no tie band. Candidates without
/// a value take the mean of those that have one.
///
/// Graded by ratio rather than by rank: a rank said only how many peers
/// were faster, so one fast replica and two 4x slower ones were 0.45 apart
/// (the slow ones shared the middle rank), as far as two healthy peers
/// whose windowed latencies crossed the tie band by luck (docs/benchmarks.md,
/// "Router benchmark, fifth quick run").
///
/// `values`: per candidate, its effective latency (us), whether it is
/// floored, whether it is the local replica.
fn latency_scores(
    settings: &RouterSettings,
    values: &[(Option<f64>, bool, bool)],
) -> Vec<Option<f64>> {
    let (sum, count) = values
        .iter()
        .filter_map(|(v, _, _)| *v)
        .fold((0.0, 0usize), |(s, c), v| (s + v, c + 1));
    let fallback = (count > 0).then(|| sum / count as f64);
    let used = || values.iter().map(|(v, _, _)| v.or(fallback));
    let fastest = |peers_only: bool| {
        values
            .iter()
            .zip(used())
            .filter(|((_, _, local), _)| !(peers_only && *local))
            .filter_map(|(_, v)| v)
            .fold(f64::INFINITY, f64::min)
    };
    let best = match fastest(true) {
        b if b.is_finite() => b,
        _ => fastest(false),
    };
    values
        .iter()
        .zip(used())
        .map(|((_, floored, _), v)| {
            let v = v.unwrap_or(0.0);
            // A floored latency (a peer not answering) has no tie band.
            let band = if *floored { 0.0 } else { settings.latency_tie };
            let allowed = v * (1.0 - band);
            Some(if allowed <= best {
                1.0
            } else {
                (best / allowed)
                    .powi(2)
                    .clamp(settings.worst_rank_score, 1.0)
            })
        })
        .collect()
}

/// The four dimensions of one candidate, given its latency score.
fn dimensions(settings: &RouterSettings, c: &CandidateInputs, latency: f64) -> Dimensions {
    let report = c.report.as_ref();
    let queue = c
        .queue
        .or_else(|| report.map(|r| f64::from(r.queue)))
        .unwrap_or(0.0);
    // The coordinator's own CPU does not count against its local replica:
    // sending the request to a peer instead does not relieve it (it pays
    // the peer call's transport work on top of the coordination), so for
    // it the local replica is always the cheaper path. Measured
    // (docs/benchmarks.md, issue 8): with the cpu counted, RESP GET R=1
    // through one busy coordinator sent a third of its local reads to
    // peers, at about twice the cluster CPU per read.
    let cpu = if c.local {
        0.0
    } else {
        report.map_or(0.0, |r| r.cpu)
    };
    let pressure = [
        cpu,
        queue / f64::from(settings.max_queue),
        report.map_or(0.0, |r| f64::from(r.backlog)) / f64::from(settings.max_backlog),
        f64::from(c.in_flight) / f64::from(settings.in_flight_limit),
    ]
    .into_iter()
    .fold(0.0, f64::max);
    let affinity = c.affinity || report.is_some_and(|r| r.hot);
    let ratio = report
        .map_or(UNKNOWN_HIT_RATIO, |r| r.hit_ratio)
        .clamp(0.0, 1.0);
    let heat = 0.5 + 0.5 * ratio;
    Dimensions {
        load: (1.0 - pressure).clamp(0.0, 1.0),
        latency,
        hit: if affinity {
            heat
        } else {
            heat * (1.0 - settings.affinity_discount)
        },
        availability: (1.0 - 2.0 * c.failure_rate()).clamp(0.0, 1.0),
    }
}

/// The penalties (and the local credit) that apply to `c`.
fn penalties(settings: &RouterSettings, c: &CandidateInputs) -> Vec<Applied> {
    let p = &settings.penalties;
    let queue = c
        .queue
        .or_else(|| c.report.as_ref().map(|r| f64::from(r.queue)))
        .unwrap_or(0.0);
    let rules = [
        (c.declining, Penalty::Declining, p.declining),
        (c.failure_rate() > p.error_rate, Penalty::Errors, p.errors),
        (c.cooldown < 1.0, Penalty::Cooldown, c.cooldown),
        (
            queue > f64::from(settings.queue_threshold),
            Penalty::Queue,
            p.queue,
        ),
        (c.suspect, Penalty::Suspect, p.suspect),
        (c.hints_pending > 0, Penalty::Hints, p.hints),
        (
            c.report.as_ref().is_some_and(|r| r.repair),
            Penalty::Repair,
            p.repair,
        ),
        (c.local, Penalty::HopCredit, 1.0 + settings.hop_credit),
    ];
    rules
        .into_iter()
        .filter(|(applies, _, _)| *applies)
        .map(|(_, rule, factor)| Applied { rule, factor })
        .collect()
}

/// Our order.
pub fn decide(settings: &RouterSettings, inputs: &Inputs, draw: u64) -> Decision {
    let cands = &inputs.candidates;
    let excluded: Vec<Option<Exclusion>> = cands.iter().map(|c| hard_filter(settings, c)).collect();
    let passing: Vec<usize> = (0..cands.len())
        .filter(|i| excluded[*i].is_none())
        .collect();
    let probes = cands
        .iter()
        .filter(|c| c.alive && !c.local && !fresh(settings, c))
        .map(|c| c.id.clone())
        .collect();
    let stale = passing
        .iter()
        .filter(|i| !cands[**i].local && !fresh(settings, &cands[**i]))
        .count();
    let weights = weights(settings, inputs);
    let latencies: Vec<(Option<f64>, bool, bool)> = passing
        .iter()
        .map(|i| {
            let c = &cands[*i];
            (c.effective_latency_us(), c.floored(), c.local)
        })
        .collect();
    let latency_dims = latency_scores(settings, &latencies);
    let mut scored: Vec<Scored> = cands
        .iter()
        .zip(&excluded)
        .map(|(c, e)| Scored {
            id: c.id.clone(),
            excluded: e.clone(),
            dimensions: None,
            weights: None,
            latency_us: c.effective_latency_us(),
            penalties: Vec::new(),
            score: 0.0,
        })
        .collect();
    for (k, i) in passing.iter().enumerate() {
        let c = &cands[*i];
        let dims = dimensions(settings, c, latency_dims[k].unwrap_or(1.0));
        let base = weights.load * dims.load
            + weights.latency * dims.latency
            + weights.hit * dims.hit
            + weights.availability * dims.availability;
        let mut applied = penalties(settings, c);
        let mut score = applied.iter().fold(base, |s, a| s * a.factor);
        if !c.local && !fresh(settings, c) {
            let periods = c
                .stale_periods
                .saturating_sub(settings.baseline_grace_periods);
            let decay = settings
                .baseline_decay
                .powi(i32::try_from(periods).unwrap_or(i32::MAX));
            let baseline = c.baseline.unwrap_or(DEFAULT_BASELINE) * decay;
            applied.push(Applied {
                rule: Penalty::Stale,
                factor: if score > 0.0 { baseline / score } else { 1.0 },
            });
            score = baseline;
        }
        let s = &mut scored[*i];
        s.dimensions = Some(dims);
        s.weights = Some(weights);
        s.penalties = applied;
        s.score = score;
    }
    if stale * 2 > passing.len() {
        let order = assemble(inputs, first_passing(cands, &passing), &scored);
        let latency_probe = latency_probe(inputs, &order, &excluded);
        return Decision {
            mode: inputs.mode,
            order,
            scored,
            fallback: Some(format!(
                "{stale} of {} candidates lack a fresh report: preference order",
                passing.len()
            )),
            probes,
            latency_probe,
            hedge: Hedge::Budgeted {
                quantile: settings.hedge_quantile,
            },
        };
    }
    let first = select(settings, inputs, &scored, &passing, draw);
    let order = assemble(inputs, first, &scored);
    let latency_probe = latency_probe(inputs, &order, &excluded);
    Decision {
        mode: inputs.mode,
        order,
        scored,
        fallback: None,
        probes,
        latency_probe,
        hedge: Hedge::Budgeted {
            quantile: settings.hedge_quantile,
        },
    }
}

/// The passing candidates in preference order (the fallback's order).
fn first_passing(cands: &[CandidateInputs], passing: &[usize]) -> Vec<NodeId> {
    passing.iter().map(|i| cands[*i].id.clone()).collect()
}

/// The read's probe, if one is due: the first candidate of `order` after
/// the R asked that passed the hard filter and is due one
/// ([`CandidateInputs::probe_due`]). A candidate the filter left out is
/// not probed: the breaker has its own half-open probe, and a dead one
/// would only be waited on.
fn latency_probe(
    inputs: &Inputs,
    order: &[NodeId],
    excluded: &[Option<Exclusion>],
) -> Option<NodeId> {
    if inputs.op != Op::Get {
        return None;
    }
    order.iter().skip(inputs.r).find_map(|id| {
        let i = inputs.candidates.iter().position(|c| c.id == *id)?;
        (excluded[i].is_none() && inputs.candidates[i].probe_due).then(|| id.clone())
    })
}

/// The order of the passing candidates (see the module documentation).
fn select(
    settings: &RouterSettings,
    inputs: &Inputs,
    scored: &[Scored],
    passing: &[usize],
    draw: u64,
) -> Vec<kv_types::NodeId> {
    let cands = &inputs.candidates;
    let mut draws = Draws::new(draw);
    let mut left: Vec<usize> = passing.to_vec();
    let mut passed_over: Vec<usize> = Vec::new();
    let mut first = Vec::with_capacity(left.len());
    while !left.is_empty() {
        let pick = if settings.temperature > 0.0 {
            softmax_pick(settings.temperature, scored, &left, &mut draws)
        } else {
            tie_pick(settings, inputs, scored, &left)
        };
        let i = left.remove(pick);
        let ramp = cands[i].ramp.clamp(0.0, 1.0);
        if ramp < 1.0 && !left.is_empty() && ramp_unit(inputs.key_hash, &cands[i].id) >= ramp {
            passed_over.push(i);
            continue;
        }
        first.push(cands[i].id.clone());
    }
    first.extend(passed_over.into_iter().map(|i| cands[i].id.clone()));
    first
}

/// Among the near-ties of the best score left, the coordinator's zone
/// first, then the one of highest rendezvous weight for the key (module
/// documentation, 6) whose requests in flight fit the load bound
/// ([`RouterSettings::tie_load_bound`]); returns an index into `left`.
///
/// The bound is consistent hashing with bounded loads (Mirrokni, Thorup
/// and Zadimoghaddam, SODA 2018) applied to the near-ties: a candidate
/// fits while `in_flight + 1 <= ceil((1 + eps) x (sum of the near-ties'
/// in flight + 1) / near-ties)`. The least loaded near-tie always fits
/// (`floor(t / n) + 1 = ceil((t + 1) / n)`), so the pick never fails; with
/// equal loads the favourite fits, so a key keeps its replicas (and their
/// cache) while nothing queues.
fn tie_pick(
    settings: &RouterSettings,
    inputs: &Inputs,
    scored: &[Scored],
    left: &[usize],
) -> usize {
    let best = left
        .iter()
        .map(|i| scored[*i].score)
        .fold(f64::MIN, f64::max);
    // Counted, then the chosen one found by its place: the same pick as
    // drawing from a list of the pool, without building one per place.
    let tie = |k: &usize| scored[left[*k]].score >= best * (1.0 - settings.near_tie);
    let local = |k: &usize| tie(k) && inputs.candidates[left[*k]].zone == inputs.local_zone;
    let only_local = settings.prefer_local_zone && (0..left.len()).any(|k| local(&k));
    let pool = |k: &usize| if only_local { local(k) } else { tie(k) };
    let members = || (0..left.len()).filter(pool);
    let mut two = members();
    let first = two.next().unwrap_or(0);
    // A pool of one needs no hash (the common case past the first place).
    if two.next().is_none() {
        return first;
    }
    let weight = |k: &usize| key_weight(inputs.key_hash, &inputs.candidates[left[*k]].id);
    if settings.tie_load_bound <= 0.0 {
        return members().max_by_key(weight).unwrap_or(first);
    }
    let in_flight = |k: &usize| f64::from(inputs.candidates[left[*k]].in_flight);
    let (n, total) = members().fold((0.0, 0.0), |(n, t), k| (n + 1.0, t + in_flight(&k)));
    let cap = ((1.0 + settings.tie_load_bound) * (total + 1.0) / n).ceil();
    members()
        .filter(|k| in_flight(k) + 1.0 <= cap)
        .max_by_key(weight)
        .unwrap_or(first)
}

/// A number in [0, 1) fixed per key and node, independent of
/// [`key_weight`]: a node in slow start (ramp r) is passed over for the
/// keys whose number is r or more, so it serves all the reads of a
/// fraction r of its keys rather than a fraction r of the reads of every
/// key. Its cache then holds whole keys and warms as fast as its peers'
/// (a pass-over drawn per request split every key's reads between it and
/// another replica, and its hit ratio stayed 13 points below the others'
/// a minute after a restart: docs/benchmarks.md, "Per-key ties"); as r
/// rises, keys move to it and stay.
fn ramp_unit(key_hash: u64, node: &kv_types::NodeId) -> f64 {
    const SALT: u64 = 0x5eed_0f5a_0157_a127;
    let h = twox_hash::XxHash3_64::oneshot_with_seed(key_hash ^ SALT, node.as_str().as_bytes());
    (h >> 11) as f64 / (1u64 << 53) as f64
}

/// The rendezvous weight of `node` for the key of hash `key_hash` (highest
/// random weight hashing, Thaler and Ravishankar 1998): the same on every
/// coordinator and client, independent across keys.
pub fn key_weight(key_hash: u64, node: &kv_types::NodeId) -> u64 {
    twox_hash::XxHash3_64::oneshot_with_seed(key_hash, node.as_str().as_bytes())
}

/// One candidate by softmax(score / T); returns an index into `left`.
fn softmax_pick(temperature: f64, scored: &[Scored], left: &[usize], draws: &mut Draws) -> usize {
    let best = left
        .iter()
        .map(|i| scored[*i].score)
        .fold(f64::MIN, f64::max);
    let weights: Vec<f64> = left
        .iter()
        .map(|i| ((scored[*i].score - best) / temperature).exp())
        .collect();
    let total: f64 = weights.iter().sum();
    let mut at = draws.unit() * total;
    for (k, w) in weights.iter().enumerate() {
        if at < *w {
            return k;
        }
        at -= w;
    }
    left.len() - 1
}
