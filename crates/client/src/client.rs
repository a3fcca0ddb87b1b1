//! The client: one QUIC endpoint, what it knows of the cluster, and the
//! requests.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kv_transport::{Endpoint, TransportSettings};
use kv_types::{NodeId, Object};
use kv_wire::{
    CertsReport, ExplainReport, GetReply, Op as WireOp, PlanReport, RepairReport, Request,
    RequestBody, Response, RingReport, StatusReport,
};
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tracing::debug;

use crate::context::check_context;
use crate::failover::Op;
use crate::known::Known;
use crate::resolve::{looks_like_host_port, lookup, pick};
use crate::routing::{DecisionRecord, Hop, Routing};
use crate::send::{Answer, Shared};
use crate::{ClientSettings, Error, Result, cache};

/// How long [`Client::close`] waits for the close to reach the nodes.
const CLOSE_DEADLINE: Duration = Duration::from_millis(10);

/// The client's QUIC idle timeout: a connection silent this long (no
/// answer to keep-alives) is closed and its requests fail.
const CLIENT_IDLE_TIMEOUT: Duration = Duration::from_secs(3);

/// How long [`Client::save_cache`] waits for a ring refresh in flight.
const REFRESH_WAIT: Duration = Duration::from_millis(200);

/// A connection to the cluster. Cheap to share behind an `Arc`; every
/// method may be called concurrently (requests are multiplexed on one QUIC
/// connection per node). A request about a key goes to one of the key's
/// replicas, as the router orders them (see the crate documentation); the client
/// learns the ring with a `Ring` request in the background, at first and
/// whenever an answer shows that the ring changed.
pub struct Client {
    shared: Arc<Shared>,
    /// Deadline of one request, failover included.
    timeout: Duration,
    /// The ring refresh in flight, if any.
    refresh: Mutex<Option<JoinHandle<()>>>,
    /// Where what the client learned is kept between runs.
    cache_file: Option<PathBuf>,
    /// The configured endpoints (the cache's key).
    endpoints: Vec<String>,
    /// Where the identity's certificate, key and `ca.pem` are, for
    /// [`Client::reload_certificates`].
    certs: kv_tls::TlsFiles,
}

impl Client {
    /// Loads the identity's certificates and binds a local UDP socket whose
    /// address family matches the endpoints. Endpoint names are resolved
    /// here; no node is contacted until the first request. What the cache
    /// file holds (a ring, dead endpoints) is used when it is fresh and
    /// readable, and ignored otherwise.
    ///
    /// # Errors
    /// [`Error::Config`] when no endpoint is given, an endpoint is not
    /// `HOST:PORT`, the certificates are missing or unusable (naming the
    /// file), the routing mode is unknown, the router settings do not
    /// validate, or the socket cannot be bound.
    pub async fn connect(config: ClientSettings) -> Result<Client> {
        if config.endpoints.is_empty() {
            return Err(Error::Config {
                message: "no endpoints given".into(),
            });
        }
        let mode = match &config.router_mode {
            Some(name) => Some(name.parse::<kv_router::Mode>().map_err(|e| Error::Config {
                message: e.to_string(),
            })?),
            None => None,
        };
        let files = kv_tls::TlsFiles::in_dir(&config.certs_dir, &config.identity);
        let creds = kv_tls::load(&files).map_err(|e| Error::Config {
            message: format!("cannot load the {:?} certificate: {e}", config.identity),
        })?;
        let certs = files.clone();
        let mut resolved = Vec::with_capacity(config.endpoints.len());
        for name in &config.endpoints {
            if !looks_like_host_port(name) {
                return Err(Error::Config {
                    message: format!("endpoint {name:?} is not HOST:PORT"),
                });
            }
            let addrs = lookup(name, config.timeout).await.unwrap_or_else(|e| {
                debug!(endpoint = %name, error = %e, "endpoint did not resolve; will retry on use");
                Vec::new()
            });
            resolved.push((name.clone(), addrs));
        }
        let ipv6 = resolved
            .iter()
            .flat_map(|(_, addrs)| addrs)
            .any(SocketAddr::is_ipv6);
        let configured: Vec<Hop> = resolved
            .into_iter()
            .map(|(name, addrs)| Hop {
                addr: pick(&addrs, ipv6),
                node: None,
                name,
            })
            .collect();
        let bind: SocketAddr = if ipv6 {
            SocketAddr::from((std::net::Ipv6Addr::UNSPECIFIED, 0))
        } else {
            SocketAddr::from((std::net::Ipv4Addr::UNSPECIFIED, 0))
        };
        let connect_timeout = config.connect_timeout.min(config.timeout);
        let transport = TransportSettings {
            connect_timeout,
            // A killed node's connection is given up after 3 s of silence
            // (keep-alives every second), so a request sent on it fails
            // then instead of waiting out the whole request timeout.
            idle_timeout: CLIENT_IDLE_TIMEOUT,
            keep_alive: CLIENT_IDLE_TIMEOUT / 3,
            ..TransportSettings::default()
        };
        let endpoint = Endpoint::client(bind, &creds, transport)
            .map_err(|e| Error::from_transport("local endpoint", &e))?;
        let routing = Arc::new(
            Routing::with_settings(
                mode,
                config.decision_log_rate,
                config.router_settings.clone().unwrap_or_default(),
            )
            .map_err(|message| Error::Config {
                message: format!("the client's router settings: {message}"),
            })?,
        );
        if let Some(path) = &config.cache_file {
            cache::load(path, &config.endpoints, &routing);
        }
        Ok(Client {
            shared: Arc::new(Shared {
                endpoint,
                routing,
                configured,
                ipv6,
                connect_timeout,
                ring_version: AtomicU64::new(0),
            }),
            timeout: config.timeout,
            refresh: Mutex::new(None),
            cache_file: config.cache_file,
            endpoints: config.endpoints,
            certs,
        })
    }

