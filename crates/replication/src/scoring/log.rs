//! The decision log: a sample of the decisions this node made (by
//! default one in 1,000, `[router] decision_log_rate`), each with its
//! settings, inputs and random draw, so that `kvctl decisions` shows it and
//! it replays exactly through `kv_router::decide`. Bounded: the newest
//! [`CAPACITY`] are kept.

use std::collections::VecDeque;

use kv_router::{Decision, Inputs, RouterSettings};
use kv_types::NodeId;
use serde::{Deserialize, Serialize};

/// Decisions kept at most.
pub const CAPACITY: usize = 1000;

/// One decision with everything it was made from.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DecisionRecord {
    /// When it was made, ms since the Unix epoch (this node's clock).
    pub at_ms: u64,
    /// The coordinator that made it.
    pub node: NodeId,
    /// The key.
    pub key: Vec<u8>,
    /// The router settings it was made with.
    pub settings: RouterSettings,
    /// Its inputs.
    pub inputs: Inputs,
    /// Its random draw.
    pub draw: u64,
    /// What was decided.
    pub decision: Decision,
}

impl DecisionRecord {
    /// Decides again from the recorded settings, inputs and draw.
    pub fn replay(&self) -> Decision {
        kv_router::decide(&self.settings, &self.inputs, self.draw)
    }
}

/// The newest sampled decisions.
#[derive(Debug, Default)]
pub struct DecisionLog {
    records: VecDeque<DecisionRecord>,
}

impl DecisionLog {
    /// Keeps `record`, dropping the oldest beyond `CAPACITY` (1,000).
    pub fn push(&mut self, record: DecisionRecord) {
        if self.records.len() == CAPACITY {
            self.records.pop_front();
        }
        self.records.push_back(record);
    }

    /// The newest `last` records of `key` (of any key when `None`), oldest
    /// first.
    pub fn matching(&self, key: Option<&[u8]>, last: usize) -> Vec<DecisionRecord> {
        let mut out: Vec<DecisionRecord> = self
            .records
            .iter()
            .rev()
            .filter(|r| key.is_none_or(|k| r.key == k))
            .take(last)
            .cloned()
            .collect();
        out.reverse();
        out
    }
}
