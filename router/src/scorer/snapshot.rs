//! [`Scorer::snapshot`]: the inputs of one decision, from what the caller's
//! membership shows and what the scorer learned.

use std::sync::Arc;
use std::time::Instant;

use kv_types::NodeId;

use super::{Op, Peer, Scorer, op_index};
use crate::breaker::BreakerState;
use crate::inputs::{
    BreakerInput, CandidateInputs, Inputs, ModeInputs, ReportInputs, STUCK_FACTOR,
};

/// One candidate replica as the caller's membership shows it.
#[derive(Clone, Debug, PartialEq)]
pub struct Candidate {
    /// The node.
    pub id: NodeId,
    /// Whether the failure detector believes it alive.
    pub alive: bool,
    /// Whether it is UP (not JOINING or DRAINING): slow start begins when
    /// a node turns up and alive again.
    pub up: bool,
    /// Whether its phi is above half the conviction threshold.
    pub suspect: bool,
    /// Its zone.
    pub zone: Arc<str>,
    /// Its host.
    pub host: Arc<str>,
    /// Its last report (with `hot` for this key); the coordinator's own
    /// figures, fresh, for itself.
    pub report: Option<ReportInputs>,
    /// Hints other nodes hold for it.
    pub hints_pending: u64,
    /// The generation of its process as the membership shows it
    /// (chitchat's generation id, larger for each start of the node;
    /// `None` where the membership does not say): a larger one than last
    /// seen is a restart, however quick, while an unchanged one across a
    /// liveness flap is the same process paused or cut off.
    pub generation: Option<u64>,
}

/// What a decision is for.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Ask<'a> {
    /// The operation.
    pub op: Op,
    /// xxh3 of the key.
    pub key_hash: u64,
    /// Replicas a read asks.
    pub r: usize,
    /// The coordinator's zone.
    pub zone: &'a Arc<str>,
    /// Members of the ring (C3's `n` when not configured).
    pub members: u32,
}

impl Scorer {
    /// The inputs of one decision over `candidates` (in preference-list
    /// order), at `now`. Runs the periodic upkeep first when a report
    /// period has passed.
    pub fn snapshot(&mut self, candidates: &[Candidate], ask: Ask<'_>, now: Instant) -> Inputs {
        self.upkeep(now);
        for c in candidates {
            self.see(c, now);
        }
        let cluster_mean = self.cluster_mean_us(ask.op);
        let blacklisted = self.blacklisted_hosts(now);
        // Looked up once: the table is large and the slot random (a cache
        // miss per lookup).
        let served_by = self.affinity.get(ask.key_hash);
        let built = candidates
            .iter()
            .map(|c| {
                // Its host is out when two or more of its nodes are.
                let host_out = blacklisted.iter().filter(|h| **h == &*c.host).count() >= 2;
                let affinity = served_by == Some(&c.id);
                self.candidate(c, ask, cluster_mean, host_out, affinity, now)
            })
            .collect();
        let cluster_p99 = self.quantiles[op_index(ask.op)].quantile(0.99, now);
        Inputs {
            mode: self.settings.mode,
            op: ask.op,
            key_hash: ask.key_hash,
            local_zone: Arc::clone(ask.zone),
            r: ask.r,
            cluster_p99_us: cluster_p99,
            coordinators: if self.settings.coordinators > 0 {
                self.settings.coordinators
            } else {
                ask.members.max(1)
            },
            candidates: built,
        }
    }

