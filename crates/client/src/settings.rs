//! What a client needs to know: where the cluster is and which certificate
//! to present.

use std::path::PathBuf;
use std::time::Duration;

/// The certificate a client presents unless told otherwise (`client.pem` and
/// `client.key`, written by `kvctl certs init`).
pub const DEFAULT_IDENTITY: &str = "client";

/// The default deadline of one request, retries on other endpoints included.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

/// The default longest wait for one connection's handshake. Another node
/// is raced much earlier (see [`crate::Client`]): this only bounds an
/// attempt that nothing else can replace.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

/// Settings of a [`crate::Client`].
#[derive(Clone, Debug, PartialEq)]
pub struct ClientSettings {
    /// Nodes to send requests to, as `HOST:PORT` (IP literals or names,
    /// resolved with the system resolver). Any node coordinates any request;
    /// more than one lets the client fail over.
    pub endpoints: Vec<String>,
    /// Directory holding `ca.pem` and the identity's `<identity>.pem` and
    /// `<identity>.key`, as written by `kvctl certs init`.
    pub certs_dir: PathBuf,
    /// File stem of the certificate to present: `client` (default) or
    /// `admin`, or a name made with `kv_tls::add_client`.
    pub identity: String,
    /// Deadline of one request, including failing over to other endpoints.
    pub timeout: Duration,
    /// Longest wait for one handshake (capped by `timeout`).
    pub connect_timeout: Duration,
    /// The routing mode (`plain`, `snitch`, `hwlb`, `c3`, `p2c`,
    /// `scoring`); `None`: the cluster's. `plain` sends a request to its
    /// key's replicas in preference-list order.
    pub router_mode: Option<String>,
    /// The client's own router tunables (it routes each request to a
    /// coordinator and hedges reads); `None`: `RouterSettings::default()`.
    /// Their `mode` and `coordinators` are not used (`router_mode` and
    /// every node).
    pub router_settings: Option<kv_router::RouterSettings>,
    /// Share of routing decisions kept for [`crate::Client::take_decisions`]
    /// (0.0..=1.0; default 0).
    pub decision_log_rate: f64,
    /// A file where what the client learned (ring, dead endpoints) is kept
    /// between runs; `None`: nothing is kept.
    pub cache_file: Option<PathBuf>,
}

impl ClientSettings {
    /// A configuration with the default identity and timeouts, the
    /// cluster's routing mode, no decision log and no cache.
    pub fn new(endpoints: Vec<String>, certs_dir: impl Into<PathBuf>) -> Self {
        ClientSettings {
            endpoints,
            certs_dir: certs_dir.into(),
            identity: DEFAULT_IDENTITY.to_string(),
            timeout: DEFAULT_TIMEOUT,
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            router_mode: None,
            router_settings: None,
            decision_log_rate: 0.0,
            cache_file: None,
        }
    }
}