    /// Loads the identity's certificate, key and `ca.pem` again from the
    /// certificate directory and uses them for every connection made from
    /// now on; open connections keep the ones they were made with. What a
    /// long-running client calls at each step of a CA rotation (`kvctl
    /// certs rotate`), as nodes reload on SIGHUP. On an error nothing
    /// changes.
    ///
    /// # Errors
    /// [`Error::Config`] when the files do not load (naming the file) or
    /// carry another identity than the one the client connected with.
    pub fn reload_certificates(&self) -> Result<()> {
        let creds = kv_tls::load(&self.certs).map_err(|e| Error::Config {
            message: format!("cannot reload the certificates: {e}"),
        })?;
        self.shared
            .endpoint
            .reload(&creds)
            .map_err(|e| Error::from_transport("local endpoint", &e))
    }

    /// Quorum read of `key`; `r` overrides the cluster's read quorum. A key
    /// that was deleted or never written is not an error: the reply has
    /// `deleted` set and no values.
    ///
    /// # Errors
    /// See [`Error`]; reads fail over to other endpoints on any transport
    /// failure except a TLS refusal.
    pub async fn get(&self, key: &[u8], r: Option<u8>) -> Result<GetReply> {
        let body = RequestBody::Get {
            key: key.to_vec(),
            r,
            hedged: false,
        };
        match self.send_about(Op::Read, Some(key), body).await? {
            (_, Response::Get(reply)) => Ok(reply),
            (node, other) => Err(unexpected(&node, "a read result", &other)),
        }
    }

    /// Quorum write of `value` under `key`, superseding exactly what
    /// `context` (from a previous [`Client::get`]; empty for a blind write)
    /// saw; `w` overrides the cluster's write quorum. Returns the causal
    /// context of the new version.
    ///
    /// # Errors
    /// See [`Error`]. A write is sent to another endpoint only when it
    /// certainly did not reach the first; after that it is reported as
    /// [`Error::Indeterminate`], never repeated.
    pub async fn put(
        &self,
        key: &[u8],
        value: &[u8],
        context: &[u8],
        w: Option<u8>,
    ) -> Result<Vec<u8>> {
        check_context(context)?;
        let body = RequestBody::Put {
            key: key.to_vec(),
            value: value.to_vec(),
            context: context.to_vec(),
            w,
        };
        self.write(key, body).await
    }

