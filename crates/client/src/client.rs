//! The client: one QUIC endpoint, a list of nodes, and the requests.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kv_tls::{ANY_NODE, TlsFiles};
use kv_transport::{Endpoint, TransportSettings};
use kv_types::{NodeId, Object};
use kv_wire::{
    ExplainReport, GetReply, Op as WireOp, PlanReport, RepairReport, Request, RequestBody,
    Response, StatusReport,
};
use tokio::time::Instant;
use tracing::debug;

use crate::context::check_context;
use crate::failover::{Op, attempt_order, may_try_next, summarize};
use crate::resolve::{looks_like_host_port, lookup, pick};
use crate::{ClientSettings, Error, Result};

/// Longest time a connection attempt to one endpoint may take before the
/// client moves on to the next one (capped by the request timeout).
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

/// How long an endpoint that could not be reached is tried after the others.
const UNREACHABLE_FOR: Duration = Duration::from_secs(10);

/// How long [`Client::close`] waits for the close to reach the nodes.
const CLOSE_DEADLINE: Duration = Duration::from_millis(10);

/// A connection to the cluster through any of its nodes. Cheap to share
/// behind an `Arc`; every method may be called concurrently (requests are
/// multiplexed on one QUIC connection per node).
pub struct Client {
    /// The QUIC endpoint: one UDP socket, one pooled connection per node.
    endpoint: Arc<Endpoint>,
    /// The configured endpoints, in configuration order.
    targets: Vec<Target>,
    /// Whether the socket is IPv6 (it then reaches IPv4 nodes too).
    ipv6: bool,
    /// Deadline of one request, failover included.
    timeout: Duration,
    /// Per endpoint (same order as `targets`): until when it counts as
    /// unreachable, after a failed connection attempt.
    unreachable_until: Mutex<Vec<Option<Instant>>>,
    /// The ring version of the last answer (0 before any).
    ring_version: AtomicU64,
}

/// One configured endpoint.
#[derive(Clone, Debug)]
struct Target {
    /// `HOST:PORT` as configured, used in messages.
    name: String,
    /// Its address, when it resolved at connect time; names that did not
    /// resolve then are looked up again on each use.
    addr: Option<SocketAddr>,
}

