//! The crate's one error type, shaped by what the caller must do next.
//!
//! Every failure of a request ends in one of a few classes: nothing was
//! stored ([`Error::Unavailable`], [`Error::Overloaded`], [`Error::Storage`]), the write may or
//! may not be stored ([`Error::Indeterminate`]), our certificate is not
//! accepted ([`Error::Refused`]), the input or the local setup is wrong
//! ([`Error::Invalid`], [`Error::Config`]), or the node reports something
//! else ([`Error::Server`]). [`Error::exit_code`] turns the class into the
//! exit code `kvctl` documents, and [`Error::hint`] says what to try.

use kv_wire::{ErrorKind, WireError};

/// Result alias of this crate.
pub type Result<T> = std::result::Result<T, Error>;

/// Why a request failed. `node` fields name the node (or, when no node
/// answered, the endpoint address) the failure comes from.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// The request could not be carried out and nothing was stored: too few
    /// replicas alive, or no endpoint could be reached.
    #[error("unavailable: {node}: {message}")]
    Unavailable {
        /// The node that reported it, or the endpoint that could not be reached.
        node: String,
        /// What failed.
        message: String,
    },
    /// The outcome is unknown: the request was sent but no answer came back
    /// (timeout, lost connection), or a coordinator could not confirm the
    /// write. The write may be stored; read the key before retrying.
    #[error("indeterminate: {node}: {message}")]
    Indeterminate {
        /// The node that reported it, or the endpoint that stopped answering.
        node: String,
        /// What failed.
        message: String,
    },
    /// Our certificate was refused (wrong CA, expired, or its role does not
    /// allow the request), or the server's certificate was not the expected
    /// one. A configuration problem: never retried.
    #[error("refused: {endpoint}: {message}")]
    Refused {
        /// The endpoint address or node that refused.
        endpoint: String,
        /// The TLS alert or the node's reason.
        message: String,
    },
    /// A node's bounded queue is full; nothing was done. Retry later.
    #[error("overloaded: {node}: {message}")]
    Overloaded {
        /// The node that is overloaded.
        node: String,
        /// The node's message.
        message: String,
    },
    /// Bad input: a key or value out of bounds, a malformed causal context,
    /// an unknown node, a quorum of 0.
    #[error("invalid request: {message}")]
    Invalid {
        /// What is wrong, naming the node when a node rejected it.
        message: String,
    },
    /// The local setup is unusable: certificates missing or broken, no
    /// endpoints, an endpoint that does not parse.
    #[error("configuration: {message}")]
    Config {
        /// What is wrong, naming the file or setting.
        message: String,
    },
    /// A node's storage failed before it stored anything (its engine is
    /// failed and reopening, its disk is full): nothing was stored.
    #[error("storage failure: {node}: {message}")]
    Storage {
        /// The node whose storage failed.
        node: String,
        /// What failed.
        message: String,
    },
    /// Any other failure a node reports: a corrupt record, the sibling cap,
    /// an internal error.
    #[error("{}: {node}: {message}", kind_name(*.kind))]
    Server {
        /// The failure class the node sent.
        kind: ErrorKind,
        /// The node that reported it.
        node: String,
        /// The node's message.
        message: String,
    },
    /// The node answered something that does not fit the request (a bug or
    /// a version mismatch). For a write, the outcome is unknown.
    #[error("protocol: {node}: {message}")]
    Protocol {
        /// The endpoint or node that answered.
        node: String,
        /// What was wrong with the answer.
        message: String,
    },
}

