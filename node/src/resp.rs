//! The RESP front door: a Redis-protocol (RESP2) listener on its own TCP
//! port, so that `redis-cli`, `redis-benchmark` and Redis client libraries
//! can use the store.
//!
//! Layers, bottom up: the `kv-resp` crate's [`parse`] turns bytes into
//! requests (bounded, incremental) and its [`kv_resp::command`] turns
//! requests into commands (names, arity, key bounds); here, `data` runs GET/SET/DEL/EXISTS/MGET/MSET through the node's
//! [`Coordinator`] (the same quorums as QUIC clients), `server_info`
//! answers INFO/COMMAND/CONFIG GET/HELLO/CLIENT, [`reply`] writes answers,
//! and `connection` holds one client's buffers and authentication state.
//! This module owns the accept loop and shutdown.
//!
//! The listener is plaintext: it binds to loopback by default, and its only
//! protection when exposed is the optional `[resp] password` (AUTH). There
//! is no TLS on this door; QUIC with mutual TLS is the secure one.
//!
//! Every request is bounded ([`parse::Limits`]: arguments, bulk length =
//! the store's value bound, inline line length, request size), admitted
//! through the node's client semaphore (a full queue answers "overloaded,
//! retry later"), and counted in metrics with its outcome.

mod admission;
mod config;
mod connection;
mod data;
mod reply;
mod server_info;
mod siblings;

pub use config::RespConfig;
pub use siblings::SiblingRule;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

use anyhow::Context;
use kv_types::limits::MAX_VALUE_BYTES;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::{debug, info, warn};

use kv_replication::{Cluster, Coordinator};
use kv_resp::parse;
use kv_types::NodeId;

/// Arguments of one request at most (the command name included): an MGET
/// of 4095 keys.
const MAX_ARGS: usize = 4096;

/// Bytes of one inline command line at most.
const MAX_INLINE: usize = 64 * 1024;

/// Time a refused client has to take its one-line refusal.
const REFUSAL_DEADLINE: Duration = Duration::from_secs(1);

/// Bytes of all arguments of one request together: four maximal values.
const MAX_REQUEST: usize = 4 * MAX_VALUE_BYTES + 64 * 1024;

/// Settings of the listener (config section `[resp]`).
#[derive(Clone, Debug)]
pub struct RespSettings {
    /// TCP address to bind.
    pub listen: SocketAddr,
    /// AUTH password; `None` lets every client in.
    pub password: Option<String>,
    /// Read quorum of RESP reads; `None` = the cluster's default R.
    pub r: Option<u8>,
    /// Write quorum of RESP writes; `None` = the cluster's default W.
    pub w: Option<u8>,
    /// What GET answers for a key with siblings.
    pub siblings: SiblingRule,
    /// Open connections at most; at the cap the longest-idle connection
    /// that sent no command (or did not authenticate) is closed to make
    /// room, else the new one is refused.
    pub max_connections: usize,
    /// Open connections from one IP address at most, with the same rule.
    pub max_connections_per_address: usize,
    /// Connections idle this long are closed; `None` = never.
    pub idle_timeout: Option<Duration>,
    /// A connection that has not authenticated (with a password) or
    /// completed its first command (without) this long after it opened is
    /// closed, however many bytes it sends; `None` = never.
    pub unauthenticated_timeout: Option<Duration>,
    /// A request whose first bytes arrived this long ago and that is still
    /// incomplete closes its connection; `None` = never.
    pub request_timeout: Option<Duration>,
}

/// What the listener needs from the node.
pub struct RespDeps {
    /// The node's coordinator.
    pub coordinator: Arc<Coordinator>,
    /// Membership and ring (INFO).
    pub cluster: Arc<Cluster>,
    /// The node's client admission semaphore, shared with QUIC clients.
    pub client_slots: Arc<Semaphore>,
}

/// Counters for INFO.
#[derive(Debug, Default)]
struct Stats {
    connections: AtomicU64,
    accepted: AtomicU64,
    rejected: AtomicU64,
    commands: AtomicU64,
}

/// State shared by every connection.
struct Core {
    settings: RespSettings,
    limits: parse::Limits,
    coordinator: Arc<Coordinator>,
    cluster: Arc<Cluster>,
    client_slots: Arc<Semaphore>,
    /// This node's id, for error messages.
    node: NodeId,
    stats: Stats,
    started: Instant,
}

/// A bound RESP listener, not yet serving.
pub struct RespListener {
    listener: TcpListener,
    settings: RespSettings,
}

