//! Back-off of background traffic (hinted handoff, anti-entropy) toward a
//! node whose storage refuses writes: its disk is full, or its engine is
//! failed and reopening. Such a node answers every write with
//! [`Error::Storage`] until space is freed; calling it again at once only
//! spends its time and ours. After a refusal the node is left alone for
//! a delay that doubles with every refusal in a row, from [`FIRST`] up to
//! [`MOST`]; the first success clears it.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use kv_types::NodeId;
use tokio::time::Instant;

use crate::Error;
use crate::network::CallError;

/// The first delay after a refusal.
pub(crate) const FIRST: Duration = Duration::from_secs(1);
/// The longest delay.
pub(crate) const MOST: Duration = Duration::from_secs(16);

/// Nodes left alone, and until when.
#[derive(Debug, Default)]
pub(crate) struct Backoff {
    /// Node -> (left alone until, the delay that got it there).
    nodes: Mutex<HashMap<NodeId, (Instant, Duration)>>,
}

impl Backoff {
    /// Whether `node` may be called at `now`.
    pub(crate) fn ready(&self, node: &NodeId, now: Instant) -> bool {
        self.lock().get(node).is_none_or(|(until, _)| now >= *until)
    }

    /// Notes the outcome of a write sent to `node` at `now`: a storage
    /// refusal backs off (returns true), success clears it, other failures
    /// (timeouts, a node down) leave it as it is: those have their own
    /// handling.
    pub(crate) fn note<T>(
        &self,
        node: &NodeId,
        now: Instant,
        result: &Result<T, CallError>,
    ) -> bool {
        match result {
            Ok(_) => {
                self.lock().remove(node);
                false
            }
            Err(CallError::Replica(e @ Error::Storage { .. })) => {
                let mut nodes = self.lock();
                let delay = nodes
                    .get(node)
                    .map_or(FIRST, |(_, last)| (*last * 2).min(MOST));
                nodes.insert(node.clone(), (now + delay, delay));
                tracing::info!(
                    %node,
                    delay_ms = delay.as_millis() as u64,
                    disk_full = e.is_disk_full(),
                    "the node's storage refuses writes; background traffic to it backs off"
                );
                true
            }
            Err(_) => false,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<NodeId, (Instant, Duration)>> {
        self.nodes.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_back_off_doubling_and_success_clears() {
        let node = NodeId::new("node3").expect("a valid id");
        let backoff = Backoff::default();
        let t0 = Instant::now();
        assert!(backoff.ready(&node, t0));
        let refused: Result<(), CallError> = Err(CallError::Replica(Error::Storage {
            node: node.clone(),
            message: "disk full on node3".into(),
        }));
        assert!(backoff.note(&node, t0, &refused));
        assert!(!backoff.ready(&node, t0 + FIRST / 2));
        assert!(backoff.ready(&node, t0 + FIRST));
        // A second refusal in a row doubles the delay.
        let t1 = t0 + FIRST;
        backoff.note(&node, t1, &refused);
        assert!(!backoff.ready(&node, t1 + FIRST));
        assert!(backoff.ready(&node, t1 + 2 * FIRST));
        // Capped.
        let mut t = t1;
        for _ in 0..10 {
            t += MOST;
            backoff.note(&node, t, &refused);
        }
        assert!(backoff.ready(&node, t + MOST));
        // A timeout changes nothing; a success clears.
        let timeout: Result<(), CallError> = Err(CallError::Unknown {
            node: node.clone(),
            reason: "timed out".into(),
        });
        assert!(!backoff.note(&node, t, &timeout));
        assert!(!backoff.ready(&node, t));
        backoff.note(&node, t, &Ok::<(), CallError>(()));
        assert!(backoff.ready(&node, t));
    }
}
