//! Operations in flight at a fault, told apart from the rest.
//!
//! A request in flight to a node at the moment it is killed or cut off can
//! only end at its deadline, as indeterminate (or failed); its latency says
//! how long the client waits, not how the cluster serves. So a chaos run
//! reports those requests apart, and the latency of every other request
//! (issue 16: the p99.9 of the operations that were not in flight at a kill
//! or a cut). A fault file lists the moments, one per line:
//!
//! ```text
//! 1764590000123 kill node3
//! 1764590021456 partition node2 node5
//! ```
//!
//! (milliseconds since the Unix epoch, then free text). The history counts
//! its times from the start of the run; [`FaultMoments::relative_to`] turns
//! the moments into the same time base. The split is conservative: every
//! request in flight at a moment is set apart, whichever node it was sent
//! to (the history does not say which node coordinated it).

use std::path::Path;

use crate::history::{Entry, OpKind, Outcome};
use crate::stats::Stats;
use crate::{Error, Result};

/// Most moments a fault file may hold.
pub const MAX_MOMENTS: usize = 10_000;

/// Largest fault file read, bytes.
const MAX_FILE_BYTES: u64 = 1 << 20;

/// Fault moments, in milliseconds since the Unix epoch, ascending.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FaultMoments {
    unix_ms: Vec<u64>,
}

impl FaultMoments {
    /// Parses a fault file's text: one `UNIX_MS [DESCRIPTION]` per line;
    /// empty lines and lines starting with `#` are skipped.
    ///
    /// # Errors
    /// [`Error::Invalid`] naming the line when a time is not a number, or
    /// when there are more than [`MAX_MOMENTS`] moments.
    pub fn parse(text: &str) -> Result<Self> {
        let mut unix_ms = Vec::new();
        for (n, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let first = line.split_whitespace().next().unwrap_or_default();
            let at = first.parse::<u64>().map_err(|_| Error::Invalid {
                message: format!(
                    "fault file line {}: {first:?} is not a time in ms since the Unix epoch",
                    n + 1
                ),
            })?;
            if unix_ms.len() == MAX_MOMENTS {
                return Err(Error::Invalid {
                    message: format!("fault file: more than {MAX_MOMENTS} moments"),
                });
            }
            unix_ms.push(at);
        }
        unix_ms.sort_unstable();
        Ok(FaultMoments { unix_ms })
    }

    /// Reads and parses a fault file (at most 1 MiB).
    ///
    /// # Errors
    /// [`Error::Io`] when it cannot be read; [`Error::Invalid`] when it is
    /// too large or malformed (see [`FaultMoments::parse`]).
    pub fn read(path: &Path) -> Result<Self> {
        let io = |source| Error::Io {
            path: path.to_path_buf(),
            source,
        };
        let len = std::fs::metadata(path).map_err(io)?.len();
        if len > MAX_FILE_BYTES {
            return Err(Error::Invalid {
                message: format!(
                    "fault file {} is {len} bytes; at most {MAX_FILE_BYTES}",
                    path.display()
                ),
            });
        }
        Self::parse(&std::fs::read_to_string(path).map_err(io)?)
    }

    /// Number of moments.
    pub fn len(&self) -> usize {
        self.unix_ms.len()
    }

    /// Whether there is none.
    pub fn is_empty(&self) -> bool {
        self.unix_ms.is_empty()
    }

    /// The moments in ms since the start of a run that began at
    /// `run_start_unix_ms` (negative for moments before it).
    pub fn relative_to(&self, run_start_unix_ms: u64) -> Vec<f64> {
        self.unix_ms
            .iter()
            .map(|&at| at as f64 - run_start_unix_ms as f64)
            .collect()
    }
}

/// The client operations of a history split at fault moments.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FaultSplit {
    /// Fault moments considered.
    pub moments: usize,
    /// Operations in flight at some moment (started before it, not yet
    /// ended), by outcome.
    pub in_flight_ok: usize,
    /// See [`FaultSplit::in_flight_ok`].
    pub in_flight_failed: usize,
    /// See [`FaultSplit::in_flight_ok`].
    pub in_flight_indeterminate: usize,
    /// Longest latency among them, ms.
    pub in_flight_max_ms: f64,
    /// Latency figures of every other client operation.
    pub others: Stats,
}

impl FaultSplit {
    /// Operations in flight at some moment.
    pub fn in_flight(&self) -> usize {
        self.in_flight_ok + self.in_flight_failed + self.in_flight_indeterminate
    }

