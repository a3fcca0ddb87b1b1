//! The history: one JSON object per line, one line per operation.
//!
//! ```text
//! {"op":"read","client":2,"key":"reg-3","values":["c1-4"],"deleted":false,"outcome":"ok","start_ms":10.5,"latency_ms":1.2}
//! {"op":"put","client":2,"key":"reg-3","value":"c2-9","saw":["c1-4"],"outcome":"ok","start_ms":11.8,"latency_ms":2.0}
//! {"op":"put","client":0,"key":"reg-3","value":"c0-5","blind":true,"saw":[],"outcome":"indeterminate","error":"...","start_ms":12.0,"latency_ms":10000.0}
//! {"op":"delete","client":1,"key":"reg-3","saw":["c2-9"],"outcome":"failed","error":"...","start_ms":13.0,"latency_ms":0.9}
//! {"op":"add","client":3,"key":"set-0","element":"c3-7","saw":["c0-2","c1-1"],"outcome":"ok","start_ms":14.1,"latency_ms":2.2}
//! {"op":"final","key":"reg-3","values":["c2-9"],"deleted":false,"outcome":"ok","start_ms":20100.0,"latency_ms":1.5}
//! ```
//!
//! `saw` is what the read whose causal context the write carried returned:
//! the register's values, or the union of the set's elements; a blind write
//! saw nothing. A set's stored value is its elements joined by commas.
//! Times are milliseconds since the start of the run. `kvctl workload`
//! prefixes every key with the run's namespace (`w1718000000/reg-3`).
//! Lines that are blank or start with `#` are comments (the test fixtures
//! use them to state what they expect).

use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::{Error, Result};

/// What an operation was.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OpKind {
    /// A quorum read by a client.
    Read,
    /// A write of one unique value to a register.
    Put,
    /// A delete of a register.
    Delete,
    /// A grow-only set add: the union read plus one new element, written
    /// with the context read.
    Add,
    /// A read with R=N after the cluster settled; not a client operation.
    Final,
}

impl OpKind {
    /// Whether this operation writes (put, delete, add).
    pub fn is_write(self) -> bool {
        matches!(self, OpKind::Put | OpKind::Delete | OpKind::Add)
    }
}

/// How an operation ended, as the client saw it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    /// Acknowledged (a write reached its quorum; a read returned).
    Ok,
    /// The cluster said nothing was done (exit-code-3 class: unavailable,
    /// overloaded, refused, invalid).
    Failed,
    /// Unknown: a timeout, a lost connection, an exit-code-4 answer. A write
    /// may be stored.
    Indeterminate,
}

impl Outcome {
    /// The outcome of a request that failed with `error`: indeterminate when
    /// `kvctl` would exit 4 for it, failed otherwise.
    pub fn of_error(error: &kv_client::Error) -> Self {
        if error.exit_code() == 4 {
            Outcome::Indeterminate
        } else {
            Outcome::Failed
        }
    }
}

/// One line of the history.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    /// What the operation was.
    pub op: OpKind,
    /// The client that ran it (absent on final reads).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client: Option<u32>,
    /// The key.
    pub key: String,
    /// Put: the unique value written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    /// Add: the unique element added.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub element: Option<String>,
    /// Put: written without a causal context.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub blind: bool,
    /// Put, delete, add: the values (set: elements) the read whose context
    /// the write used had returned; empty for a blind write.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub saw: Option<Vec<String>>,
    /// Read, final (when ok): every sibling returned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub values: Option<Vec<String>>,
    /// Read, final (when ok): the key was deleted or never written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deleted: Option<bool>,
    /// How it ended.
    pub outcome: Outcome,
    /// The client error, when it did not end `ok`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// When it started, in milliseconds since the start of the run.
    pub start_ms: f64,
    /// How long it took, in milliseconds.
    pub latency_ms: f64,
}

impl Entry {
    /// Checks that the fields this kind of operation needs are there, so
    /// that the checker never has to guess.
    fn validate(&self) -> std::result::Result<(), String> {
        let need = |present: bool, field: &str| {
            if present {
                Ok(())
            } else {
                Err(format!("a {:?} entry needs `{field}`", self.op))
            }
        };
        if self.op != OpKind::Final {
            need(self.client.is_some(), "client")?;
        }
        match self.op {
            OpKind::Put => {
                need(self.value.is_some(), "value")?;
                need(self.saw.is_some(), "saw")
            }
            OpKind::Add => {
                need(self.element.is_some(), "element")?;
                need(self.saw.is_some(), "saw")
            }
            OpKind::Delete => need(self.saw.is_some(), "saw"),
            OpKind::Read | OpKind::Final if self.outcome == Outcome::Ok => {
                need(self.values.is_some(), "values")?;
                need(self.deleted.is_some(), "deleted")
            }
            OpKind::Read | OpKind::Final => Ok(()),
        }?;
        if !(self.start_ms.is_finite() && self.latency_ms.is_finite() && self.latency_ms >= 0.0) {
            return Err("start_ms and latency_ms must be finite, latency_ms not negative".into());
        }
        Ok(())
    }
}