impl RespListener {
    /// Binds `settings.listen`.
    ///
    /// # Errors
    /// When the address cannot be bound.
    pub async fn bind(settings: RespSettings) -> anyhow::Result<Self> {
        let listener = TcpListener::bind(settings.listen).await.with_context(|| {
            format!(
                "cannot bind the RESP listener to {} (set [resp] listen to a free port, or [resp] enabled = false)",
                settings.listen
            )
        })?;
        Ok(RespListener { listener, settings })
    }

    /// The bound address (`listen` with its port filled in).
    pub fn local_addr(&self) -> SocketAddr {
        self.listener.local_addr().unwrap_or(self.settings.listen)
    }

    /// Starts accepting connections.
    pub fn serve(self, deps: RespDeps) -> RespServer {
        let local_addr = self.local_addr();
        let core = Arc::new(Core {
            limits: parse::Limits {
                max_args: MAX_ARGS,
                max_bulk: MAX_VALUE_BYTES,
                max_inline: MAX_INLINE,
                max_request: MAX_REQUEST,
            },
            node: deps.cluster.id().clone(),
            coordinator: deps.coordinator,
            cluster: deps.cluster,
            client_slots: deps.client_slots,
            stats: Stats::default(),
            started: Instant::now(),
            settings: self.settings,
        });
        let tasks = TaskTracker::new();
        let stop = CancellationToken::new();
        tasks.spawn(accept_loop(
            self.listener,
            core,
            tasks.clone(),
            stop.clone(),
        ));
        info!(addr = %local_addr, "RESP listener ready");
        RespServer { tasks, stop }
    }
}

/// A running RESP listener.
pub struct RespServer {
    /// The accept loop and every connection.
    tasks: TaskTracker,
    stop: CancellationToken,
}

impl RespServer {
    /// Stops accepting; idle connections close at once, busy ones after
    /// answering their current command.
    pub fn stop(&self) {
        self.stop.cancel();
        self.tasks.close();
    }

    /// Waits (at most `deadline`) for every connection to close.
    pub async fn wait(&self, deadline: Duration) {
        if tokio::time::timeout(deadline, self.tasks.wait())
            .await
            .is_err()
        {
            warn!("RESP connections still busy at shutdown");
        }
    }
}

async fn accept_loop(
    listener: TcpListener,
    core: Arc<Core>,
    tasks: TaskTracker,
    stop: CancellationToken,
) {
    let registry = Arc::new(admission::Registry::new(
        core.settings.max_connections,
        core.settings.max_connections_per_address,
    ));
    let mut next_id: u64 = 0;
    loop {
        let accepted = tokio::select! {
            _ = stop.cancelled() => break,
            a = listener.accept() => a,
        };
        let (mut stream, peer) = match accepted {
            Ok(a) => a,
            Err(e) => {
                // Out of file descriptors and the like: wait, do not spin.
                warn!(error = %e, "RESP accept failed");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        next_id += 1;
        let ticket = match registry.admit(next_id, peer.ip()) {
            Ok(ticket) => ticket,
            Err(refusal) => {
                core.stats.rejected.fetch_add(1, Relaxed);
                metrics::counter!("kv_resp_connections_rejected_total").increment(1);
                debug!(%peer, ?refusal, "RESP connection refused");
                let answer: &'static [u8] = match refusal {
                    admission::Refusal::Total => b"-ERR max number of clients reached\r\n",
                    admission::Refusal::PerAddress => {
                        b"-ERR max number of clients reached for this address\r\n"
                    }
                };
                tasks.spawn(async move {
                    let _ = tokio::time::timeout(REFUSAL_DEADLINE, stream.write_all(answer)).await;
                });
                continue;
            }
        };
        core.stats.accepted.fetch_add(1, Relaxed);
        core.stats.connections.fetch_add(1, Relaxed);
        metrics::counter!("kv_resp_connections_total").increment(1);
        metrics::gauge!("kv_resp_connections").increment(1.0);
        debug!(%peer, "RESP connection");
        let conn = connection::Connection::new(core.clone(), stream, peer, next_id, ticket);
        let (core, stop) = (core.clone(), stop.clone());
        tasks.spawn(async move {
            conn.run(stop).await;
            core.stats.connections.fetch_sub(1, Relaxed);
            metrics::gauge!("kv_resp_connections").decrement(1.0);
        });
    }
}

/// A fresh request id: it names the request in logs (the `id` of spans)
/// on every node it reaches.
fn request_id() -> u64 {
    rand::random()
}
