//! A logged routing decision with everything it was made from: the record
//! a node's decision log keeps (`kvctl decisions`) and a routing client
//! writes (`kvctl --log-decisions FILE`, read back with `kvctl decisions
//! --client FILE`). One shape for both, so either replays exactly through
//! [`crate::decide`].

use kv_types::NodeId;
use serde::{Deserialize, Serialize};

use crate::{Decision, Inputs, RouterSettings};

/// One decision with its settings, inputs and random draw.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DecisionRecord {
    /// When it was made, ms since the Unix epoch (the maker's clock).
    pub at_ms: u64,
    /// Who made it: the coordinating node, or `kv-client` for a client.
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
        crate::decide(&self.settings, &self.inputs, self.draw)
    }
}
