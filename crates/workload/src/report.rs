//! The verdict on a history: counts, anomalies, and the one summary line
//! that scripts parse.
//!
//! ```text
//! acked=812 failed=3 indeterminate=1 lost=0 unexpected=0 duplicated=0 p50_ms=1.912 p99_ms=9.877 p999_ms=31.004 ops_per_s=402.6
//! ```
//!
//! The keys and their order are a contract; new counters are appended at
//! the end. ` resurrected=N` always follows `ops_per_s`; ` unchecked=N` is
//! appended only when some key's final read never succeeded, and
//! ` converge_ms=… unconverged=N` only when the replicas' convergence was
//! measured (the simulation, which can read every replica's storage).

use std::fmt;

use crate::faults::FaultSplit;
use crate::stats::Stats;

/// Exit code of a run or check that found a lost, unexpected, duplicated
/// or resurrected write (or replicas that did not converge).
pub const EXIT_ANOMALY: u8 = 6;

/// Exit code when no anomaly was found but some keys could not be checked
/// (their final read never succeeded): the same code as an indeterminate
/// request, since the verdict is unknown.
pub const EXIT_UNCHECKED: u8 = 4;

/// What kind of anomaly.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AnomalyKind {
    /// An acknowledged write (or set element) that is neither in the final
    /// read nor superseded by a write or delete that saw it.
    Lost,
    /// A final value or set element that no operation of the history wrote.
    Unexpected,
    /// A value twice among one final read's siblings, or an element twice
    /// within one set sibling.
    Duplicated,
    /// A value in the final read that an acknowledged delete saw (its
    /// context covered it): a deleted value came back without a newer
    /// write of it.
    Resurrected,
}

impl AnomalyKind {
    /// The lowercase name, as in the summary line.
    pub fn name(self) -> &'static str {
        match self {
            AnomalyKind::Lost => "lost",
            AnomalyKind::Unexpected => "unexpected",
            AnomalyKind::Duplicated => "duplicated",
            AnomalyKind::Resurrected => "resurrected",
        }
    }
}

/// One anomaly: which key, which value, and what was expected.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Anomaly {
    /// The kind.
    pub kind: AnomalyKind,
    /// The key.
    pub key: String,
    /// The value or set element concerned.
    pub value: String,
    /// What was expected instead, and the evidence.
    pub detail: String,
}

impl fmt::Display for Anomaly {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: key {} value {}: {}",
            self.kind.name(),
            self.key,
            self.value,
            self.detail
        )
    }
}

/// How many writes (puts, deletes, set adds) ended which way.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    /// Acknowledged.
    pub acked: usize,
    /// Answered "nothing stored".
    pub failed: usize,
    /// Outcome unknown.
    pub indeterminate: usize,
}

/// Whether every replica of every touched key came to hold the same
/// object (siblings and clocks) after the last fault healed; measured by
/// whoever can read the replicas (the simulation), never by the checker.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Convergence {
    /// Time from the heal until the replicas of the slowest key agreed, in
    /// milliseconds (up to the bound when some never did).
    pub max_ms: f64,
    /// Keys whose replicas still differed at the bound.
    pub unconverged: Vec<String>,
}

/// The checker's verdict on one history.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Report {
    /// Writes by outcome.
    pub counts: Counts,
    /// Every anomaly found, in key order.
    pub anomalies: Vec<Anomaly>,
    /// Keys the history touched whose final read never succeeded.
    pub unchecked: Vec<String>,
    /// Observations that are suspicious but not counted (for example a
    /// value still present although an acknowledged write superseded it).
    pub notes: Vec<String>,
    /// Latencies and throughput.
    pub stats: Stats,
    /// The replicas' convergence after healing, when it was measured.
    pub convergence: Option<Convergence>,
    /// The operations in flight at fault moments, set apart, when the run
    /// was given its faults' moments (`kvctl workload --faults`).
    pub faults: Option<FaultSplit>,
}

impl Report {
    /// Number of anomalies of `kind`.
    pub fn count(&self, kind: AnomalyKind) -> usize {
        self.anomalies.iter().filter(|a| a.kind == kind).count()
    }

