//! The kinds of fault the nemesis may inject, as named on the command line
//! (`--faults crash,partition,...`).

use std::collections::BTreeSet;
use std::fmt;
use std::str::FromStr;

use crate::Error;

/// One kind of fault.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum FaultKind {
    /// A node crashes and later restarts on its disk; with a seeded chance
    /// it loses a seeded suffix of its unflushed writes.
    Crash,
    /// The designated victim node crashes and restarts on an empty disk (a
    /// new incarnation). At most once per seed: two replicas losing
    /// durable data is beyond what N=3, W=2 promises.
    Wipe,
    /// A node freezes (no message in or out) and later resumes.
    Pause,
    /// Links are cut: two halves, a bridge node, one node isolated, or one
    /// direction only.
    Partition,
    /// Links delay (1-20 ms), jitter (up to 30 ms, so messages overtake
    /// each other) and drop (up to 30%) messages.
    Link,
    /// A node's wall clock jumps by seconds to hours, either way.
    Clock,
    /// A node's next flushes fail (EIO, ENOSPC), or the victim's record of
    /// a touched key is damaged (a read returns a corrupt record).
    Storage,
    /// A membership change: a new node joins (up to 7), an UP node drains
    /// (when at least 3 others stay UP), or the crashed victim is removed
    /// for good by an admin (its data is gone; also only when 3 UP members
    /// stay).
    Membership,
}

/// Every kind, in order.
pub const ALL: [FaultKind; 8] = [
    FaultKind::Crash,
    FaultKind::Wipe,
    FaultKind::Pause,
    FaultKind::Partition,
    FaultKind::Link,
    FaultKind::Clock,
    FaultKind::Storage,
    FaultKind::Membership,
];

impl FaultKind {
    /// The name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            FaultKind::Crash => "crash",
            FaultKind::Wipe => "wipe",
            FaultKind::Pause => "pause",
            FaultKind::Partition => "partition",
            FaultKind::Link => "link",
            FaultKind::Clock => "clock",
            FaultKind::Storage => "storage",
            FaultKind::Membership => "membership",
        }
    }
}

impl fmt::Display for FaultKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A set of fault kinds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Faults(pub BTreeSet<FaultKind>);

impl Faults {
    /// Every kind.
    pub fn all() -> Self {
        Faults(ALL.into_iter().collect())
    }

    /// No fault at all.
    pub fn none() -> Self {
        Faults(BTreeSet::new())
    }
}

impl FromStr for Faults {
    type Err = Error;

    /// `all`, `none`, or kinds separated by commas.
    fn from_str(s: &str) -> Result<Self, Error> {
        match s.trim() {
            "all" => return Ok(Faults::all()),
            "none" | "" => return Ok(Faults::none()),
            _ => {}
        }
        let mut set = BTreeSet::new();
        for name in s.split(',').map(str::trim) {
            let kind = ALL.into_iter().find(|k| k.name() == name).ok_or_else(|| {
                let known: Vec<&str> = ALL.iter().map(|k| k.name()).collect();
                Error::Invalid(format!(
                    "unknown fault {name:?} (known: {}, all, none)",
                    known.join(", ")
                ))
            })?;
            set.insert(kind);
        }
        Ok(Faults(set))
    }
}

impl fmt::Display for Faults {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.len() == ALL.len() {
            return f.write_str("all");
        }
        if self.0.is_empty() {
            return f.write_str("none");
        }
        let names: Vec<&str> = self.0.iter().map(|k| k.name()).collect();
        f.write_str(&names.join(","))
    }
}