    /// Splits the client operations of `entries` (final reads left out)
    /// at `moments_ms` (ms since the start of the run, as the history's
    /// `start_ms`).
    pub fn of(entries: &[Entry], moments_ms: &[f64]) -> Self {
        let mut moments: Vec<f64> = moments_ms
            .iter()
            .copied()
            .filter(|m| m.is_finite())
            .collect();
        moments.sort_by(f64::total_cmp);
        let mut split = FaultSplit {
            moments: moments.len(),
            ..FaultSplit::default()
        };
        let mut others = Vec::new();
        for entry in entries.iter().filter(|e| e.op != OpKind::Final) {
            let end = entry.start_ms + entry.latency_ms;
            // The first moment at or after the start; in flight if it
            // comes before the end.
            let i = moments.partition_point(|&m| m < entry.start_ms);
            if moments.get(i).is_some_and(|&m| m < end) {
                match entry.outcome {
                    Outcome::Ok => split.in_flight_ok += 1,
                    Outcome::Failed => split.in_flight_failed += 1,
                    Outcome::Indeterminate => split.in_flight_indeterminate += 1,
                }
                split.in_flight_max_ms = split.in_flight_max_ms.max(entry.latency_ms);
            } else {
                others.push(entry.clone());
            }
        }
        split.others = Stats::of(&others);
        split
    }

    /// The fields appended to the summary line (leading space included).
    pub fn summary_fields(&self) -> String {
        format!(
            " fault_moments={} in_flight_at_faults={} in_flight_ok={} in_flight_indeterminate={} \
             in_flight_failed={} in_flight_max_ms={:.3} others_p99_ms={:.3} others_p999_ms={:.3}",
            self.moments,
            self.in_flight(),
            self.in_flight_ok,
            self.in_flight_indeterminate,
            self.in_flight_failed,
            self.in_flight_max_ms,
            self.others.p99_ms,
            self.others.p999_ms,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(start_ms: f64, latency_ms: f64, outcome: Outcome) -> Entry {
        Entry {
            op: OpKind::Put,
            client: Some(0),
            key: "reg-0".into(),
            value: Some("c0-1".into()),
            element: None,
            blind: true,
            saw: Some(Vec::new()),
            values: None,
            deleted: None,
            outcome,
            error: None,
            start_ms,
            latency_ms,
        }
    }

    #[test]
    fn parses_moments_and_refuses_garbage() {
        let m = FaultMoments::parse("# chaos\n2000 kill node3\n\n1000 partition node1\n").unwrap();
        assert_eq!(m.len(), 2);
        assert_eq!(m.relative_to(500), vec![500.0, 1500.0]);
        let e = FaultMoments::parse("12 ok\nsoon kill node3\n").unwrap_err();
        assert!(e.to_string().contains("line 2"), "{e}");
        let many = "1\n".repeat(MAX_MOMENTS + 1);
        assert!(FaultMoments::parse(&many).is_err());
    }

    #[test]
    fn operations_spanning_a_moment_are_set_apart() {
        let entries = vec![
            op(0.0, 5.0, Outcome::Ok),
            // Spans the moment at 100 ms: a request to a killed node.
            op(90.0, 3000.0, Outcome::Indeterminate),
            op(95.0, 10.0, Outcome::Ok),
            // Starts exactly at the moment: in flight.
            op(100.0, 1.0, Outcome::Failed),
            op(200.0, 7.0, Outcome::Ok),
            Entry {
                op: OpKind::Final,
                ..op(300.0, 9000.0, Outcome::Ok)
            },
        ];
        let split = FaultSplit::of(&entries, &[100.0]);
        assert_eq!(split.moments, 1);
        assert_eq!(split.in_flight(), 3);
        assert_eq!(split.in_flight_indeterminate, 1);
        assert_eq!(split.in_flight_failed, 1);
        assert_eq!(split.in_flight_ok, 1);
        assert_eq!(split.in_flight_max_ms, 3000.0);
        assert_eq!(split.others.ops, 2);
        assert_eq!(split.others.p999_ms, 7.0);
        assert!(split.summary_fields().contains(" in_flight_at_faults=3 "));
    }

    #[test]
    fn no_moments_keeps_every_operation() {
        let entries = vec![op(0.0, 5.0, Outcome::Ok), op(1.0, 9.0, Outcome::Ok)];
        let split = FaultSplit::of(&entries, &[]);
        assert_eq!(split.in_flight(), 0);
        assert_eq!(split.others, Stats::of(&entries));
    }
}
