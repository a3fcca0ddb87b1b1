//! `p2c`: the power of two choices with peak-EWMA latency (Mitzenmacher;
//! Finagle's `PeakEwma`, linkerd, tower). Each position of the order goes
//! to the cheaper of two candidates drawn at random among those left, the
//! cost being the peak-EWMA latency x (requests in flight + 1). A candidate
//! with no latency yet costs 0 (it is tried).

use crate::decide::{Decision, Exclusion, Hedge, assemble, plain_scored};
use crate::draw::Draws;
use crate::inputs::{CandidateInputs, Inputs};

/// P2C's cost of one candidate (smaller is better).
pub fn cost(c: &CandidateInputs) -> f64 {
    c.modes.peak_us.unwrap_or(0.0) * f64::from(c.in_flight + 1)
}

/// P2C's order.
pub fn decide(inputs: &Inputs, draw: u64) -> Decision {
    let mut draws = Draws::new(draw);
    let scored: Vec<_> = inputs
        .candidates
        .iter()
        .map(|c| plain_scored(c, (!c.alive).then_some(Exclusion::Dead), cost(c)))
        .collect();
    let mut left: Vec<(f64, _)> = scored
        .iter()
        .filter(|s| s.excluded.is_none())
        .map(|s| (s.score, s.id.clone()))
        .collect();
    let mut first = Vec::with_capacity(left.len());
    while !left.is_empty() {
        let a = draws.below(left.len());
        let pick = if left.len() == 1 {
            a
        } else {
            let mut b = draws.below(left.len() - 1);
            if b >= a {
                b += 1;
            }
            if left[b].0 < left[a].0 { b } else { a }
        };
        first.push(left.remove(pick).1);
    }
    Decision {
        mode: inputs.mode,
        order: assemble(inputs, first, &scored),
        scored,
        fallback: None,
        probes: Vec::new(),
        latency_probe: None,
        hedge: Hedge::Never,
    }
}
