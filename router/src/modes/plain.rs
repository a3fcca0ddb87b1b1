//! `plain`: the preference-list order, dead replicas left out (Dynamo's
//! "first N healthy nodes").

use crate::decide::{Decision, Exclusion, Hedge, assemble, plain_scored};
use crate::inputs::Inputs;

/// The preference-list order of the live candidates.
pub fn decide(inputs: &Inputs) -> Decision {
    let scored: Vec<_> = inputs
        .candidates
        .iter()
        .map(|c| plain_scored(c, (!c.alive).then_some(Exclusion::Dead), 0.0))
        .collect();
    Decision {
        mode: inputs.mode,
        order: assemble(inputs, Vec::new(), &scored),
        scored,
        fallback: None,
        probes: Vec::new(),
        latency_probe: None,
        hedge: Hedge::Never,
    }
}
