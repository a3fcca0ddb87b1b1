//! The decision log: a sample of the decisions this node made (by
//! default one in 1,000, `[router] decision_log_rate`), each with its
//! settings, inputs and random draw, so that `kvctl decisions` shows it and
//! it replays exactly through `kv_router::decide`. Bounded: the newest
//! [`CAPACITY`] are kept.

use std::collections::VecDeque;

pub use kv_router::DecisionRecord;

/// Decisions kept at most.
pub const CAPACITY: usize = 1000;

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