    /// The one summary line (no newline).
    pub fn summary_line(&self) -> String {
        let mut line = format!(
            "acked={} failed={} indeterminate={} lost={} unexpected={} duplicated={} \
             p50_ms={:.3} p99_ms={:.3} p999_ms={:.3} ops_per_s={:.1} resurrected={}",
            self.counts.acked,
            self.counts.failed,
            self.counts.indeterminate,
            self.count(AnomalyKind::Lost),
            self.count(AnomalyKind::Unexpected),
            self.count(AnomalyKind::Duplicated),
            self.stats.p50_ms,
            self.stats.p99_ms,
            self.stats.p999_ms,
            self.stats.ops_per_s,
            self.count(AnomalyKind::Resurrected),
        );
        if !self.unchecked.is_empty() {
            line.push_str(&format!(" unchecked={}", self.unchecked.len()));
        }
        if let Some(c) = &self.convergence {
            line.push_str(&format!(
                " converge_ms={:.1} unconverged={}",
                c.max_ms,
                c.unconverged.len()
            ));
        }
        if let Some(split) = &self.faults {
            line.push_str(&split.summary_fields());
        }
        line
    }

    /// The details for standard error: one line per anomaly, unchecked key
    /// and note.
    pub fn detail_lines(&self) -> Vec<String> {
        let mut lines: Vec<String> = self.anomalies.iter().map(ToString::to_string).collect();
        lines.extend(self.unchecked.iter().map(|key| {
            format!("unchecked: key {key}: its final read never succeeded, so nothing about it is proven")
        }));
        if let Some(c) = &self.convergence {
            lines.extend(c.unconverged.iter().map(|key| {
                format!(
                    "unconverged: key {key}: its replicas still differed at the convergence bound"
                )
            }));
        }
        lines.extend(self.notes.iter().map(|n| format!("note: {n}")));
        lines
    }

    /// 6 when any anomaly was found (or replicas did not converge), else 4
    /// when some key is unchecked, else 0.
    pub fn exit_code(&self) -> u8 {
        let unconverged = self
            .convergence
            .as_ref()
            .is_some_and(|c| !c.unconverged.is_empty());
        if !self.anomalies.is_empty() || unconverged {
            EXIT_ANOMALY
        } else if !self.unchecked.is_empty() {
            EXIT_UNCHECKED
        } else {
            0
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_summary_line_has_a_fixed_shape() {
        let mut report = Report {
            counts: Counts {
                acked: 5,
                failed: 1,
                indeterminate: 2,
            },
            stats: Stats {
                ops: 10,
                p50_ms: 1.0,
                p99_ms: 2.5,
                p999_ms: 3.25,
                ops_per_s: 100.0,
            },
            ..Report::default()
        };
        assert_eq!(
            report.summary_line(),
            "acked=5 failed=1 indeterminate=2 lost=0 unexpected=0 duplicated=0 \
             p50_ms=1.000 p99_ms=2.500 p999_ms=3.250 ops_per_s=100.0 resurrected=0"
        );
        assert_eq!(report.exit_code(), 0);
        report.unchecked.push("reg-1".into());
        assert!(report.summary_line().ends_with(" unchecked=1"));
        assert_eq!(report.exit_code(), EXIT_UNCHECKED);
        report.anomalies.push(Anomaly {
            kind: AnomalyKind::Lost,
            key: "reg-2".into(),
            value: "c0-1".into(),
            detail: "missing".into(),
        });
        assert!(report.summary_line().contains(" lost=1 "));
        assert_eq!(report.exit_code(), EXIT_ANOMALY);
        assert_eq!(
            report.detail_lines()[0],
            "lost: key reg-2 value c0-1: missing"
        );
        report.convergence = Some(Convergence {
            max_ms: 1250.0,
            unconverged: vec!["reg-3".into()],
        });
        assert!(
            report
                .summary_line()
                .ends_with(" resurrected=0 unchecked=1 converge_ms=1250.0 unconverged=1"),
            "{}",
            report.summary_line()
        );
        report.anomalies.clear();
        report.unchecked.clear();
        assert_eq!(report.exit_code(), EXIT_ANOMALY);
    }
}
