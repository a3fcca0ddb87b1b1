//! The error type of `kv-transport`.

use std::net::SocketAddr;

/// Result alias of this crate.
pub type Result<T> = std::result::Result<T, Error>;

/// Why a call or the endpoint failed. The variants tell a coordinator what
/// it may conclude about the remote side: [`Error::is_unsent`] errors prove
/// the request never reached the peer's handler; the others may hide a
/// request that was executed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Binding the UDP socket or building the endpoint failed.
    #[error("cannot bind the QUIC endpoint on {addr}: {reason}")]
    Bind {
        /// Requested address.
        addr: SocketAddr,
        /// The OS or quinn error.
        reason: String,
    },
    /// Certificates could not be loaded or turned into a TLS configuration.
    #[error(transparent)]
    Tls(#[from] kv_tls::Error),
    /// The connection could not be established (unreachable, handshake
    /// timeout); the request was not sent.
    #[error("cannot connect to {addr}: {reason}")]
    Connect {
        /// Peer address.
        addr: SocketAddr,
        /// What failed.
        reason: String,
    },
    /// The peer refused our certificate, or presented one we refuse (wrong
    /// CA, wrong role, wrong node id). The request was not sent.
    #[error("TLS refused by or for {addr}: {reason}")]
    Refused {
        /// Peer address.
        addr: SocketAddr,
        /// Handshake alert or verification failure.
        reason: String,
    },
    /// No answer in time. `sent` tells whether the request had been fully
    /// handed to QUIC (then it may have been executed).
    #[error("no answer from {addr} within {timeout_ms} ms")]
    Timeout {
        /// Peer address.
        addr: SocketAddr,
        /// The deadline, in milliseconds.
        timeout_ms: u64,
        /// Whether the whole request was sent before the deadline.
        sent: bool,
    },
    /// The connection or stream broke. `sent` as for [`Error::Timeout`].
    #[error("connection to {addr} lost: {reason}")]
    Lost {
        /// Peer address.
        addr: SocketAddr,
        /// What broke.
        reason: String,
        /// Whether the whole request was sent before it broke.
        sent: bool,
    },
    /// The peer answered with bytes that are not a valid frame or message.
    #[error("bad answer from {addr}: {reason}")]
    Protocol {
        /// Peer address.
        addr: SocketAddr,
        /// The decoding error.
        reason: String,
    },
    /// The request could not be encoded (too large).
    #[error("cannot encode request: {0}")]
    Encode(#[from] kv_wire::Error),
}

impl Error {
    /// Whether the request certainly did not reach the remote handler, so a
    /// write can be reported as "not stored" on this replica.
    pub fn is_unsent(&self) -> bool {
        match self {
            Error::Connect { .. }
            | Error::Refused { .. }
            | Error::Encode(_)
            | Error::Bind { .. } => true,
            Error::Tls(_) => true,
            Error::Timeout { sent, .. } | Error::Lost { sent, .. } => !sent,
            Error::Protocol { .. } => false,
        }
    }

    /// Whether this is a timeout.
    pub fn is_timeout(&self) -> bool {
        matches!(self, Error::Timeout { .. })
    }
}
