//! Exit codes, and the one-line error report on standard error.
//!
//! | code | meaning |
//! |------|---------|
//! | 0 | done |
//! | 1 | not found (the key is absent or deleted; the node stores nothing) |
//! | 2 | usage: bad flags or input, no cluster settings, unusable certificates |
//! | 3 | unavailable: nothing was stored (quorum not reached, overloaded) |
//! | 4 | indeterminate: no answer in time; a write may be stored |
//! | 5 | refused: TLS or certificate role |
//! | 6 | `workload`/`check`: a lost, unexpected, duplicated or resurrected write was found |
//! | 7 | storage failure on a node: nothing was stored (its engine failed, its disk is full) |
//!
//! `workload` and `check` also exit 4 when some key's final read never
//! succeeded (nothing is proven about it), and `workload` exits 3, 4 or 5
//! when it could not even start. `repair` exits 4 when its pass finished
//! with steps that could not complete (a peer did not answer).

use std::process::ExitCode;

use crate::cli::Command;

/// The table above in one line, as `kvctl --help` prints it (keep the two
/// together).
pub const HELP: &str = "Exit codes: 0 done; 1 not found; 2 usage (bad flags or input, no cluster settings, unusable certificates); 3 unavailable (nothing was stored: quorum not reached, overloaded); 4 indeterminate (no answer in time: a write may be stored; also an incomplete `repair` pass, or keys `workload`/`check` could not judge); 5 refused (TLS or certificate role); 6 `workload`/`check` found a lost, unexpected, duplicated or resurrected write; 7 storage failure on a node (nothing was stored).";

/// Success.
pub const OK: u8 = 0;
/// The key is absent or deleted.
pub const NOT_FOUND: u8 = 1;
/// Bad flags, bad input or bad local setup (clap uses 2 as well).
pub const USAGE: u8 = 2;
// Codes 3 (unavailable), 4 (indeterminate), 5 (refused) and 7 (storage
// failure) come from `kv_client::Error::exit_code`, the one place that
// classifies failures.

/// How a command that did not fail ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Done.
    Done,
    /// The key was not found (the command already said so).
    NotFound,
    /// The checker found anomalies (the command already said which).
    Anomalies,
    /// The checker could not judge every key (the command already said
    /// which).
    Unchecked,
    /// A repair pass ended with parts not compared (the command already
    /// said where).
    Incomplete,
}

impl Outcome {
    /// The exit code.
    pub fn code(self) -> u8 {
        match self {
            Outcome::Done => OK,
            Outcome::NotFound => NOT_FOUND,
            Outcome::Anomalies => kv_workload::EXIT_ANOMALY,
            Outcome::Unchecked => kv_workload::EXIT_UNCHECKED,
            // 4 as for an indeterminate answer: nothing proven about the rest.
            Outcome::Incomplete => kv_workload::EXIT_UNCHECKED,
        }
    }
}

/// The exit code of a failed command: a client error's own code, else
/// [`USAGE`] (local problems: certificate files, standard input).
pub fn code_of(error: &anyhow::Error) -> u8 {
    if let Some(e) = error.downcast_ref::<kv_workload::Error>() {
        return e.exit_code();
    }
    match error.downcast_ref::<kv_client::Error>() {
        Some(e) => e.exit_code(),
        None => USAGE,
    }
}

/// What to try after a quorum that could not be met, in the flags
/// `command` has (`None`: the client's generic advice).
pub fn quorum_advice(command: &Command) -> Option<&'static str> {
    match command {
        Command::Get(_) => Some("retry when the replicas are back, or lower --r"),
        Command::Put(_) => Some("retry when the replicas are back, or lower --w"),
        Command::Delete(_) => Some(
            "retry when the replicas are back, or lower --r (the read a delete makes first) or --w",
        ),
        _ => None,
    }
}

/// The one-line report of a failed command: what failed, where, and what
/// to try (for a quorum that could not be met, `quorum` when given).
pub fn message_of(error: &anyhow::Error, quorum: Option<&str>) -> String {
    if let Some(e) = error.downcast_ref::<kv_workload::Error>() {
        return format!("kvctl: {e}; {}", e.hint());
    }
    match error.downcast_ref::<kv_client::Error>() {
        Some(e) => {
            let hint = quorum.filter(|_| e.is_quorum()).unwrap_or(e.hint());
            format!("kvctl: {e}; {hint}")
        }
        None => format!("kvctl: {error:#}"),
    }
}

/// Prints the report of `error` on standard error and returns its exit code.
pub fn fail(error: &anyhow::Error, quorum: Option<&str>) -> ExitCode {
    eprintln!("{}", message_of(error, quorum));
    ExitCode::from(code_of(error))
}

