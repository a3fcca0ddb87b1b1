//! What a routing client learns from a node: the ring it routes with, each
//! member's client address, liveness and latest load report, and the
//! cluster's routing mode.

use serde::{Deserialize, Serialize};

use crate::{Error, Result};

/// Members a [`RingReport`] may list (the ring's own bound on owners).
pub const MAX_RING_MEMBERS: usize = 1024;

/// Bytes of a persisted ring a [`RingReport`] may carry (1,024 members of
/// a few hundred bytes each fit many times over).
pub const MAX_PLACEMENT_BYTES: usize = 4 << 20;

/// Hot-key hashes one member's report may carry.
pub const MAX_HOT_KEYS: usize = 1024;

/// Answer to `RequestBody::Ring`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RingReport {
    /// Id of the answering node.
    pub node: String,
    /// Version of the ring in `placement` (what every answer's
    /// `ring_version` is compared with).
    pub ring_version: u64,
    /// The ring as `kv_router::Ring::to_bytes` writes it: the members with
    /// their zones, hosts, weights and statuses, and the ring settings; the
    /// client rebuilds the preference lists from it.
    pub placement: Vec<u8>,
    /// Every member the answering node knows, with what gossip says of it.
    pub members: Vec<RingMember>,
    /// The answering node's routing mode (`plain`, `snitch`, `hwlb`, `c3`,
    /// `p2c`, `scoring`).
    pub mode: String,
}

/// Answer to `RequestBody::RingV2`: a [`RingReport`] and each member's
/// process generation.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RingReportV2 {
    /// The ring report.
    pub ring: RingReport,
    /// The generation of each member's process (chitchat's generation id,
    /// larger for each start of the node), in the order of `ring.members`;
    /// `None` where the answering node has not heard it.
    pub generations: Vec<Option<u64>>,
}

impl RingReportV2 {
    /// Checks the ring report's bounds ([`RingReport::validate`]) and that
    /// there is one generation per member.
    ///
    /// # Errors
    /// [`Error::Invalid`] naming what is wrong.
    pub fn validate(&self) -> Result<()> {
        self.ring.validate()?;
        if self.generations.len() != self.ring.members.len() {
            return Err(Error::Invalid(kv_types::Error::Decode(format!(
                "ring report: {} generations for {} members",
                self.generations.len(),
                self.ring.members.len()
            ))));
        }
        Ok(())
    }
}

/// One member as the answering node sees it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RingMember {
    /// Node id.
    pub id: String,
    /// Its advertised client (QUIC) address, HOST:PORT; empty when gossip
    /// has not carried it yet.
    pub addr: String,
    /// Its zone.
    pub zone: String,
    /// Its host.
    pub host: String,
    /// JOINING, UP, DRAINING or LEFT.
    pub status: String,
    /// Liveness from the answering node's phi-accrual failure detector.
    pub alive: bool,
    /// Phi above half the conviction threshold.
    pub suspect: bool,
    /// Hints the cluster holds for it (from every member's report).
    pub hints_pending: u64,
    /// Its latest load report, if one arrived.
    pub report: Option<MemberLoad>,
}

/// A member's latest load report (the gossiped `LoadReport`), as old as
/// `age_ms` when the answer left.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MemberLoad {
    /// Age of the report when the answer was made, ms.
    pub age_ms: u64,
    /// CPU use, 0.0..=1.0.
    pub cpu: f64,
    /// Replica requests accepted and not answered.
    pub queue: u32,
    /// Writes awaiting a flush.
    pub backlog: u32,
    /// Read-cache hit ratio, 0.0..=1.0.
    pub hit_ratio: f64,
    /// Whether a repair pass runs on it.
    pub repair: bool,
    /// xxh3 hashes of its hottest keys.
    pub hot_keys: Vec<u64>,
}

impl RingReport {
    /// Checks the bounds: at most [`MAX_RING_MEMBERS`] members,
    /// [`MAX_PLACEMENT_BYTES`] of placement, [`MAX_HOT_KEYS`] hot keys per
    /// member, ratios within 0..=1.
    ///
    /// # Errors
    /// [`Error::Invalid`] naming the bound exceeded.
    pub fn validate(&self) -> Result<()> {
        let invalid = |m: String| Err(Error::Invalid(kv_types::Error::Decode(m)));
        if self.members.len() > MAX_RING_MEMBERS {
            return invalid(format!(
                "ring report: {} members exceed {MAX_RING_MEMBERS}",
                self.members.len()
            ));
        }
        if self.placement.len() > MAX_PLACEMENT_BYTES {
            return invalid(format!(
                "ring report: a placement of {} bytes exceeds {MAX_PLACEMENT_BYTES}",
                self.placement.len()
            ));
        }
        for m in &self.members {
            if let Some(load) = &m.report {
                if load.hot_keys.len() > MAX_HOT_KEYS {
                    return invalid(format!(
                        "ring report: {} lists {} hot keys, more than {MAX_HOT_KEYS}",
                        m.id,
                        load.hot_keys.len()
                    ));
                }
                let ratio = |x: f64| (0.0..=1.0).contains(&x);
                if !ratio(load.cpu) || !ratio(load.hit_ratio) {
                    return invalid(format!(
                        "ring report: {}'s cpu or hit ratio is outside 0..=1",
                        m.id
                    ));
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(members: usize, hot: usize) -> RingReport {
        RingReport {
            node: "node1".into(),
            ring_version: 1,
            placement: vec![0; 16],
            members: (0..members)
                .map(|i| RingMember {
                    id: format!("node{i}"),
                    addr: "127.0.0.1:7101".into(),
                    zone: "z".into(),
                    host: "h".into(),
                    status: "UP".into(),
                    alive: true,
                    suspect: false,
                    hints_pending: 0,
                    report: Some(MemberLoad {
                        age_ms: 10,
                        cpu: 0.5,
                        queue: 1,
                        backlog: 0,
                        hit_ratio: 0.9,
                        repair: false,
                        hot_keys: vec![7; hot],
                    }),
                })
                .collect(),
            mode: "scoring".into(),
        }
    }

    #[test]
    fn bounds_are_checked() {
        assert!(report(5, 16).validate().is_ok());
        assert!(report(MAX_RING_MEMBERS + 1, 0).validate().is_err());
        assert!(report(1, MAX_HOT_KEYS + 1).validate().is_err());
        let mut r = report(1, 0);
        r.placement = vec![0; MAX_PLACEMENT_BYTES + 1];
        assert!(r.validate().is_err());
        let mut r = report(1, 0);
        if let Some(load) = r.members[0].report.as_mut() {
            load.cpu = f64::NAN;
        }
        assert!(r.validate().is_err());
    }

    #[test]
    fn a_v2_report_has_one_generation_per_member() {
        let v2 = |members: usize, generations: usize| RingReportV2 {
            ring: report(members, 0),
            generations: vec![Some(7); generations],
        };
        assert!(v2(3, 3).validate().is_ok());
        assert!(v2(3, 2).validate().is_err());
        assert!(v2(3, 4).validate().is_err());
        // The ring report's own bounds still hold.
        assert!(
            v2(MAX_RING_MEMBERS + 1, MAX_RING_MEMBERS + 1)
                .validate()
                .is_err()
        );
    }
}
