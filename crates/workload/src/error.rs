//! The crate's one error type: why a workload or a check could not produce
//! a verdict at all.
//!
//! A verdict that finds anomalies is not an error: it is a [`crate::Report`]
//! whose exit code is 6. Errors are the cases where there is nothing to
//! judge: the history file cannot be read or written, a line of it does not
//! parse, or the cluster could not be reached to start the run.

use std::path::PathBuf;

/// Result alias of this crate.
pub type Result<T> = std::result::Result<T, Error>;

/// Why there is no verdict.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The history file could not be created, written, or read.
    #[error("{}: {source}", path.display())]
    Io {
        /// The history file.
        path: PathBuf,
        /// What the operating system said.
        source: std::io::Error,
    },
    /// A line of a history file is not a valid history entry.
    #[error("{}:{line}: {message}", path.display())]
    Parse {
        /// The history file.
        path: PathBuf,
        /// The 1-based line number.
        line: usize,
        /// What is wrong with the line.
        message: String,
    },
    /// The workload's settings make no sense (no clients, no keys, ...).
    #[error("invalid workload: {message}")]
    Invalid {
        /// What is wrong.
        message: String,
    },
    /// The cluster did not answer the status request that starts a run, so
    /// not a single operation was attempted.
    #[error("the workload could not start: {0}")]
    Start(#[source] kv_client::Error),
}

impl Error {
    /// The `kvctl` exit code: 2 for a bad or unreadable history and bad
    /// settings (usage), the client error's own code (3 unavailable,
    /// 4 indeterminate, 5 refused, 2 configuration) when the run could not
    /// start.
    pub fn exit_code(&self) -> u8 {
        match self {
            Error::Io { .. } | Error::Parse { .. } | Error::Invalid { .. } => 2,
            Error::Start(e) => e.exit_code(),
        }
    }

    /// What the user should try next, in one sentence.
    pub fn hint(&self) -> &'static str {
        match self {
            Error::Io { .. } => "check the --history path and the free disk space",
            Error::Parse { .. } => {
                "fix or truncate the line: a history holds one JSON object per line"
            }
            Error::Invalid { .. } => "fix the flags and try again",
            Error::Start(e) => e.hint(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_map_to_exit_codes() {
        let parse = Error::Parse {
            path: "h.jsonl".into(),
            line: 7,
            message: "expected value".into(),
        };
        assert_eq!(parse.exit_code(), 2);
        assert_eq!(parse.to_string(), "h.jsonl:7: expected value");
        let start = Error::Start(kv_client::Error::Unavailable {
            node: "127.0.0.1:7101".into(),
            message: "cannot connect".into(),
        });
        assert_eq!(start.exit_code(), 3);
        assert!(
            start
                .to_string()
                .starts_with("the workload could not start")
        );
    }
}