impl Error {
    /// The `kvctl` exit code of this error: 2 bad input or setup, 3 nothing
    /// stored (unavailable, overloaded, sibling cap, corrupt record), 4
    /// outcome unknown (indeterminate, internal error), 5 refused, 7 a
    /// node's storage failed and nothing was stored.
    pub fn exit_code(&self) -> u8 {
        match self {
            Error::Storage { .. } => 7,
            Error::Invalid { .. } | Error::Config { .. } => 2,
            Error::Unavailable { .. } | Error::Overloaded { .. } => 3,
            Error::Server { kind, .. } => match kind {
                ErrorKind::Unavailable
                | ErrorKind::Overloaded
                | ErrorKind::TooManySiblings
                | ErrorKind::Corrupt => 3,
                ErrorKind::Invalid => 2,
                ErrorKind::Refused => 5,
                ErrorKind::Indeterminate | ErrorKind::Internal => 4,
                ErrorKind::Storage => 7,
            },
            Error::Indeterminate { .. } | Error::Protocol { .. } => 4,
            Error::Refused { .. } => 5,
        }
    }

    /// Whether this is a quorum that could not be met (too few replicas of
    /// the key alive, or too few took the write), as opposed to a node
    /// that could not be reached at all: only then does lowering the
    /// quorum (`--r`, `--w`) help.
    pub fn is_quorum(&self) -> bool {
        match self {
            Error::Unavailable { message, .. } => {
                message.contains("replicas of this key are alive")
                    || message.contains("no replica could take the write")
            }
            Error::Server {
                kind: ErrorKind::Unavailable,
                ..
            } => true,
            _ => false,
        }
    }

    /// What the user should try next, in one sentence, once: the message
    /// itself already says what happened (whether anything was stored).
    /// For a quorum ([`Error::is_quorum`]) it names both quorum flags;
    /// `kvctl` names the one its command has.
    pub fn hint(&self) -> &'static str {
        match self {
            Error::Unavailable { message, .. } => {
                if self.is_quorum() {
                    "retry when the replicas are back, or lower the quorum (--r for a read, --w for a write)"
                } else if message.starts_with("cannot resolve") || message.contains("resolves to") {
                    "check the host name in --endpoints (or KV_ENDPOINTS): it does not resolve here"
                } else {
                    "nothing reached a node: check that it runs and that --endpoints names its QUIC port (`kvctl status` lists every node's), or try other --endpoints"
                }
            }
            Error::Indeterminate { .. } => {
                "the write may or may not be stored; read the key before retrying, or raise --timeout"
            }
            Error::Refused { .. } => {
                "check --certs and --identity: the certificate must be signed by this cluster's CA and its role must allow the request"
            }
            Error::Overloaded { .. } => "the node is overloaded; retry in a moment",
            Error::Storage { .. } => {
                "nothing was stored; check that node's disk and log (`kvctl status`, `/health`), then retry"
            }
            Error::Invalid { .. } => "fix the request and try again",
            Error::Config { .. } => {
                "run `scripts/cluster up`, or pass --endpoints HOST:PORT,... and --certs DIR (or set KV_ENDPOINTS and KV_CERTS)"
            }
            Error::Server { kind, .. } => match kind {
                ErrorKind::TooManySiblings => {
                    "resolve the siblings first: kvctl get KEY, then kvctl put KEY VALUE --context <ctx>"
                }
                ErrorKind::Corrupt => {
                    "a replica holds a corrupt record; anti-entropy repairs it, retry later or read with another --r"
                }
                _ => "see the node's log for details",
            },
            Error::Protocol { .. } => {
                "client and node disagree on the protocol; use a kvctl built from the same version as the nodes"
            }
        }
    }

    /// Whether retrying the same request later may succeed without changing
    /// anything (unavailable, overloaded).
    pub fn is_retryable(&self) -> bool {
        matches!(self, Error::Unavailable { .. } | Error::Overloaded { .. })
    }

    /// The error a node reported in a [`kv_wire::Response::Error`].
    pub fn from_wire(e: WireError) -> Self {
        let WireError {
            kind,
            message,
            node,
        } = e;
        match kind {
            ErrorKind::Unavailable => Error::Unavailable { node, message },
            ErrorKind::Indeterminate => Error::Indeterminate { node, message },
            ErrorKind::Overloaded => Error::Overloaded { node, message },
            ErrorKind::Invalid => Error::Invalid {
                message: format!("{node} rejected the request: {message}"),
            },
            ErrorKind::Refused => Error::Refused {
                endpoint: node,
                message,
            },
            ErrorKind::Storage => Error::Storage { node, message },
            ErrorKind::Corrupt | ErrorKind::TooManySiblings | ErrorKind::Internal => {
                Error::Server {
                    kind,
                    node,
                    message,
                }
            }
        }
    }

    /// The error of a transport failure while calling `endpoint`: a request
    /// that may have reached the node (a timeout or a lost connection after
    /// sending) is indeterminate; one that certainly did not is unavailable;
    /// a TLS refusal is refused.
    pub fn from_transport(endpoint: &str, e: &kv_transport::Error) -> Self {
        use kv_transport::Error as T;
        let node = endpoint.to_string();
        match e {
            T::Refused { reason, .. } => Error::Refused {
                endpoint: node,
                message: format!("TLS handshake refused: {reason}"),
            },
            T::Tls(e) => Error::Config {
                message: e.to_string(),
            },
            T::Bind { addr, reason } => Error::Config {
                message: format!("cannot bind a local UDP socket on {addr}: {reason}"),
            },
            T::Encode(e) => Error::Invalid {
                message: e.to_string(),
            },
            T::Connect { reason, .. } => Error::Unavailable {
                node,
                message: format!("cannot connect: {reason}"),
            },
            T::Timeout {
                timeout_ms, sent, ..
            } => {
                if *sent {
                    Error::Indeterminate {
                        node,
                        message: format!("no answer within {timeout_ms} ms after sending"),
                    }
                } else {
                    Error::Unavailable {
                        node,
                        message: format!("could not send the request within {timeout_ms} ms"),
                    }
                }
            }
            T::Lost { reason, sent, .. } => {
                if *sent {
                    Error::Indeterminate {
                        node,
                        message: format!("connection lost after sending: {reason}"),
                    }
                } else {
                    Error::Unavailable {
                        node,
                        message: format!("connection lost before sending: {reason}"),
                    }
                }
            }
            T::Protocol { reason, .. } => Error::Protocol {
                node,
                message: format!("undecodable answer: {reason}"),
            },
        }
    }
}

