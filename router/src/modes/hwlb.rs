//! `hwlb`: ScyllaDB's heat-weighted load balancing ("Making Scylla's cache
//! warm after restart", 2018): a read goes to a replica with probability
//! proportional to 1/(1 - hit ratio), so that cache misses are spread
//! evenly and a replica that restarted cold gets fewer reads until it has
//! warmed up; each probability is capped at 1/R (the excess goes to the
//! others). When every hit ratio is within 0.01 of the others it is off:
//! the preference order. Reads retry speculatively at p99, not budgeted.

use crate::RouterSettings;
use crate::decide::{Decision, Exclusion, Hedge, assemble, plain_scored};
use crate::draw::Draws;
use crate::inputs::Inputs;

/// Hit ratios this close are "equal": balancing is off.
const EQUAL: f64 = 0.01;

/// The smallest miss ratio counted (a replica hitting everything still
/// gets a finite weight).
const MIN_MISS: f64 = 0.01;

/// Read probabilities proportional to `weights`, each capped at `cap`
/// with the excess spread over the others in proportion.
pub fn capped_shares(weights: &[f64], cap: f64) -> Vec<f64> {
    let total: f64 = weights.iter().sum();
    if total <= 0.0 {
        return vec![1.0 / weights.len().max(1) as f64; weights.len()];
    }
    let mut shares: Vec<f64> = weights.iter().map(|w| w / total).collect();
    if cap * weights.len() as f64 <= 1.0 {
        return vec![1.0 / weights.len() as f64; weights.len()];
    }
    for _ in 0..weights.len() {
        let excess: f64 = shares.iter().map(|s| (s - cap).max(0.0)).sum();
        if excess <= 1e-12 {
            break;
        }
        let room: f64 = shares.iter().filter(|s| **s < cap).sum();
        shares = shares
            .iter()
            .map(|s| {
                if *s >= cap {
                    cap
                } else {
                    s + excess * s / room
                }
            })
            .collect();
    }
    shares
}

/// HWLB's order: the first replica drawn by the capped probabilities,
/// the next among the rest likewise.
pub fn decide(settings: &RouterSettings, inputs: &Inputs, draw: u64) -> Decision {
    let live: Vec<_> = inputs.candidates.iter().filter(|c| c.alive).collect();
    let ratios: Vec<f64> = live
        .iter()
        .map(|c| c.report.as_ref().map_or(0.0, |r| r.hit_ratio))
        .collect();
    let (lo, hi) = ratios
        .iter()
        .fold((f64::MAX, f64::MIN), |(lo, hi), r| (lo.min(*r), hi.max(*r)));
    let on = live.len() > 1 && hi - lo > EQUAL;
    let weights: Vec<f64> = ratios
        .iter()
        .map(|h| 1.0 / (1.0 - h).max(MIN_MISS))
        .collect();
    let shares = capped_shares(&weights, 1.0 / inputs.r.max(1) as f64);
    let scored: Vec<_> = inputs
        .candidates
        .iter()
        .map(|c| {
            let share = live
                .iter()
                .position(|l| l.id == c.id)
                .map_or(0.0, |i| shares[i]);
            plain_scored(c, (!c.alive).then_some(Exclusion::Dead), share)
        })
        .collect();
    let mut first = Vec::new();
    if on {
        let mut draws = Draws::new(draw);
        let mut left: Vec<(f64, _)> = live
            .iter()
            .zip(&shares)
            .map(|(c, s)| (*s, c.id.clone()))
            .collect();
        while !left.is_empty() {
            let total: f64 = left.iter().map(|(s, _)| s).sum();
            let mut at = draws.unit() * total;
            let mut pick = left.len() - 1;
            for (i, (s, _)) in left.iter().enumerate() {
                if at < *s {
                    pick = i;
                    break;
                }
                at -= s;
            }
            first.push(left.remove(pick).1);
        }
    }
    Decision {
        mode: inputs.mode,
        order: assemble(inputs, first, &scored),
        scored,
        fallback: None,
        probes: Vec::new(),
        latency_probe: None,
        hedge: Hedge::Speculative {
            quantile: settings.speculative_quantile,
        },
    }
}
