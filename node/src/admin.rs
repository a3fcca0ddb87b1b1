//! The HTTP admin endpoint (axum): read-only views of the node for
//! monitoring.
//!
//! - `GET /metrics`: Prometheus text format (see `metrics` for the series);
//!   sampled gauges are refreshed on every scrape.
//! - `GET /status`: JSON, the node's view of membership (every node with
//!   its QUIC, RESP and admin addresses, zone, status, liveness, ring
//!   share), the ring version, and the router's score of every ring member
//!   for reads and writes.
//! - `GET /health`: 200 and `{"status": "ok", ...}` while the node serves;
//!   200 and `"status": "disk_full"` while it refuses writes because free
//!   space is below `[storage] min_free_bytes` (reads go on; `disk_full`
//!   and `free_bytes` fields say so); 503 while its storage engine is
//!   failed.
//!
//! Plaintext and unauthenticated by design (design.md, Transport and security): it changes
//! nothing, binds to loopback by default, and answers at most
//! [`MAX_CONCURRENT`] requests at a time (others get 503). It holds at most
//! [`MAX_CONNECTIONS`] connections (more are closed at once), each for at
//! most [`CONNECTION_DEADLINE`], with [`HEADER_DEADLINE`] to send headers:
//! idle clients cannot take the file descriptors the node's storage and
//! QUIC endpoint need.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use kv_router::Op;
use kv_types::NodeId;
use metrics_exporter_prometheus::PrometheusHandle;
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::{info, warn};

use crate::metrics::Sources;
use crate::report;

/// The `[admin]` section of the node's config file.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct AdminConfig {
    /// Whether the node serves the admin endpoint. Default true.
    pub enabled: bool,
    /// TCP address to bind. Default `127.0.0.1:9190` (loopback).
    pub listen: SocketAddr,
    /// Address published in gossip and shown by `kvctl status`. Default:
    /// the bound address.
    pub advertise: Option<SocketAddr>,
}

impl Default for AdminConfig {
    fn default() -> Self {
        AdminConfig {
            enabled: true,
            listen: SocketAddr::from(([127, 0, 0, 1], 9190)),
            advertise: None,
        }
    }
}

/// Requests served at once; more get 503.
const MAX_CONCURRENT: usize = 16;

/// Connections open at once; a connection beyond it is closed at accept,
/// so idle clients cannot use up the node's file descriptors (which its
/// storage and QUIC endpoint need too).
const MAX_CONNECTIONS: usize = 64;

/// Time a client has to send a request's headers.
const HEADER_DEADLINE: Duration = Duration::from_secs(10);

/// Longest life of one connection (keep-alive included): a scraper
/// reconnects, an idle or slow client is cut off.
const CONNECTION_DEADLINE: Duration = Duration::from_secs(60);

/// How often histogram samples are folded in when nobody scrapes (the
/// exporter buffers them until then).
const UPKEEP_EVERY: Duration = Duration::from_secs(5);

/// Shared by the handlers.
struct AdminState {
    sources: Sources,
    prometheus: PrometheusHandle,
    busy: Semaphore,
}

/// A bound admin endpoint, not yet serving.
pub struct AdminListener {
    listener: tokio::net::TcpListener,
    listen: SocketAddr,
}

impl AdminListener {
    /// Binds `listen`.
    ///
    /// # Errors
    /// When the address cannot be bound.
    pub async fn bind(listen: SocketAddr) -> anyhow::Result<Self> {
        let listener = tokio::net::TcpListener::bind(listen).await.with_context(|| {
            format!(
                "cannot bind the admin endpoint to {listen} (set [admin] listen to a free port, or [admin] enabled = false)"
            )
        })?;
        Ok(AdminListener { listener, listen })
    }

    /// The bound address.
    pub fn local_addr(&self) -> SocketAddr {
        self.listener.local_addr().unwrap_or(self.listen)
    }

    /// Serves `/metrics`, `/status` and `/health` until
    /// [`AdminServer::shutdown`].
    pub fn serve(self, sources: Sources, prometheus: PrometheusHandle) -> AdminServer {
        let local_addr = self.local_addr();
        let state = Arc::new(AdminState {
            sources,
            prometheus,
            busy: Semaphore::new(MAX_CONCURRENT),
        });
        let app = Router::new()
            .route("/metrics", get(metrics))
            .route("/status", get(status))
            .route("/health", get(health))
            .with_state(state.clone());
        let (tasks, stop) = (TaskTracker::new(), CancellationToken::new());
        let shutdown = stop.clone();
        let listener = self.listener;
        let connections = tasks.clone();
        tasks.spawn(accept_loop(listener, app, connections, shutdown));
        let upkeep_stop = stop.clone();
        tasks.spawn(async move {
            let mut tick = tokio::time::interval(UPKEEP_EVERY);
            loop {
                tokio::select! {
                    _ = upkeep_stop.cancelled() => break,
                    _ = tick.tick() => state.prometheus.run_upkeep(),
                }
            }
        });
        info!(addr = %local_addr, "admin endpoint ready (/metrics, /status, /health)");
        AdminServer { tasks, stop }
    }
}