#[cfg(test)]
mod tests {
    use kv_client::{Error, ErrorKind};

    use super::*;

    const UNAVAILABLE: u8 = 3;
    const INDETERMINATE: u8 = 4;
    const REFUSED: u8 = 5;
    const STORAGE: u8 = 7;

    #[test]
    fn client_errors_keep_their_codes() {
        let cases = [
            (
                Error::Unavailable {
                    node: "node2".into(),
                    message: "only 1 of 3 replicas alive".into(),
                },
                UNAVAILABLE,
            ),
            (
                Error::Overloaded {
                    node: "node1".into(),
                    message: "queue full".into(),
                },
                UNAVAILABLE,
            ),
            (
                Error::Indeterminate {
                    node: "node1".into(),
                    message: "timeout".into(),
                },
                INDETERMINATE,
            ),
            (
                Error::Refused {
                    endpoint: "127.0.0.1:7101".into(),
                    message: "bad certificate".into(),
                },
                REFUSED,
            ),
            (
                Error::Invalid {
                    message: "bad context".into(),
                },
                USAGE,
            ),
            (
                Error::Server {
                    kind: ErrorKind::TooManySiblings,
                    node: "node1".into(),
                    message: "17 > 16".into(),
                },
                UNAVAILABLE,
            ),
            (
                Error::Storage {
                    node: "node1".into(),
                    message: "disk full".into(),
                },
                STORAGE,
            ),
            (
                Error::Server {
                    kind: ErrorKind::Storage,
                    node: "node1".into(),
                    message: "engine failed".into(),
                },
                STORAGE,
            ),
            (
                Error::Server {
                    kind: ErrorKind::Internal,
                    node: "node1".into(),
                    message: "bug".into(),
                },
                INDETERMINATE,
            ),
        ];
        for (error, code) in cases {
            let any = anyhow::Error::new(error.clone());
            assert_eq!(code_of(&any), code, "{error}");
            // Context added on the way up does not hide the code.
            assert_eq!(code_of(&any.context("while putting")), code, "{error}");
        }
    }

    #[test]
    fn messages_name_the_node_and_what_to_try() {
        let e = anyhow::Error::new(Error::Unavailable {
            node: "node2".into(),
            message: "only 1 of the 3 replicas of this key are alive (node2); R=2 needs 2".into(),
        });
        let text = message_of(&e, None);
        assert!(text.starts_with("kvctl: unavailable: node2: only 1 of the 3 replicas"));
        assert!(text.contains("--r for a read"), "{text}");
        let delete = quorum_advice(&Command::Delete(crate::cli::DeleteArgs {
            key: "k".into(),
            context: None,
            r: None,
            w: None,
        }));
        let text = message_of(&e, delete);
        assert!(
            text.ends_with("or lower --r (the read a delete makes first) or --w"),
            "{text}"
        );
        // Advice once: the tail is not repeated.
        assert_eq!(text.matches("retry").count(), 1, "{text}");
        let unreachable = anyhow::Error::new(Error::Unavailable {
            node: "127.0.0.1:9".into(),
            message: "cannot connect: timed out".into(),
        });
        let text = message_of(&unreachable, delete);
        assert!(!text.contains("--r"), "{text}");
        assert!(text.contains("QUIC port"), "{text}");
    }

    #[test]
    fn other_failures_are_usage_errors() {
        let e = anyhow::anyhow!("cannot read standard input");
        assert_eq!(code_of(&e), USAGE);
        assert_eq!(Outcome::NotFound.code(), NOT_FOUND);
        assert_eq!(Outcome::Done.code(), OK);
        assert_eq!(Outcome::Anomalies.code(), 6);
        assert_eq!(Outcome::Unchecked.code(), INDETERMINATE);
    }

    #[test]
    fn workload_errors_keep_their_codes() {
        let start = anyhow::Error::new(kv_workload::Error::Start(Error::Refused {
            endpoint: "127.0.0.1:7101".into(),
            message: "bad certificate".into(),
        }));
        assert_eq!(code_of(&start), REFUSED);
        assert!(message_of(&start, None).starts_with("kvctl: the workload could not start: "));
        let parse = anyhow::Error::new(kv_workload::Error::Parse {
            path: "h.jsonl".into(),
            line: 3,
            message: "EOF while parsing".into(),
        });
        assert_eq!(code_of(&parse), USAGE);
        assert!(message_of(&parse, None).starts_with("kvctl: h.jsonl:3: EOF while parsing; "));
    }
}