    /// Quorum delete of `key`: a tombstone superseding what `context` saw.
    /// Returns the causal context of the tombstone.
    ///
    /// # Errors
    /// As for [`Client::put`].
    pub async fn delete(&self, key: &[u8], context: &[u8], w: Option<u8>) -> Result<Vec<u8>> {
        check_context(context)?;
        let body = RequestBody::Delete {
            key: key.to_vec(),
            context: context.to_vec(),
            w,
        };
        self.write(key, body).await
    }

    /// Membership and ring as the answering node sees them.
    ///
    /// # Errors
    /// See [`Error`].
    pub async fn status(&self) -> Result<StatusReport> {
        match self.send(Op::Read, RequestBody::Status).await? {
            (_, Response::Status(report)) => Ok(report),
            (node, other) => Err(unexpected(&node, "a status report", &other)),
        }
    }

    /// Membership and ring as node `node` sees them: asked of that node
    /// itself (its address from any node's status), never of another, so
    /// an error means `node` did not answer (or is unknown).
    ///
    /// # Errors
    /// [`Error::Unavailable`] when `node` does not answer in time,
    /// [`Error::Invalid`] when no node knows it; else see [`Error`].
    pub async fn status_of(&self, node: &NodeId) -> Result<StatusReport> {
        match self.call_node(node, RequestBody::Status).await? {
            Response::Status(report) => Ok(report),
            other => Err(unexpected(node.as_str(), "a status report", &other)),
        }
    }

    /// Every node's certificate (expiry, CA, CAs trusted) as node `node`
    /// knows it: its own as loaded last, the others' as they gossip them.
    /// Asked of that node itself, like [`Client::status_of`].
    ///
    /// # Errors
    /// As [`Client::status_of`]; [`Error::Invalid`] also when `node` runs
    /// a build that does not answer this request.
    pub async fn certs_of(&self, node: &NodeId) -> Result<CertsReport> {
        match self.call_node(node, RequestBody::Certs).await? {
            Response::Certs(report) => Ok(report),
            other => Err(unexpected(node.as_str(), "a certificates report", &other)),
        }
    }

    /// How the answering node would route a read (`put` false) or a write
    /// of `key`, and why.
    ///
    /// # Errors
    /// See [`Error`].
    pub async fn explain(&self, key: &[u8], put: bool) -> Result<ExplainReport> {
        let op = if put { WireOp::Put } else { WireOp::Get };
        let body = RequestBody::Explain {
            key: key.to_vec(),
            op,
        };
        match self.send(Op::Read, body).await? {
            (_, Response::Explain(report)) => Ok(report),
            (node, other) => Err(unexpected(&node, "an explain report", &other)),
        }
    }

    /// The routing decisions a node logged (a sample; its own when `node`
    /// is given, else the answering node's), each as JSON, newest last:
    /// those of `key` (any when `None`), at most `last`. Returns the node
    /// that answered with them.
    ///
    /// # Errors
    /// See [`Error`].
    pub async fn decisions(
        &self,
        node: Option<&NodeId>,
        key: Option<&[u8]>,
        last: u32,
    ) -> Result<(String, Vec<String>)> {
        let body = RequestBody::Decisions {
            key: key.map(<[u8]>::to_vec),
            last,
        };
        let (answering, response) = match node {
            Some(node) => (node.to_string(), self.call_node(node, body).await?),
            None => self.send(Op::Read, body).await?,
        };
        match response {
            Response::Decisions(records) => Ok((answering, records)),
            other => Err(unexpected(&answering, "decisions", &other)),
        }
    }

    /// Switches `node`'s routing mode (needs the `admin` identity); its
    /// router forgets what it learned.
    ///
    /// # Errors
    /// As [`Client::local_get`]; `Invalid` for an unknown mode.
    pub async fn router_mode(&self, node: &NodeId, mode: &str) -> Result<()> {
        let body = RequestBody::RouterMode {
            mode: mode.to_string(),
        };
        match self.call_node(node, body).await? {
            Response::Ack => Ok(()),
            other => Err(unexpected(node.as_str(), "an ack", &other)),
        }
    }

