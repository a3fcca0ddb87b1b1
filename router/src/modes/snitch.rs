//! `snitch`: Cassandra's dynamic snitch (`DynamicEndpointSnitch`, 3.x).
//!
//! Each replica's score is its median latency over a decaying window of
//! 100 samples divided by the worst replica's median, recomputed every
//! 100 ms and wiped every 10 minutes (the stateful side keeps the samples:
//! [`crate::ModeInputs::snitch`]). The preference order is kept unless a
//! replica, compared position by position with the sorted scores, is more
//! than the badness threshold (0.1) worse; then the replicas are sorted by
//! score. A replica without a score counts 0.0, as upstream. Reads retry
//! speculatively at the operation's p99, not budgeted (Cassandra's
//! `speculative_retry = 99p`).

use crate::RouterSettings;
use crate::decide::{Decision, Exclusion, Hedge, assemble, plain_scored};
use crate::inputs::Inputs;

/// The snitch's order.
pub fn decide(settings: &RouterSettings, inputs: &Inputs) -> Decision {
    let scored: Vec<_> = inputs
        .candidates
        .iter()
        .map(|c| {
            let excluded = (!c.alive).then_some(Exclusion::Dead);
            plain_scored(c, excluded, c.modes.snitch.unwrap_or(0.0))
        })
        .collect();
    let live: Vec<_> = scored.iter().filter(|s| s.excluded.is_none()).collect();
    let in_order: Vec<f64> = live.iter().map(|s| s.score).collect();
    let mut sorted = in_order.clone();
    sorted.sort_by(f64::total_cmp);
    let bad = in_order
        .iter()
        .zip(&sorted)
        .any(|(mine, best)| *mine > best * (1.0 + settings.snitch_badness));
    let mut first: Vec<_> = live.iter().map(|s| (s.score, s.id.clone())).collect();
    if bad {
        // A stable sort: equal scores keep the preference order.
        first.sort_by(|a, b| a.0.total_cmp(&b.0));
    }
    let first = first.into_iter().map(|(_, id)| id).collect();
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
