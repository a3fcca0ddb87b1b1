//! [`Scorer::rank`]: the hard filter, the latency rank score and the final
//! order (rules in the `scorer` module doc).

use std::time::Instant;

use super::{Candidate, ExcludeReason, LatencyInputs, Op, Ranked, Scorer, op_index};
use crate::breaker::BreakerState;

impl Scorer {
    /// Orders `candidates` (in preference-list order) for one `op` at `now`:
    /// candidates that pass the hard filter by descending score, near-ties in
    /// input order, then the excluded ones in input order. Every entry
    /// carries the numbers that decided its place.
    pub fn rank(&self, candidates: &[Candidate], op: Op, now: Instant) -> Vec<Ranked> {
        let c = &self.config;
        let local: Vec<&_> = candidates
            .iter()
            .filter(|x| x.is_local)
            .map(|x| &x.id)
            .collect();
        let cluster_mean = self.mean_excluding(op, &local);
        let mut out: Vec<Ranked> = candidates
            .iter()
            .enumerate()
            .map(|(position, cand)| {
                let peer = self.peers.get(&cand.id);
                let ewma = peer.map(|p| p.latency[op_index(op)]).unwrap_or_default();
                let (requests, failures) = peer.map_or((0, 0), |p| p.window.counts(now));
                let rate = if requests == 0 {
                    0.0
                } else {
                    failures as f64 / requests as f64
                };
                let breaker = peer.map_or(BreakerState::Closed, |p| p.breaker.state(now));
                let excluded = if !cand.alive {
                    Some(ExcludeReason::Dead)
                } else if let BreakerState::Open { until } = breaker {
                    Some(ExcludeReason::BreakerOpen { until })
                } else if breaker
                    == (BreakerState::HalfOpen {
                        probe_in_flight: true,
                    })
                {
                    Some(ExcludeReason::ProbeInFlight)
                } else if requests >= c.min_failure_requests && rate > c.max_failure_rate {
                    Some(ExcludeReason::FailureRate { rate, requests })
                } else {
                    None
                };
                let trusted = ewma.samples() >= c.min_latency_samples;
                let used_us = if trusted {
                    ewma.value_us()
                } else {
                    cluster_mean
                };
                Ranked {
                    id: cand.id.clone(),
                    position,
                    is_local: cand.is_local || cand.id == self.local,
                    score: 0.0,
                    excluded,
                    latency_score: 0.0,
                    latency: LatencyInputs {
                        own_us: ewma.value_us(),
                        samples: ewma.samples(),
                        cluster_mean_us: cluster_mean,
                        used_us,
                        substituted: !trusted && used_us.is_some(),
                    },
                    failure_rate: rate,
                    window_requests: requests,
                    breaker,
                    needs_probe: breaker
                        == (BreakerState::HalfOpen {
                            probe_in_flight: false,
                        }),
                }
            })
            .collect();

        // Candidates without any value (no cluster mean yet) are ranked by
        // the mean of those that have one, so that they neither win nor lose
        // by being unmeasured.
        let known: Vec<f64> = out
            .iter()
            .filter(|r| r.excluded.is_none())
            .filter_map(|r| r.latency.used_us)
            .collect();
        if !known.is_empty() && known.len() < out.iter().filter(|r| r.excluded.is_none()).count() {
            let fallback = known.iter().sum::<f64>() / known.len() as f64;
            for r in out.iter_mut().filter(|r| r.excluded.is_none()) {
                if r.latency.used_us.is_none() {
                    r.latency.used_us = Some(fallback);
                    r.latency.substituted = true;
                }
            }
        }

        // Latency rank score: the number of candidates more than `tol`
        // faster decides the rank; best 1.0 ... worst `worst_rank_score`.
        let values: Vec<f64> = out
            .iter()
            .filter(|r| r.excluded.is_none())
            .map(|r| r.latency.used_us.unwrap_or(0.0))
            .collect();
        let k = values.len();
        for r in out.iter_mut().filter(|r| r.excluded.is_none()) {
            let v = r.latency.used_us.unwrap_or(0.0);
            let faster = values
                .iter()
                .filter(|&&x| x < v * (1.0 - c.tie_tolerance))
                .count();
            r.latency_score = if k <= 1 {
                1.0
            } else {
                1.0 - (1.0 - c.worst_rank_score) * faster as f64 / (k - 1) as f64
            };
            // The only dimension so far.
            r.score = r.latency_score;
        }

        // Final order: repeatedly take the earliest remaining candidate
        // whose score is within the tolerance of the best remaining score.
        let (mut eligible, excluded): (Vec<Ranked>, Vec<Ranked>) =
            out.into_iter().partition(|r| r.excluded.is_none());
        let mut ordered = Vec::with_capacity(candidates.len());
        while !eligible.is_empty() {
            let best = eligible.iter().map(|r| r.score).fold(f64::MIN, f64::max);
            let pick = eligible
                .iter()
                .position(|r| r.score >= best * (1.0 - c.tie_tolerance))
                .unwrap_or(0);
            ordered.push(eligible.remove(pick));
        }
        ordered.extend(excluded);
        ordered
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use kv_types::NodeId;

    use super::super::{Outcome, ScorerSettings};
    use super::*;

    fn id(s: &str) -> NodeId {
        NodeId::new(s).unwrap()
    }

    fn cand(s: &str) -> Candidate {
        Candidate {
            id: id(s),
            alive: true,
            is_local: false,
        }
    }

    fn scorer(min_samples: u64) -> Scorer {
        Scorer::new(
            ScorerSettings {
                min_latency_samples: min_samples,
                ..ScorerSettings::default()
            },
            id("me"),
        )
        .unwrap()
    }

    fn feed(s: &mut Scorer, peer: &str, op: Op, us: u64, n: usize, now: Instant) {
        for _ in 0..n {
            let latency = Duration::from_micros(us);
            s.record(&id(peer), op, Outcome::Ok { latency }, now);
        }
    }

    fn order(r: &[Ranked]) -> Vec<&str> {
        r.iter().map(|x| x.id.as_str()).collect()
    }

    #[test]
    fn no_samples_anywhere_keeps_the_preference_order() {
        let s = scorer(1000);
        let r = s.rank(&[cand("c"), cand("a"), cand("b")], Op::Get, Instant::now());
        assert_eq!(order(&r), ["c", "a", "b"]);
        assert!(r.iter().all(|x| x.score == 1.0 && x.excluded.is_none()));
    }

    #[test]
    fn order_follows_the_ewma_of_the_operation() {
        let now = Instant::now();
        let mut s = scorer(10);
        feed(&mut s, "a", Op::Get, 900, 20, now);
        feed(&mut s, "b", Op::Get, 100, 20, now);
        feed(&mut s, "c", Op::Get, 500, 20, now);
        // Puts are the other way round.
        feed(&mut s, "a", Op::Put, 100, 20, now);
        feed(&mut s, "b", Op::Put, 900, 20, now);
        feed(&mut s, "c", Op::Put, 500, 20, now);
        let cands = [cand("a"), cand("b"), cand("c")];
        let r = s.rank(&cands, Op::Get, now);
        assert_eq!(order(&r), ["b", "c", "a"]);
        for (x, want) in r.iter().zip([1.0, 0.55, 0.1]) {
            assert!((x.score - want).abs() < 1e-9, "{x:?}");
        }
        assert_eq!(order(&s.rank(&cands, Op::Put, now)), ["a", "c", "b"]);
    }

    #[test]
    fn latencies_within_five_percent_keep_the_input_order() {
        let now = Instant::now();
        let mut s = scorer(10);
        feed(&mut s, "a", Op::Get, 1030, 20, now);
        feed(&mut s, "b", Op::Get, 1000, 20, now);
        let r = s.rank(&[cand("a"), cand("b")], Op::Get, now);
        assert_eq!(order(&r), ["a", "b"]);
        assert_eq!(r[0].score, r[1].score);
    }

    #[test]
    fn few_samples_use_the_cluster_mean() {
        let now = Instant::now();
        let mut s = scorer(1000);
        feed(&mut s, "a", Op::Get, 100, 1000, now);
        feed(&mut s, "b", Op::Get, 300, 1000, now);
        // c looks fastest, but with 999 samples it is ranked at the mean
        // (200 us): between a and b.
        feed(&mut s, "c", Op::Get, 10, 999, now);
        let r = s.rank(&[cand("c"), cand("b"), cand("a")], Op::Get, now);
        assert_eq!(order(&r), ["a", "c", "b"]);
        let c = &r[1];
        assert!(c.latency.substituted);
        assert_eq!(c.latency.samples, 999);
        assert!((c.latency.used_us.unwrap() - 200.0).abs() < 1e-6);
        assert!((c.latency.own_us.unwrap() - 10.0).abs() < 1e-6);
        // One more sample and its own EWMA counts.
        feed(&mut s, "c", Op::Get, 10, 1, now);
        let r = s.rank(&[cand("c"), cand("b"), cand("a")], Op::Get, now);
        assert_eq!(order(&r), ["c", "a", "b"]);
    }

    #[test]
    fn the_local_node_is_left_out_of_the_cluster_mean() {
        let now = Instant::now();
        let mut s = scorer(5);
        feed(&mut s, "me", Op::Get, 1, 10, now);
        feed(&mut s, "a", Op::Get, 400, 10, now);
        assert_eq!(s.cluster_mean_us(Op::Get), Some(400.0));
    }

    #[test]
    fn dead_nodes_are_excluded_but_kept_last() {
        let now = Instant::now();
        let mut s = scorer(10);
        feed(&mut s, "a", Op::Get, 100, 20, now);
        feed(&mut s, "b", Op::Get, 900, 20, now);
        let mut a = cand("a");
        a.alive = false;
        let r = s.rank(&[a, cand("b"), cand("c")], Op::Get, now);
        // c, unmeasured, is ranked at the cluster mean (500 us) ahead of b.
        assert_eq!(order(&r), ["c", "b", "a"]);
        assert_eq!(r[2].excluded, Some(ExcludeReason::Dead));
        assert_eq!(r[2].score, 0.0);
        assert_eq!(r[2].position, 0);
    }

    #[test]
    fn breaker_open_half_open_closed() {
        let t0 = Instant::now();
        let s5 = Duration::from_secs(5);
        let mut s = scorer(1000);
        let b = id("b");
        for _ in 0..5 {
            s.record(&b, Op::Get, Outcome::Timeout, t0);
        }
        let cands = [cand("b"), cand("c")];
        let r = s.rank(&cands, Op::Get, t0);
        assert_eq!(order(&r), ["c", "b"]);
        assert_eq!(
            r[1].excluded,
            Some(ExcludeReason::BreakerOpen { until: t0 + s5 })
        );
        assert!(!s.try_acquire_probe(&b, t0));
        // After the cool-down: half-open, eligible, one probe only.
        let t1 = t0 + s5;
        let r = s.rank(&cands, Op::Get, t1);
        assert_eq!(r[0].id, b);
        assert!(r[0].needs_probe && r[0].excluded.is_none());
        assert!(s.try_acquire_probe(&b, t1));
        assert!(!s.try_acquire_probe(&b, t1));
        let r = s.rank(&cands, Op::Get, t1);
        assert_eq!(r[1].excluded, Some(ExcludeReason::ProbeInFlight));
        // The probe fails: open again.
        s.record(&b, Op::Get, Outcome::Error, t1);
        assert!(matches!(s.breaker_state(&b, t1), BreakerState::Open { .. }));
        // Next probe succeeds: closed.
        let t2 = t1 + s5;
        assert!(s.try_acquire_probe(&b, t2));
        let latency = Duration::from_micros(100);
        s.record(&b, Op::Get, Outcome::Ok { latency }, t2);
        assert_eq!(s.breaker_state(&b, t2), BreakerState::Closed);
        let r = s.rank(&cands, Op::Get, t2);
        assert!(r.iter().all(|x| x.excluded.is_none()));
    }

    #[test]
    fn failure_rate_excludes_until_the_window_expires() {
        let t0 = Instant::now();
        let mut s = scorer(1000);
        let a = id("a");
        // 4 errors among 10 requests, never 5 in a row: the breaker stays
        // closed, the failure rate (40%) excludes.
        for i in 0..10 {
            let outcome = if i % 5 < 2 {
                Outcome::Error
            } else {
                Outcome::Ok {
                    latency: Duration::from_micros(100),
                }
            };
            s.record(&a, Op::Put, outcome, t0);
        }
        assert_eq!(s.breaker_state(&a, t0), BreakerState::Closed);
        let r = s.rank(&[cand("a"), cand("b")], Op::Put, t0);
        assert_eq!(order(&r), ["b", "a"]);
        assert!(matches!(
            r[1].excluded,
            Some(ExcludeReason::FailureRate { requests: 10, .. })
        ));
        // Nine failed requests are not enough evidence (the breaker is set
        // out of the way to test the rate rule alone).
        let mut lax = Scorer::new(
            ScorerSettings {
                breaker_threshold: 100,
                ..ScorerSettings::default()
            },
            id("me"),
        )
        .unwrap();
        for _ in 0..9 {
            lax.record(&a, Op::Put, Outcome::Timeout, t0);
        }
        assert!(lax.rank(&[cand("a")], Op::Put, t0)[0].excluded.is_none());
        // A minute later the window has expired.
        let later = t0 + Duration::from_secs(60);
        let r = s.rank(&[cand("a"), cand("b")], Op::Put, later);
        assert_eq!(order(&r), ["a", "b"]);
        assert_eq!(r[0].window_requests, 0);
    }
}