    /// Notes what the membership shows of `c`: host, liveness, and when it
    /// turned up and alive again (slow start). A node already up when
    /// first seen ramps only when it appears more than a report period
    /// after this scorer's first decision: every member of a running
    /// cluster is a candidate of some key within the first period, so one
    /// that shows up later is new to the ring, a joiner that was never a
    /// candidate while it was JOINING (without this, a joiner took reads
    /// at once, at more than its fair share: docs/benchmarks.md,
    /// "Per-key ties").
    ///
    /// A member UP in the membership but not alive in every sighting so
    /// far, that turns alive within the first `freshness_periods` report
    /// periods, does not ramp either: that was this process's first view
    /// converging (a client that has not reached a node yet, a node whose
    /// gossip has not heard from a peer yet), not a node coming back with
    /// a cold cache. Without this, the load generator of bench-router
    /// ramped two healthy nodes for ten minutes after its start, and for
    /// the keys whose other two replicas both passed them over (16% of
    /// those) it sent every request to the frozen third (seen in its
    /// decisions: 5 of 109 with the cooled, paused node first).
    ///
    /// A node that comes back (down or dead, then UP and alive again; a
    /// joiner turning UP too) also starts without a latency estimate: the
    /// one it had describes the process that stopped (or its streaming
    /// while it joined). The membership's process generation
    /// ([`Candidate::generation`]) tells the two kinds of coming back
    /// apart where it is known: a new generation is a restart, wiped and
    /// ramped even when it was too quick for the failure detector to see
    /// the node down (a cold cache and an estimate of the old process); a
    /// node that was UP with the same generation in every sighting since
    /// it was last up and alive is the same process, paused or cut off,
    /// whose estimate still describes it (a node that pauses again and
    /// again stays ranked by its pauses). A sighting without a generation
    /// (the membership does not know it, or a client's own mark of a
    /// connection failure decided the liveness) or as JOINING or DRAINING
    /// makes the coming back wipe the estimate. With no samples it is
    /// ranked at the cluster mean ([`Scorer::snapshot`]'s rule for fewer
    /// than `min_latency_samples` answers) while the slow start caps its
    /// share, and below the mean at once if its first answers are slow.
    /// Kept, the estimate of its last answers (203 ms, one answered while
    /// it shut down) ranked it last for 48 s after a restart, while it
    /// drifted toward the mean a tenth per period: no other coordinator
    /// sent it a read, and its cache stayed cold (docs/benchmarks.md, "a
    /// restarted node's latency is forgotten").
    fn see(&mut self, c: &Candidate, now: Instant) {
        let first_at = *self.first_at.get_or_insert(now);
        let since_first = now.saturating_duration_since(first_at);
        let newcomer = since_first > self.settings.report_period;
        let settling = since_first <= self.settings.report_period * self.settings.freshness_periods;
        let p = self.peer_mut(&c.id);
        let up = c.up && c.alive;
        let unreached = c.up && !c.alive;
        let first_view = p.only_seen_unreached == Some(true);
        p.only_seen_unreached = Some(p.only_seen_unreached.unwrap_or(true) && unreached);
        let restarted = matches!((p.generation, c.generation), (Some(old), Some(new)) if new > old);
        let unchanged =
            p.unchanged_since_up && c.up && c.generation.is_some() && c.generation == p.generation;
        if let Some(new) = c.generation {
            p.generation = Some(p.generation.map_or(new, |old| old.max(new)));
        }
        p.unchanged_since_up = up || unchanged;
        if restarted {
            p.forget_latency();
        }
        match (p.seen_up, up) {
            (Some(false), true) if settling && first_view => {}
            (Some(false), true) => {
                p.up_since = Some(now);
                // A liveness flap of the same process keeps its estimate.
                if !unchanged {
                    p.forget_latency();
                }
            }
            (Some(true), true) if restarted => p.up_since = Some(now),
            (None, true) if newcomer => p.up_since = Some(now),
            (_, false) => p.up_since = None,
            _ => {}
        }
        p.seen_up = Some(up);
        if p.host.as_deref() != Some(&*c.host) {
            p.host = Some(Arc::clone(&c.host));
        }
        p.alive = c.alive;
    }

    /// Whether `p` is blacklisted (dead, breaker open, failure rate).
    fn blacklisted(&self, p: &Peer, now: Instant) -> bool {
        if !p.alive || matches!(p.breaker.state(now), BreakerState::Open { .. }) {
            return true;
        }
        if !p.window.may_have_failures(now) {
            return false;
        }
        let (requests, failures) = p.window.counts(now);
        let rate = if requests == 0 {
            0.0
        } else {
            failures as f64 / requests as f64
        };
        requests >= self.settings.min_failure_requests && rate > self.settings.max_failure_rate
    }

    /// The host of every blacklisted peer, once per decision rather than
    /// once per candidate (usually none: nothing is allocated).
    fn blacklisted_hosts(&self, now: Instant) -> Vec<&str> {
        self.peers
            .values()
            .filter(|p| self.blacklisted(p, now))
            .filter_map(|p| p.host.as_deref())
            .collect()
    }

