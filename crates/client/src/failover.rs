//! Whether trying another endpoint after a failure is safe, and the error
//! to report when every one failed.
//!
//! Pure functions, no I/O. Which endpoint comes next is the router's
//! ([`crate::routing`]). Moving on after a failure is always safe for reads; for
//! writes only when the request certainly never reached a node, because a
//! second coordinator executing the same put would store it twice (as two
//! siblings). A TLS refusal is never retried: every endpoint of the cluster
//! would refuse the same certificate.

use crate::Error;

/// Whether an operation may change data.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Op {
    /// Get, status, explain, local get: repeating it is harmless.
    Read,
    /// Put or delete: repeating it after it may have run risks a duplicate.
    Write,
}

/// Whether, after `error` on one endpoint, the request may go to the next.
pub(crate) fn may_try_next(op: Op, error: &kv_transport::Error) -> bool {
    use kv_transport::Error as T;
    match error {
        // Configuration or input problems: the next endpoint fails the same way.
        T::Refused { .. } | T::Tls(_) | T::Bind { .. } | T::Encode(_) => false,
        _ => match op {
            Op::Read => true,
            Op::Write => error.is_unsent(),
        },
    }
}

/// The error to report after every tried endpoint failed: the last one,
/// with the earlier failures appended to its message so that the user sees
/// every endpoint that was tried. `None` when nothing was tried.
pub(crate) fn summarize(mut failures: Vec<Error>) -> Option<Error> {
    let mut last = failures.pop()?;
    if failures.is_empty() {
        return Some(last);
    }
    let earlier: Vec<String> = failures.iter().map(ToString::to_string).collect();
    let note = format!(" (also tried: {})", earlier.join("; "));
    match &mut last {
        Error::Unavailable { message, .. }
        | Error::Indeterminate { message, .. }
        | Error::Refused { message, .. }
        | Error::Overloaded { message, .. }
        | Error::Invalid { message }
        | Error::Config { message }
        | Error::Server { message, .. }
        | Error::Storage { message, .. }
        | Error::Protocol { message, .. } => message.push_str(&note),
    }
    Some(last)
}

#[cfg(test)]
mod tests {
    use std::net::SocketAddr;

    use kv_transport::Error as T;

    use super::*;

    fn addr() -> SocketAddr {
        "127.0.0.1:7101".parse().unwrap()
    }

    #[test]
    fn unsent_failures_move_on_for_reads_and_writes() {
        let connect = T::Connect {
            addr: addr(),
            reason: "unreachable".into(),
        };
        let unsent = T::Lost {
            addr: addr(),
            reason: "reset".into(),
            sent: false,
        };
        for e in [&connect, &unsent] {
            assert!(may_try_next(Op::Read, e));
            assert!(may_try_next(Op::Write, e));
        }
    }

    #[test]
    fn writes_that_may_have_been_sent_are_never_repeated() {
        let timeout = T::Timeout {
            addr: addr(),
            timeout_ms: 10,
            sent: true,
        };
        let lost = T::Lost {
            addr: addr(),
            reason: "reset".into(),
            sent: true,
        };
        let garbled = T::Protocol {
            addr: addr(),
            reason: "bad frame".into(),
        };
        for e in [&timeout, &lost, &garbled] {
            assert!(!may_try_next(Op::Write, e), "{e}");
            assert!(may_try_next(Op::Read, e), "{e}");
        }
    }

    #[test]
    fn refusals_are_never_retried() {
        let refused = T::Refused {
            addr: addr(),
            reason: "unknown CA".into(),
        };
        assert!(refused.is_unsent());
        assert!(!may_try_next(Op::Read, &refused));
        assert!(!may_try_next(Op::Write, &refused));
    }

    #[test]
    fn the_summary_is_the_last_failure_naming_the_others() {
        assert_eq!(summarize(vec![]), None);
        let one = Error::Unavailable {
            node: "a".into(),
            message: "down".into(),
        };
        assert_eq!(summarize(vec![one.clone()]), Some(one.clone()));
        let two = Error::Unavailable {
            node: "b".into(),
            message: "down too".into(),
        };
        let s = summarize(vec![one, two]).unwrap();
        assert_eq!(
            s.to_string(),
            "unavailable: b: down too (also tried: unavailable: a: down)"
        );
    }
}