/// A running admin endpoint.
pub struct AdminServer {
    tasks: TaskTracker,
    stop: CancellationToken,
}

impl AdminServer {
    /// Stops serving and waits (at most `deadline`) for open requests.
    pub async fn shutdown(&self, deadline: Duration) {
        self.stop.cancel();
        self.tasks.close();
        let _ = tokio::time::timeout(deadline, self.tasks.wait()).await;
    }
}

/// Accepts connections until `stop`, at most [`MAX_CONNECTIONS`] at once,
/// each served by hyper with [`HEADER_DEADLINE`] and [`CONNECTION_DEADLINE`].
async fn accept_loop(
    listener: tokio::net::TcpListener,
    app: Router,
    tasks: TaskTracker,
    stop: CancellationToken,
) {
    let open = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    loop {
        let accepted = tokio::select! {
            _ = stop.cancelled() => return,
            accepted = listener.accept() => accepted,
        };
        let stream = match accepted {
            Ok((stream, _)) => stream,
            Err(e) => {
                // Out of file descriptors, most often: wait instead of
                // spinning.
                warn!(error = %e, "admin endpoint: accept failed");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let Ok(permit) = open.clone().try_acquire_owned() else {
            metrics::counter!("kv_admin_connections_refused_total").increment(1);
            continue; // Dropping the stream closes it.
        };
        let service = hyper_util::service::TowerToHyperService::new(app.clone());
        let stop = stop.clone();
        tasks.spawn(async move {
            let _permit = permit;
            let connection = hyper::server::conn::http1::Builder::new()
                .timer(hyper_util::rt::TokioTimer::new())
                .header_read_timeout(HEADER_DEADLINE)
                .serve_connection(hyper_util::rt::TokioIo::new(stream), service);
            tokio::select! {
                _ = stop.cancelled() => {}
                _ = tokio::time::timeout(CONNECTION_DEADLINE, connection) => {}
            }
        });
    }
}

fn busy() -> Response {
    (
        StatusCode::SERVICE_UNAVAILABLE,
        "busy: too many admin requests at once; retry\n",
    )
        .into_response()
}

async fn metrics(State(state): State<Arc<AdminState>>) -> Response {
    let Ok(_permit) = state.busy.try_acquire() else {
        return busy();
    };
    state.sources.sample().await;
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        state.prometheus.render(),
    )
        .into_response()
}

async fn status(State(state): State<Arc<AdminState>>) -> Response {
    let Ok(_permit) = state.busy.try_acquire() else {
        return busy();
    };
    let (core, gossip) = (&state.sources.core, &state.sources.gossip);
    let cluster = core.cluster();
    let mut body = serde_json::to_value(report::status(core, gossip)).unwrap_or(Value::Null);
    let members: Vec<NodeId> = cluster
        .ring()
        .members()
        .iter()
        .map(|m| m.id.clone())
        .collect();
    let mut scores = Vec::new();
    for (op, name) in [(Op::Get, "get"), (Op::Put, "put")] {
        let record = core.scoring().decide(cluster, &members, op, b"", 1);
        for (s, c) in record.decision.scored.iter().zip(&record.inputs.candidates) {
            scores.push(json!({
                "peer": s.id.as_str(),
                "op": name,
                "score": s.score,
                "latency_ms": s.latency_us.map(|us| us / 1000.0),
                "samples": c.latency_samples,
                "failure_rate": c.failure_rate(),
                "in_flight": c.in_flight,
                "dimensions": s.dimensions,
                "penalties": s.penalties,
                "excluded": s.excluded.as_ref().map(ToString::to_string),
            }));
        }
    }
    if let Value::Object(map) = &mut body {
        map.insert("scores".into(), Value::Array(scores));
        map.insert(
            "certs".into(),
            serde_json::to_value(report::certs(core, gossip, &state.sources.certs).nodes)
                .unwrap_or(Value::Null),
        );
        map.insert(
            "uptime_s".into(),
            json!(state.sources.started.elapsed().as_secs()),
        );
    }
    axum::Json(body).into_response()
}

async fn health(State(state): State<Arc<AdminState>>) -> Response {
    let Ok(_permit) = state.busy.try_acquire() else {
        return busy();
    };
    let me = state.sources.core.cluster().me();
    let storage = state.sources.core.replica().storage().clone();
    let stats = tokio::task::spawn_blocking(move || storage.stats())
        .await
        .ok();
    let failed = stats.as_ref().is_none_or(|s| s.failed);
    let disk_full = stats.as_ref().is_some_and(|s| s.disk_full);
    let free_bytes = stats.as_ref().and_then(|s| s.free_bytes);
    // A full disk is no reason to restart the node (reads go on, and a
    // restart frees nothing): 200, with the status saying so.
    let code = if failed {
        StatusCode::SERVICE_UNAVAILABLE
    } else {
        StatusCode::OK
    };
    let status = match (failed, disk_full) {
        (true, _) => "failing",
        (false, true) => "disk_full",
        (false, false) => "ok",
    };
    let body = json!({
        "status": status,
        "node": me.id.as_str(),
        "storage_failed": failed,
        "disk_full": disk_full,
        "free_bytes": free_bytes,
    });
    (code, axum::Json(body)).into_response()
}
