//! `c3`: C3's replica ranking (Suresh et al., NSDI 2015) in Elasticsearch's
//! adaptive-replica-selection form (no rate control).
//!
//! `rank = R - 1/mu + qhat^3 / mu`, with `qhat = 1 + os * n + q`: `R` the
//! response-time EWMA and `1/mu` the service-time EWMA (both alpha 0.3, in
//! microseconds), `os` this coordinator's outstanding requests to the
//! replica, `n` the number of coordinators, `q` the replica's piggybacked
//! queue (EWMA). Smaller ranks first. A replica with no figures yet ranks
//! 0 (it is tried, as Elasticsearch does). The stateful side relaxes the
//! unselected replicas' figures toward the chosen one's so none starves.

use crate::RouterSettings;
use crate::decide::{Decision, Exclusion, Hedge, assemble, plain_scored};
use crate::inputs::{CandidateInputs, Inputs};

/// C3's rank of one candidate, microseconds (smaller is better).
pub fn rank(c: &CandidateInputs, coordinators: u32) -> f64 {
    let response = c.modes.c3_response_us.unwrap_or(0.0);
    let service = c.modes.c3_service_us.unwrap_or(0.0);
    let queue = c.modes.c3_queue.unwrap_or(0.0);
    let qhat = 1.0 + f64::from(c.in_flight) * f64::from(coordinators.max(1)) + queue;
    response - service + qhat.powi(3) * service
}

/// C3's order.
pub fn decide(_settings: &RouterSettings, inputs: &Inputs) -> Decision {
    let scored: Vec<_> = inputs
        .candidates
        .iter()
        .map(|c| {
            let excluded = (!c.alive).then_some(Exclusion::Dead);
            plain_scored(c, excluded, rank(c, inputs.coordinators))
        })
        .collect();
    let mut first: Vec<_> = scored
        .iter()
        .filter(|s| s.excluded.is_none())
        .map(|s| (s.score, s.id.clone()))
        .collect();
    first.sort_by(|a, b| a.0.total_cmp(&b.0));
    let first = first.into_iter().map(|(_, id)| id).collect();
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