    fn candidate(
        &self,
        c: &Candidate,
        ask: Ask<'_>,
        cluster_mean: Option<f64>,
        host_out: bool,
        affinity: bool,
        now: Instant,
    ) -> CandidateInputs {
        let s = &self.settings;
        let local = c.id == self.local;
        // `snapshot` has seen every candidate, so each has an entry; one
        // that had none would read as a peer nothing is known of.
        let unseen;
        let p = match self.peers.get(&c.id) {
            Some(p) => p,
            None => {
                unseen = Peer::new(s);
                &unseen
            }
        };
        let breaker = match p.breaker.state(now) {
            BreakerState::Closed => BreakerInput::Closed,
            BreakerState::Open { until } => BreakerInput::Open {
                remaining_ms: u64::try_from(until.saturating_duration_since(now).as_millis())
                    .unwrap_or(u64::MAX),
            },
            BreakerState::HalfOpen { probe_in_flight } => {
                if probe_in_flight {
                    BreakerInput::Probing
                } else {
                    BreakerInput::HalfOpen
                }
            }
        };
        let (window_requests, window_failures) = p.window.counts(now);
        let ewma = p.latency[op_index(ask.op)];
        let own = ewma.value_us();
        let latency_us = if local {
            // The local replica is ranked by what its in-process calls
            // take, which is what a read served there will take: it pays
            // no round trip, and its latency stands beside the peers'
            // round trips as it is. Ranking it as if it paid one (its own
            // time plus the median network overhead) left its rank to the
            // noise of the peers' EWMAs: a few percent moved it from 1.0
            // to 0.55 among three, more than the hop credit, and about a
            // tenth of R=1 reads went to a peer at twice the cluster CPU
            // (docs/benchmarks.md, set 6). A local replica that is slow
            // (its own latency above a peer's round trip, or its oldest
            // request's age) still ranks below that peer.
            own
        } else if ewma.samples() >= s.min_latency_samples {
            own
        } else {
            // Too few samples to rank it above the cluster mean (a
            // newcomer's few lucky answers must not draw every request),
            // but enough to rank it below: a replica slower than the mean
            // is not made to look average. Taking the mean alone did
            // that to a CPU-capped replica that was avoided and so never
            // reached the sample count: a client kept sending it writes,
            // and their p99.9 was 10x the snitch's (docs/benchmarks.md,
            // "slow-node-cpu diagnosis").
            match (cluster_mean, own) {
                (Some(mean), Some(own)) => Some(mean.max(own)),
                (mean, own) => mean.or(own),
            }
        };
        let abandoned = p
            .abandoned
            .filter(|(_, until)| now < *until)
            .map(|(age, _)| age);
        let oldest_sent = p.oldest_sent();
        let overdue = overdue(p, oldest_sent, now);
        let oldest_us = oldest_sent
            .into_iter()
            .flatten()
            .min()
            .map(|sent| now.saturating_duration_since(sent))
            .into_iter()
            .chain(abandoned)
            .max()
            .map(|age| age.as_secs_f64() * 1e6);
        // Kept out: remote, past its slow start (a restarted node's first
        // answers are slow by design, and it must take reads to warm its
        // cache), and left out of every read's first R for a probe
        // interval. Then it is ranked by its slowest read answer since it
        // was kept out too (decayed; for writes as well: the client sends a
        // kept-out node no writes to learn from), and re-tested by a probe
        // read.
        let ramp = self.ramp(p, now);
        let probe_every = s.latency_probe;
        let kept_out = !local && ramp >= 1.0 && p.kept_out(probe_every, now);
        let peak_us = if kept_out {
            p.slowest_us(s.probe_peak_decay, now)
        } else {
            None
        };
        let probe_due = kept_out
            && ask.op == Op::Get
            && p.in_flight[op_index(Op::Get)].is_empty()
            && p.get_sent_at
                .is_none_or(|at| now.saturating_duration_since(at) >= probe_every);
        let ttl = s.report_period * s.freshness_periods;
        let feedback_fresh = p
            .feedback_at
            .is_some_and(|at| now.saturating_duration_since(at) <= ttl);
        let (queue, service_us) = if feedback_fresh {
            (p.queue, p.service_us)
        } else {
            (None, None)
        };
        CandidateInputs {
            id: c.id.clone(),
            local,
            zone: Arc::clone(&c.zone),
            host: Arc::clone(&c.host),
            alive: c.alive || local,
            suspect: c.suspect && !local,
            breaker,
            window_requests,
            window_failures,
            host_out: !local && host_out,
            latency_us,
            latency_samples: ewma.samples(),
            oldest_us,
            abandoned: abandoned.is_some(),
            overdue,
            outrun: p.outrun_active(),
            kept_out,
            peak_us,
            probe_due,
            in_flight: u32::try_from(p.in_flight_count()).unwrap_or(u32::MAX),
            service_us: if local { own } else { service_us },
            queue,
            report: c.report.clone(),
            hints_pending: c.hints_pending,
            affinity,
            declining: p.declining,
            cooldown: self.cooldown_factor(p, now),
            ramp,
            baseline: p.baseline,
            stale_periods: c.report.as_ref().map_or(u32::MAX, |r| {
                let period = s.report_period.as_millis().max(1);
                u32::try_from(u128::from(r.age_ms) / period).unwrap_or(u32::MAX)
            }),
            modes: ModeInputs {
                snitch: p.snitch,
                c3_response_us: p.c3_response,
                c3_service_us: p.c3_service,
                c3_queue: p.c3_queue,
                peak_us: p.peak.map(|(v, _)| v),
            },
        }
    }