/// The lowercase name of a wire failure class, for messages.
fn kind_name(kind: ErrorKind) -> &'static str {
    match kind {
        ErrorKind::Unavailable => "unavailable",
        ErrorKind::Indeterminate => "indeterminate",
        ErrorKind::Overloaded => "overloaded",
        ErrorKind::Invalid => "invalid request",
        ErrorKind::Refused => "refused",
        ErrorKind::Corrupt => "corrupt record",
        ErrorKind::TooManySiblings => "too many siblings",
        ErrorKind::Internal => "internal error",
        ErrorKind::Storage => "storage failure",
    }
}

impl From<kv_types::Error> for Error {
    /// Bad input, said once: a key's reason already names the key.
    fn from(e: kv_types::Error) -> Self {
        let message = match e {
            kv_types::Error::InvalidKey { reason } => reason,
            other => other.to_string(),
        };
        Error::Invalid { message }
    }
}

impl From<kv_wire::Error> for Error {
    /// A request this client will not send: its reason without the wire
    /// layer's own prefix ("invalid message: ").
    fn from(e: kv_wire::Error) -> Self {
        match e {
            kv_wire::Error::Invalid(inner) => inner.into(),
            other => Error::Invalid {
                message: other.to_string(),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use std::net::SocketAddr;

    use super::*;

    fn wire(kind: ErrorKind) -> Error {
        Error::from_wire(WireError {
            kind,
            message: "m".into(),
            node: "node2".into(),
        })
    }

    #[test]
    fn wire_kinds_map_to_exit_codes() {
        let cases = [
            (ErrorKind::Unavailable, 3),
            (ErrorKind::Overloaded, 3),
            (ErrorKind::TooManySiblings, 3),
            (ErrorKind::Corrupt, 3),
            (ErrorKind::Indeterminate, 4),
            (ErrorKind::Internal, 4),
            (ErrorKind::Refused, 5),
            (ErrorKind::Invalid, 2),
            (ErrorKind::Storage, 7),
        ];
        for (kind, code) in cases {
            assert_eq!(wire(kind).exit_code(), code, "{kind:?}");
        }
    }

    #[test]
    fn wire_errors_keep_the_node_and_message() {
        assert_eq!(
            wire(ErrorKind::Unavailable),
            Error::Unavailable {
                node: "node2".into(),
                message: "m".into()
            }
        );
        assert_eq!(
            wire(ErrorKind::Refused),
            Error::Refused {
                endpoint: "node2".into(),
                message: "m".into()
            }
        );
        let e = wire(ErrorKind::TooManySiblings);
        assert_eq!(e.to_string(), "too many siblings: node2: m");
        assert!(e.hint().contains("--context"));
        assert!(wire(ErrorKind::Invalid).to_string().contains("node2"));
    }

    #[test]
    fn transport_errors_split_on_whether_they_were_sent() {
        let addr: SocketAddr = "127.0.0.1:7101".parse().unwrap();
        let ep = "127.0.0.1:7101";
        let t = |e: kv_transport::Error| Error::from_transport(ep, &e);
        let connect = t(kv_transport::Error::Connect {
            addr,
            reason: "x".into(),
        });
        assert_eq!(connect.exit_code(), 3);
        let unsent = t(kv_transport::Error::Timeout {
            addr,
            timeout_ms: 5,
            sent: false,
        });
        assert_eq!(unsent.exit_code(), 3);
        let sent = t(kv_transport::Error::Timeout {
            addr,
            timeout_ms: 5,
            sent: true,
        });
        assert!(matches!(sent, Error::Indeterminate { .. }));
        assert_eq!(sent.exit_code(), 4);
        let lost = t(kv_transport::Error::Lost {
            addr,
            reason: "reset".into(),
            sent: true,
        });
        assert_eq!(lost.exit_code(), 4);
        let refused = t(kv_transport::Error::Refused {
            addr,
            reason: "bad cert".into(),
        });
        assert_eq!(refused.exit_code(), 5);
        assert_eq!(
            refused.to_string(),
            "refused: 127.0.0.1:7101: TLS handshake refused: bad cert"
        );
    }

    #[test]
    fn each_unavailability_gets_its_own_advice_once() {
        let quorum = Error::Unavailable {
            node: "node1".into(),
            message: "only 1 of the 3 replicas of this key are alive (node1), with 0 pending owner(s) and 0 fallback node(s); W=2 needs 2; nothing was stored".into(),
        };
        assert!(quorum.is_quorum());
        assert!(quorum.hint().contains("--w"), "{}", quorum.hint());
        assert!(!quorum.hint().contains("nothing was stored"));
        let dns = Error::Unavailable {
            node: "nosuch:7001".into(),
            message: "cannot resolve nosuch:7001: failed to lookup".into(),
        };
        assert!(!dns.is_quorum());
        assert!(dns.hint().contains("host name"), "{}", dns.hint());
        let port = Error::from_transport(
            "127.0.0.1:9",
            &kv_transport::Error::Connect {
                addr: "127.0.0.1:9".parse().unwrap(),
                reason: "timed out".into(),
            },
        );
        assert!(!port.is_quorum());
        assert!(port.hint().contains("QUIC port"), "{}", port.hint());
        for e in [&quorum, &dns, &port] {
            assert!(!e.hint().contains("--w/--r"), "{}", e.hint());
        }
    }

    #[test]
    fn local_problems_are_usage_errors() {
        let bad_key: Error = kv_types::limits::check_key(b"").unwrap_err().into();
        assert_eq!(bad_key.exit_code(), 2);
        // One prefix, not three.
        assert_eq!(bad_key.to_string(), "invalid request: key is empty");
        let wire: Error =
            kv_wire::Error::Invalid(kv_types::limits::check_key(b"").unwrap_err()).into();
        assert_eq!(wire, bad_key);
        let config = Error::Config {
            message: "x".into(),
        };
        assert_eq!(config.exit_code(), 2);
        assert!(config.hint().contains("scripts/cluster up"));
    }
}