impl Client {
    /// Loads the identity's certificates and binds a local UDP socket whose
    /// address family matches the endpoints. Endpoint names are resolved
    /// here; no node is contacted until the first request.
    ///
    /// # Errors
    /// [`Error::Config`] when no endpoint is given, an endpoint is not
    /// `HOST:PORT`, the certificates are missing or unusable (naming the
    /// file), or the socket cannot be bound.
    pub async fn connect(config: ClientSettings) -> Result<Client> {
        if config.endpoints.is_empty() {
            return Err(Error::Config {
                message: "no endpoints given".into(),
            });
        }
        let files = TlsFiles::in_dir(&config.certs_dir, &config.identity);
        let creds = kv_tls::load(&files).map_err(|e| Error::Config {
            message: format!("cannot load the {:?} certificate: {e}", config.identity),
        })?;
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
        let targets: Vec<Target> = resolved
            .into_iter()
            .map(|(name, addrs)| Target {
                addr: pick(&addrs, ipv6),
                name,
            })
            .collect();
        let bind: SocketAddr = if ipv6 {
            SocketAddr::from((std::net::Ipv6Addr::UNSPECIFIED, 0))
        } else {
            SocketAddr::from((std::net::Ipv4Addr::UNSPECIFIED, 0))
        };
        let transport = TransportSettings {
            connect_timeout: CONNECT_TIMEOUT.min(config.timeout),
            ..TransportSettings::default()
        };
        let endpoint = Endpoint::client(bind, &creds, transport)
            .map_err(|e| Error::from_transport("local endpoint", &e))?;
        Ok(Client {
            endpoint,
            unreachable_until: Mutex::new(vec![None; targets.len()]),
            ring_version: AtomicU64::new(0),
            targets,
            ipv6,
            timeout: config.timeout,
        })
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
        match self.send(Op::Read, body).await? {
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
        self.write(body).await
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
        self.write(body).await
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
        let addr = pick(&addrs, self.ipv6).ok_or_else(|| Error::Unavailable {
            node: node.to_string(),
            message: format!("{} has no address this client can reach", report.addr),
        })?;
        let request = request(body)?;
        let remaining = deadline.saturating_duration_since(Instant::now());
        let reply = self
            .endpoint
            .call(addr, node.as_str(), &request, remaining)
            .await
            .map_err(|e| Error::from_transport(node.as_str(), &e))?;
        self.saw_ring(reply.ring_version);
        match reply.response {
            Response::Error(e) => Err(Error::from_wire(e)),
            other => Ok(other),
        }
    }

    /// The ring version (placement id) of the node that answered last, 0
    /// before any answer: a change means the cluster's ring changed.
    pub fn ring_version(&self) -> u64 {
        self.ring_version.load(Ordering::Relaxed)
    }

    fn saw_ring(&self, version: u64) {
        self.ring_version.store(version, Ordering::Relaxed);
    }

    /// The configured endpoints, in configuration order.
    pub fn endpoints(&self) -> impl Iterator<Item = &str> {
        self.targets.iter().map(|t| t.name.as_str())
    }

    /// Closes every connection, telling the nodes at once instead of letting
    /// them wait for the idle timeout. Requests still in flight fail.
    pub async fn close(&self) {
        // The close frames leave at once; the transport then waits for the
        // connections to drain, which a half-open handshake to a dead node
        // would make last its full second. The nodes need no more than the
        // frames, so stop waiting early.
        let _ = tokio::time::timeout(CLOSE_DEADLINE, self.endpoint.shutdown(CLOSE_DEADLINE)).await;
    }

    async fn write(&self, body: RequestBody) -> Result<Vec<u8>> {
        match self.send(Op::Write, body).await? {
            (_, Response::Written { context }) => Ok(context),
            (node, other) => Err(unexpected(&node, "a write confirmation", &other)),
        }
    }

    /// Sends `body` to the endpoints in turn, starting at a random one, until
    /// one answers or failing over is no longer safe (see
    /// [`may_try_next`]). Returns the endpoint that answered and its answer;
    /// an error answer is turned into [`Error`].
    async fn send(&self, op: Op, body: RequestBody) -> Result<(String, Response)> {
        let request = request(body)?;
        let deadline = Instant::now() + self.timeout;
        let start = rand::random_range(0..self.targets.len().max(1));
        let mut failures = Vec::new();
        for i in attempt_order(start, &self.unreachable()) {
            let remaining = deadline.saturating_duration_since(Instant::now());
            if remaining.is_zero() {
                break;
            }
            let target = &self.targets[i];
            let addr = match self.address(target, remaining).await {
                Ok(addr) => addr,
                Err(e) => {
                    failures.push(e);
                    continue;
                }
            };
            let result = self
                .endpoint
                .call(addr, ANY_NODE, &request, remaining)
                .await;
            let unreachable = matches!(result, Err(kv_transport::Error::Connect { .. }));
            self.mark(i, unreachable);
            let result = result.map(|reply| {
                self.saw_ring(reply.ring_version);
                reply.response
            });
            match result {
                Ok(Response::Error(e)) => return Err(Error::from_wire(e)),
                Ok(response) => return Ok((target.name.clone(), response)),
                Err(e) => {
                    debug!(endpoint = %target.name, id = request.id, error = %e, "request failed");
                    let error = Error::from_transport(&target.name, &e);
                    if !may_try_next(op, &e) {
                        return Err(error);
                    }
                    failures.push(error);
                }
            }
        }
        Err(summarize(failures).unwrap_or_else(|| Error::Indeterminate {
            node: "client".into(),
            message: format!("no endpoint answered within {:?}", self.timeout),
        }))
    }

    /// Which endpoints failed to connect recently.
    fn unreachable(&self) -> Vec<bool> {
        let now = Instant::now();
        // A poisoned lock only means a panic elsewhere; the marks stay usable.
        let marks = self
            .unreachable_until
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        marks
            .iter()
            .map(|m| m.is_some_and(|until| until > now))
            .collect()
    }

    /// Records whether endpoint `i` could be connected to just now.
    fn mark(&self, i: usize, unreachable: bool) {
        let mut marks = self
            .unreachable_until
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        if let Some(mark) = marks.get_mut(i) {
            *mark = unreachable.then(|| Instant::now() + UNREACHABLE_FOR);
        }
    }

    /// The address of `target`, resolving its name again if it did not
    /// resolve at connect time.
    async fn address(&self, target: &Target, timeout: Duration) -> Result<SocketAddr> {
        if let Some(addr) = target.addr {
            return Ok(addr);
        }
        let unavailable = |message: String| Error::Unavailable {
            node: target.name.clone(),
            message,
        };
        let addrs = lookup(&target.name, timeout).await.map_err(unavailable)?;
        pick(&addrs, self.ipv6).ok_or_else(|| unavailable("resolves to IPv6 only".into()))
    }
}

/// A request with a fresh random id, checked as a node would check it.
fn request(body: RequestBody) -> Result<Request> {
    let request = Request {
        id: rand::random(),
        body,
    };
    request.validate().map_err(|e| Error::Invalid {
        message: e.to_string(),
    })?;
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
