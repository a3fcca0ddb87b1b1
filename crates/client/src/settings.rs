//! What a client needs to know: where the cluster is and which certificate
//! to present.

use std::path::PathBuf;
use std::time::Duration;

/// The certificate a client presents unless told otherwise (`client.pem` and
/// `client.key`, written by `kvctl certs init`).
pub const DEFAULT_IDENTITY: &str = "client";

/// The default deadline of one request, retries on other endpoints included.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

/// Settings of a [`crate::Client`].
#[derive(Clone, Debug, PartialEq, Eq)]
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
}

impl ClientSettings {
    /// A configuration with the default identity and timeout.
    pub fn new(endpoints: Vec<String>, certs_dir: impl Into<PathBuf>) -> Self {
        ClientSettings {
            endpoints,
            certs_dir: certs_dir.into(),
            identity: DEFAULT_IDENTITY.to_string(),
            timeout: DEFAULT_TIMEOUT,
        }
    }
}
