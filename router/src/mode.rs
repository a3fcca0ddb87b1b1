//! The routing modes: ours and the published schemes we measure against,
//! all computed from the same inputs ([`crate::Inputs`]) so that one
//! benchmark run compares like with like.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::Error;

/// How a coordinator orders a key's replicas.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// The preference-list order (Dynamo's own: the first healthy N).
    Plain,
    /// Cassandra's dynamic snitch: median latency relative to the worst,
    /// preference order kept unless a replica is more than the badness
    /// threshold worse.
    Snitch,
    /// ScyllaDB's heat-weighted load balancing: reads with probability
    /// proportional to 1/(1 - hit ratio), each capped at 1/R.
    Hwlb,
    /// C3 in Elasticsearch's adaptive-replica-selection form: response
    /// time, service time and a cubic queue penalty.
    C3,
    /// Power of two choices with peak-EWMA latency x (in-flight + 1)
    /// (Finagle, linkerd, tower).
    P2c,
    /// Ours: load, latency, cache heat and availability, with penalties
    /// (docs/design.md, "The scoring model").
    #[default]
    Scoring,
}

impl Mode {
    /// Every mode, in the order benchmarks list them.
    pub const ALL: [Mode; 6] = [
        Mode::Plain,
        Mode::Snitch,
        Mode::Hwlb,
        Mode::C3,
        Mode::P2c,
        Mode::Scoring,
    ];

    /// The name used in config files, flags and reports.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Plain => "plain",
            Mode::Snitch => "snitch",
            Mode::Hwlb => "hwlb",
            Mode::C3 => "c3",
            Mode::P2c => "p2c",
            Mode::Scoring => "scoring",
        }
    }
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Mode {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self, Error> {
        Mode::ALL
            .into_iter()
            .find(|m| m.as_str() == s)
            .ok_or_else(|| {
                Error::InvalidConfig(format!(
                    "unknown routing mode {s:?}: use plain, snitch, hwlb, c3, p2c or scoring"
                ))
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_parse_and_print() {
        for m in Mode::ALL {
            assert_eq!(m.as_str().parse::<Mode>().unwrap(), m);
        }
        assert!("random".parse::<Mode>().is_err());
        assert_eq!(Mode::default(), Mode::Scoring);
    }
}