/// Reads a history file, checking every line.
///
/// # Errors
/// [`Error::Io`] when the file cannot be read; [`Error::Parse`] naming the
/// first line that is not a valid entry.
pub fn read_history(path: &Path) -> Result<Vec<Entry>> {
    let io = |source| Error::Io {
        path: path.to_path_buf(),
        source,
    };
    let file = File::open(path).map_err(io)?;
    parse_lines(path, BufReader::new(file))
}

/// Parses history lines from `input`; `path` only names the source in
/// errors.
///
/// # Errors
/// As for [`read_history`].
pub fn parse_lines(path: &Path, input: impl BufRead) -> Result<Vec<Entry>> {
    let mut entries = Vec::new();
    for (i, line) in input.lines().enumerate() {
        let line = line.map_err(|source| Error::Io {
            path: path.to_path_buf(),
            source,
        })?;
        let text = line.trim();
        if text.is_empty() || text.starts_with('#') {
            continue;
        }
        let parse = |message: String| Error::Parse {
            path: path.to_path_buf(),
            line: i + 1,
            message,
        };
        let entry: Entry = serde_json::from_str(text).map_err(|e| parse(e.to_string()))?;
        entry.validate().map_err(parse)?;
        entries.push(entry);
    }
    Ok(entries)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Vec<Entry>> {
        parse_lines(Path::new("h.jsonl"), text.as_bytes())
    }

    #[test]
    fn comments_and_blank_lines_are_skipped() {
        let text = "# expect: nothing\n\n{\"op\":\"final\",\"key\":\"k\",\"outcome\":\"failed\",\"start_ms\":0,\"latency_ms\":1}\n";
        assert_eq!(parse(text).unwrap().len(), 1);
    }

    #[test]
    fn a_malformed_line_is_named_by_its_number() {
        let text = "# header\n{\"op\":\"final\",\"key\":\"k\",\"outcome\":\"failed\",\"start_ms\":0,\"latency_ms\":1}\n{\"op\":\"put\",\n";
        let e = parse(text).unwrap_err();
        assert!(matches!(e, Error::Parse { line: 3, .. }), "{e}");
        assert!(e.to_string().starts_with("h.jsonl:3: "), "{e}");
        assert_eq!(e.exit_code(), 2);
    }

    #[test]
    fn unknown_kinds_and_missing_fields_are_errors() {
        let bad = [
            (
                r#"{"op":"cas","key":"k","outcome":"ok","start_ms":0,"latency_ms":1}"#,
                "unknown variant",
            ),
            (
                r#"{"op":"put","client":1,"key":"k","saw":[],"outcome":"ok","start_ms":0,"latency_ms":1}"#,
                "needs `value`",
            ),
            (
                r#"{"op":"add","client":1,"key":"s","element":"e","outcome":"ok","start_ms":0,"latency_ms":1}"#,
                "needs `saw`",
            ),
            (
                r#"{"op":"read","key":"k","values":[],"deleted":true,"outcome":"ok","start_ms":0,"latency_ms":1}"#,
                "needs `client`",
            ),
            (
                r#"{"op":"final","key":"k","outcome":"ok","start_ms":0,"latency_ms":1}"#,
                "needs `values`",
            ),
            (
                r#"{"op":"final","key":"k","values":[],"deleted":true,"outcome":"maybe","start_ms":0,"latency_ms":1}"#,
                "unknown variant",
            ),
            (
                r#"{"op":"final","key":"k","values":[],"deleted":true,"outcome":"ok","start_ms":0,"latency_ms":-1}"#,
                "not negative",
            ),
        ];
        for (line, why) in bad {
            let e = parse(line).unwrap_err();
            assert!(e.to_string().contains(why), "{line}: {e}");
            assert!(matches!(e, Error::Parse { line: 1, .. }));
        }
    }

    #[test]
    fn a_missing_file_is_an_io_error() {
        let e = read_history(Path::new("/nonexistent/h.jsonl")).unwrap_err();
        assert!(matches!(e, Error::Io { .. }));
        assert_eq!(e.exit_code(), 2);
    }
}