    /// The cool-down weight of `p` at `now`: the configured weight while it
    /// holds, then a linear ramp back to 1.
    fn cooldown_factor(&self, p: &Peer, now: Instant) -> f64 {
        let s = &self.settings;
        let Some(since) = p.cooldown_since else {
            return 1.0;
        };
        let t = now.saturating_duration_since(since);
        if t < s.cooldown_hold {
            return s.cooldown_weight;
        }
        let ramp = s.cooldown_ramp.as_secs_f64();
        let into = (t - s.cooldown_hold).as_secs_f64();
        if ramp <= 0.0 || into >= ramp {
            return 1.0;
        }
        s.cooldown_weight + (1.0 - s.cooldown_weight) * into / ramp
    }

    /// The slow-start ramp of `p` at `now`: from `slow_start_from` to 1
    /// over the slow-start window since it turned up.
    pub(super) fn ramp(&self, p: &Peer, now: Instant) -> f64 {
        let s = &self.settings;
        let Some(since) = p.up_since else {
            return 1.0;
        };
        let window = s.slow_start.as_secs_f64();
        let t = now.saturating_duration_since(since).as_secs_f64();
        if window <= 0.0 || t >= window {
            return 1.0;
        }
        s.slow_start_from + (1.0 - s.slow_start_from) * t / window
    }
}

/// Whether the score declined two periods in a row: each of the last two
/// period scores below the one before by more than `band` (a fraction).
/// A decline within the decline band is noise, not a trend: counted
/// strictly, any three scores of a steady peer fall in a row one time in
/// six, and the x0.85 penalty then outweighed the cache affinity
/// (docs/benchmarks.md, "Per-key ties").
pub(super) fn declining(history: &std::collections::VecDeque<f64>, band: f64) -> bool {
    let n = history.len();
    let fell = |from: f64, to: f64| to < from * (1.0 - band);
    n >= 3 && fell(history[n - 3], history[n - 2]) && fell(history[n - 2], history[n - 1])
}

/// The median of `values` (the upper one of an even count; `None` when
/// empty): of the score history, and of the peers' latency estimates.
pub(super) fn median(values: impl IntoIterator<Item = f64>) -> Option<f64> {
    let mut v: Vec<f64> = values.into_iter().collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    Some(v[v.len() / 2])
}

/// Whether a request in flight to `p` has waited more than [`STUCK_FACTOR`]
/// times the peer's latency estimate for its own operation: the oldest
/// read against the read estimate, the oldest write against the write
/// estimate (an operation without an estimate yet is not judged here).
///
/// A candidate's floor otherwise compares the oldest request of any kind
/// with the estimate of the operation being routed. A durable write's
/// estimate is several times a read's, so when a peer froze, a read
/// stuck on it floored it for reads within a few milliseconds but for
/// writes only once the same read was five write-times old: the writes
/// routed to it meanwhile, which are never hedged, waited out the freeze
/// (suggested by the slow-node-stall runs of docs/benchmarks.md, "Router
/// benchmark: the slow-node scenarios at 1,000,000 keys"; not proven).
fn overdue(p: &Peer, oldest_sent: [Option<Instant>; 2], now: Instant) -> bool {
    oldest_sent.iter().enumerate().any(|(i, sent)| {
        let (Some(sent), Some(estimate)) = (sent, p.latency[i].value_us()) else {
            return false;
        };
        now.saturating_duration_since(*sent).as_secs_f64() * 1e6 > STUCK_FACTOR * estimate
    })
}