    /// The versions `node` itself stores for `key`, without a quorum:
    /// `None` when it stores nothing. The node's address comes from
    /// [`Client::status`]; the call checks that the certificate behind that
    /// address is `node`'s.
    ///
    /// # Errors
    /// [`Error::Invalid`] when the cluster does not know `node`; otherwise
    /// see [`Error`] (there is no failover: only that node can answer).
    pub async fn local_get(&self, node: &NodeId, key: &[u8]) -> Result<Option<Object>> {
        match self
            .call_node(node, RequestBody::LocalGet { key: key.to_vec() })
            .await?
        {
            Response::Object(object) => Ok(object),
            other => Err(unexpected(node.as_str(), "a stored object", &other)),
        }
    }

    /// Starts a full anti-entropy pass on `node` (needs the `admin`
    /// identity) and returns its progress.
    ///
    /// # Errors
    /// As [`Client::local_get`]; a refusal when the certificate is not an
    /// admin one.
    pub async fn repair(&self, node: &NodeId) -> Result<RepairReport> {
        match self.call_node(node, RequestBody::Repair).await? {
            Response::Repair(report) => Ok(report),
            other => Err(unexpected(node.as_str(), "a repair report", &other)),
        }
    }

    /// Progress of `node`'s anti-entropy pass.
    ///
    /// # Errors
    /// As [`Client::local_get`].
    pub async fn repair_status(&self, node: &NodeId) -> Result<RepairReport> {
        match self.call_node(node, RequestBody::RepairStatus).await? {
            Response::Repair(report) => Ok(report),
            other => Err(unexpected(node.as_str(), "a repair report", &other)),
        }
    }

    /// Drains (decommissions) `node`, or with `dry_run` only plans it
    /// (needs the `admin` identity); returns the plan.
    ///
    /// # Errors
    /// As [`Client::local_get`]; a refusal without an admin certificate.
    pub async fn drain(&self, node: &NodeId, dry_run: bool) -> Result<PlanReport> {
        match self.call_node(node, RequestBody::Drain { dry_run }).await? {
            Response::Plan(plan) => Ok(plan),
            other => Err(unexpected(node.as_str(), "a plan", &other)),
        }
    }

    /// Removes `node`, which must be down for good, from the ring (needs the
    /// `admin` identity); the answering node announces it to the cluster.
    ///
    /// # Errors
    /// As [`Client::status`]; `Invalid` when the node is alive or unknown.
    pub async fn remove(&self, node: &NodeId) -> Result<()> {
        match self
            .send(
                Op::Read,
                RequestBody::Remove {
                    node: node.to_string(),
                },
            )
            .await?
        {
            (_, Response::Ack) => Ok(()),
            (answering, other) => Err(unexpected(&answering, "an ack", &other)),
        }
    }

    /// What a node joining in `zone` with `weight` would move.
    ///
    /// # Errors
    /// As [`Client::status`].
    pub async fn plan_join(&self, zone: &str, weight: u32) -> Result<PlanReport> {
        match self
            .send(
                Op::Read,
                RequestBody::PlanJoin {
                    zone: zone.to_string(),
                    weight,
                },
            )
            .await?
        {
            (_, Response::Plan(plan)) => Ok(plan),
            (node, other) => Err(unexpected(&node, "a plan", &other)),
        }
    }

    /// Sends `body` to one named node (found through `status` on any
    /// endpoint) and returns its answer; error answers become errors.
    async fn call_node(&self, node: &NodeId, body: RequestBody) -> Result<Response> {
        let deadline = Instant::now() + self.timeout;
        let status = self.status().await?;
        let Some(report) = status.nodes.iter().find(|n| n.id == node.as_str()) else {
            let known: Vec<&str> = status.nodes.iter().map(|n| n.id.as_str()).collect();
            return Err(Error::Invalid {
                message: format!(
                    "{} does not know node {node} (known: {})",
                    status.node,
                    known.join(", ")
                ),
            });
        };
        let remaining = deadline.saturating_duration_since(Instant::now());
        let addrs =
            lookup(&report.addr, remaining)
                .await
                .map_err(|message| Error::Unavailable {
                    node: node.to_string(),
                    message,
                })?;
        let addr = pick(&addrs, self.shared.ipv6).ok_or_else(|| Error::Unavailable {
            node: node.to_string(),
            message: format!("{} has no address this client can reach", report.addr),
        })?;
        let request = request(body)?;
        let remaining = deadline.saturating_duration_since(Instant::now());
        let reply = self
            .shared
            .endpoint
            .call(addr, node.as_str(), &request, remaining)
            .await
            .map_err(|e| Error::from_transport(node.as_str(), &e))?;
        self.shared.saw_ring(reply.ring_version);
        match reply.response {
            Response::Error(e) => Err(Error::from_wire(e)),
            other => Ok(other),
        }
    }

    /// The ring version (placement id) of the node that answered last, 0
    /// before any answer: a change means the cluster's ring changed.
    pub fn ring_version(&self) -> u64 {
        self.shared.ring_version.load(Ordering::Relaxed)
    }

    /// The configured endpoints, in configuration order.
    pub fn endpoints(&self) -> impl Iterator<Item = &str> {
        self.endpoints.iter().map(String::as_str)
    }

    /// The routing mode the client uses (its own choice, else the
    /// cluster's once learned, else `scoring`).
    pub fn routing_mode(&self) -> kv_router::Mode {
        self.shared.routing.mode()
    }

    /// Requests answered so far, per node (or endpoint, when the node
    /// behind it is not known).
    pub fn coordinated(&self) -> std::collections::BTreeMap<String, u64> {
        self.shared.routing.coordinated()
    }

    /// `(sent, denied)` hedged reads so far.
    pub fn hedges(&self) -> (u64, u64) {
        self.shared.routing.hedges()
    }

    /// The preference list of `key` (its N replicas, in ring order) by the
    /// ring the client last learned; `None` before it learned one.
    pub fn preference_list(&self, key: &[u8]) -> Option<Vec<NodeId>> {
        self.shared.routing.preference_list(key)
    }

    /// The routing decisions logged since the last call (all of them for a
    /// `decision_log_rate` of 1).
    pub fn take_decisions(&self) -> Vec<DecisionRecord> {
        self.shared.routing.take_logged()
    }

    /// The cluster's ring, members and reports, as one node answers them.
    ///
    /// # Errors
    /// See [`Error`].
    pub async fn ring(&self) -> Result<RingReport> {
        match self.send(Op::Read, RequestBody::Ring).await? {
            (_, Response::Ring(report)) => Ok(report),
            (node, other) => Err(unexpected(&node, "a ring report", &other)),
        }
    }

    /// Writes what the client learned (the ring, the endpoints it found
    /// dead and when) to the cache file, if it has one, after waiting
    /// briefly for a ring refresh in flight. Failures are logged, never
    /// fatal: the cache is an optimization.
    pub async fn save_cache(&self) {
        let Some(path) = &self.cache_file else {
            return;
        };
        let handle = self
            .refresh
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        if let Some(handle) = handle {
            let _ = tokio::time::timeout(REFRESH_WAIT, handle).await;
        }
        if let Err(e) = cache::save(path, &self.endpoints, &self.shared.routing) {
            debug!(path = %path.display(), error = %e, "cannot save the client cache");
        }
    }

    /// Closes every connection, telling the nodes at once instead of letting
    /// them wait for the idle timeout. Requests still in flight fail.
    pub async fn close(&self) {
        // The close frames leave at once; the transport then waits for the
        // connections to drain, which a half-open handshake to a dead node
        // would make last its full second. The nodes need no more than the
        // frames, so stop waiting early.
        let _ = tokio::time::timeout(
            CLOSE_DEADLINE,
            self.shared.endpoint.shutdown(CLOSE_DEADLINE),
        )
        .await;
    }

    async fn write(&self, key: &[u8], body: RequestBody) -> Result<Vec<u8>> {
        match self.send_about(Op::Write, Some(key), body).await? {
            (_, Response::Written { context }) => Ok(context),
            (node, other) => Err(unexpected(&node, "a write confirmation", &other)),
        }
    }

    /// Sends a request about no key to any node (see [`Client::send_about`]).
    async fn send(&self, op: Op, body: RequestBody) -> Result<Answer> {
        self.send_about(op, None, body).await
    }

    /// Sends `body` (about `key`, if any) where the router says, failing
    /// over when safe (see [`crate::failover::may_try_next`]); starts a
    /// ring refresh in the background when one is due. Returns the
    /// endpoint that answered and its answer; an error answer is turned
    /// into [`Error`].
    async fn send_about(&self, op: Op, key: Option<&[u8]>, body: RequestBody) -> Result<Answer> {
        if !matches!(body, RequestBody::Ring | RequestBody::RingV2) {
            self.refresh_if_due();
        }
        self.shared.send(op, key, body, self.timeout).await
    }

    /// Fetches the ring in the background when the router wants it and no
    /// fetch is in flight.
    fn refresh_if_due(&self) {
        if !self.shared.routing.wants_refresh() {
            return;
        }
        let mut slot = self.refresh.lock().unwrap_or_else(|p| p.into_inner());
        if slot.as_ref().is_some_and(|h| !h.is_finished()) {
            return;
        }
        let shared = Arc::clone(&self.shared);
        let timeout = self.timeout;
        *slot = Some(tokio::spawn(async move {
            let mut answer = shared
                .send(Op::Read, None, RequestBody::RingV2, timeout)
                .await;
            if matches!(answer, Err(Error::Invalid { .. })) {
                // A node of a build before `RingV2` (a rolling upgrade):
                // the ring without generations.
                answer = shared
                    .send(Op::Read, None, RequestBody::Ring, timeout)
                    .await;
            }
            let learned = match answer {
                Ok((_, Response::RingV2(report))) => Known::from_report_v2(report, Duration::ZERO),
                Ok((_, Response::Ring(report))) => Known::from_report(report, Duration::ZERO),
                Ok((node, _)) => {
                    debug!(%node, "a node answered the ring request with something else");
                    return;
                }
                Err(e) => {
                    debug!(error = %e, "cannot fetch the ring");
                    return;
                }
            };
            match learned {
                Ok(known) => shared.routing.learn(known),
                Err(e) => debug!(error = %e, "unusable ring answer"),
            }
        }));
    }
}

/// A request with a fresh random id, checked as a node would check it.
pub(crate) fn request(body: RequestBody) -> Result<Request> {
    let request = Request {
        id: rand::random(),
        body,
    };
    request.validate().map_err(Error::from)?;
    Ok(request)
}

/// The error for an answer of the wrong kind.
fn unexpected(node: &str, wanted: &str, got: &Response) -> Error {
    let got = match got {
        Response::Get(_) => "a read result",
        Response::Written { .. } => "a write confirmation",
        Response::Object(_) => "a stored object",
        Response::Ack => "an ack",
        Response::Status(_) => "a status report",
        Response::Explain(_) => "an explain report",
        Response::Repair(_) => "a repair report",
        Response::Plan(_) => "a plan",
        Response::Decisions(_) => "decisions",
        Response::Error(_) => "an error",
        Response::Ring(_) | Response::RingV2(_) => "a ring report",
        Response::Certs(_) => "a certificates report",
    };
    Error::Protocol {
        node: node.to_string(),
        message: format!("expected {wanted}, got {got}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_checked_before_sending() {
        let e = request(RequestBody::Get {
            key: vec![],
            r: None,
            hedged: false,
        })
        .unwrap_err();
        assert_eq!(e.exit_code(), 2);
        let e = request(RequestBody::Put {
            key: b"k".to_vec(),
            value: b"v".to_vec(),
            context: vec![],
            w: Some(0),
        })
        .unwrap_err();
        assert!(matches!(e, Error::Invalid { .. }));
    }

    #[tokio::test]
    async fn missing_certificates_are_a_configuration_error() {
        let dir = tempfile::tempdir().unwrap();
        let config = ClientSettings::new(vec!["127.0.0.1:7101".into()], dir.path());
        let Err(e) = Client::connect(config).await else {
            panic!("connected without certificates");
        };
        assert!(matches!(e, Error::Config { .. }), "{e}");
        assert!(e.to_string().contains("ca.pem"), "{e}");
        let Err(e) = Client::connect(ClientSettings::new(vec![], dir.path())).await else {
            panic!("connected without endpoints");
        };
        assert_eq!(e.exit_code(), 2);
    }
}
