//! The endpoint: one UDP socket, a pool of one connection per peer address,
//! request/response calls and fire-and-forget gossip sends.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock, RwLock, Weak};
use std::time::Duration;

use kv_tls::{ANY_NODE, Credentials, PeerIdentity};
use kv_wire::frame::{self, FrameKind, HEADER_BYTES};
use kv_wire::{ClientReply, MAX_FRAME_BYTES, PeerCall, PeerReply, Request};
use quinn::crypto::rustls::{QuicClientConfig, QuicServerConfig};
use quinn::{ConnectionError, IdleTimeout, VarInt};
use serde::Serialize;
use serde::de::DeserializeOwned;
use tokio::sync::{Semaphore, mpsc};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::debug;

use crate::admission::Connections;
use crate::server::{self, Handler};
use crate::{Error, Result, TransportSettings};

/// Largest gossip message accepted, in bytes (chitchat caps its messages at
/// 64 KiB; we leave room).
pub(crate) const MAX_GOSSIP_BYTES: usize = 256 * 1024;

/// Gossip sends in flight at once; beyond this, sends are dropped (gossip is
/// lossy by design, like the UDP it replaces).
const MAX_GOSSIP_INFLIGHT: usize = 64;

/// A gossip message received on a unidirectional stream.
#[derive(Debug)]
pub struct GossipDatagram {
    /// The sender's endpoint address (its gossip and client address).
    pub from: SocketAddr,
    /// The message, as chitchat encoded it.
    pub payload: Vec<u8>,
}

/// One slot of the connection pool; the async mutex makes concurrent callers
/// share one connection attempt.
type Slot = Arc<tokio::sync::Mutex<Option<Pooled>>>;

/// A pooled connection with the node name of its peer's certificate, parsed
/// once (parsing it per call was about 1% of a node's CPU under load).
struct Pooled {
    conn: quinn::Connection,
    /// The peer certificate's name, or why it has none usable.
    peer: std::result::Result<String, String>,
}

impl Pooled {
    fn new(conn: quinn::Connection) -> Self {
        let peer = identity_of(&conn).map(|p| p.name);
        Pooled { conn, peer }
    }
}

/// A QUIC endpoint with mutual TLS: see the crate documentation.
pub struct Endpoint {
    pub(crate) quic: quinn::Endpoint,
    /// What new outgoing connections are made with; replaced by
    /// [`Endpoint::reload`] (a connection keeps the configuration it was
    /// made with).
    client: RwLock<quinn::ClientConfig>,
    /// Whether the endpoint accepts connections (node endpoints until
    /// [`Endpoint::stop_accepting`]); held while the server configuration
    /// changes, so a reload never brings back a stopped endpoint.
    accepting: Mutex<bool>,
    pub(crate) config: TransportSettings,
    pool: Mutex<HashMap<SocketAddr, Slot>>,
    pub(crate) tasks: TaskTracker,
    pub(crate) shutdown: CancellationToken,
    /// Gossip sends in flight. Not in `tasks`: gossip goes on while a node
    /// drains its requests (until it leaves gossip), and a send to a dead
    /// peer lasts its whole deadline, so with them [`Endpoint::drain`]
    /// never saw its tracker empty and always waited its full deadline
    /// (a SIGTERM took 11 s whenever a peer was down). [`Endpoint::close`]
    /// ends them.
    gossip_tasks: TaskTracker,
    gossip_inflight: Arc<Semaphore>,
    /// Our own name (node id or client CN), for error messages.
    pub(crate) name: String,
    /// Our certificate's role; a reload must keep it, and the name.
    role: kv_tls::Role,
    /// The connections being served, per certificate identity (capped).
    pub(crate) connections: Arc<Connections>,
    /// Bytes of requests being received, every stream together
    /// ([`TransportSettings::max_receive_bytes`]).
    pub(crate) receive_budget: Arc<Semaphore>,
    /// Set on node endpoints: who serves streams a peer opens, on accepted
    /// connections and on connections we dialed alike (a peer answers gossip
    /// on whichever connection it has to us).
    serving: OnceLock<Serving>,
    /// Ourselves, to hand connection tasks an owning reference.
    me: Weak<Endpoint>,
}

/// What serves incoming streams on a node endpoint.
#[derive(Clone)]
pub(crate) struct Serving {
    pub(crate) handler: Arc<dyn Handler>,
    pub(crate) gossip: mpsc::Sender<GossipDatagram>,
}

impl Endpoint {
    /// Binds a node's endpoint on `addr`: it accepts connections, hands
    /// requests to `handler` and gossip messages to `gossip` (dropped when the
    /// channel is full), and makes outgoing calls from the same socket.
    ///
    /// The stateless-reset key is derived from the node's private key, so it
    /// is stable across restarts and peers learn at once that an old
    /// connection is gone (design.md, "Pitfalls designed out").
    ///
    /// # Errors
    /// [`Error::Bind`] if the socket cannot be bound, [`Error::Tls`] if the
    /// credentials do not make a valid configuration.
    pub fn bind(
        addr: SocketAddr,
        creds: &Credentials,
        config: TransportSettings,
        handler: Arc<dyn Handler>,
        gossip: mpsc::Sender<GossipDatagram>,
    ) -> Result<Arc<Self>> {
        let bind_err = |reason: String| Error::Bind { addr, reason };
        let seed = creds.derive_secret("quic-stateless-reset");
        let reset_key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, &seed);
        let mut endpoint_config = quinn::EndpointConfig::new(Arc::new(reset_key));
        // Connection ids must outlive a restart too: quinn's default
        // generator checks them against a random per-process key and
        // silently drops packets of older ids, so no reset would be sent.
        let cid_seed = creds.derive_secret("quic-connection-id");
        let mut cid_key = [0u8; 8];
        cid_key.copy_from_slice(&cid_seed[..8]);
        let cid_key = u64::from_le_bytes(cid_key);
        endpoint_config.cid_generator(move || {
            Box::new(quinn_proto::HashedConnectionIdGenerator::from_key(cid_key))
        });
        let server_config = server_config(creds, &config).map_err(|e| match e {
            Error::Bind { reason, .. } => bind_err(reason),
            other => other,
        })?;
        let socket =
            udp_socket(addr, config.udp_receive_buffer).map_err(|e| bind_err(e.to_string()))?;
        let quic = quinn::Endpoint::new(
            endpoint_config,
            Some(server_config),
            socket,
            Arc::new(quinn::TokioRuntime),
        )
        .map_err(|e| bind_err(e.to_string()))?;
        let endpoint = Self::with_quic(quic, creds, config)?;
        *endpoint.accepting.lock().unwrap_or_else(|p| p.into_inner()) = true;
        let serving = Serving { handler, gossip };
        let _ = endpoint.serving.set(serving.clone());
        server::spawn_accept_loop(endpoint.clone(), serving);
        Ok(endpoint)
    }

    /// A client-only endpoint (kvctl, the client library) on an ephemeral
    /// port of `bind` (e.g. `0.0.0.0:0`).
    ///
    /// # Errors
    /// As for [`Endpoint::bind`].
    pub fn client(
        bind: SocketAddr,
        creds: &Credentials,
        config: TransportSettings,
    ) -> Result<Arc<Self>> {
        let bind_err = |e: std::io::Error| Error::Bind {
            addr: bind,
            reason: e.to_string(),
        };
        let socket = udp_socket(bind, config.udp_receive_buffer).map_err(bind_err)?;
        let runtime = quinn::default_runtime().ok_or_else(|| Error::Bind {
            addr: bind,
            reason: "no async runtime".into(),
        })?;
        let quic = quinn::Endpoint::new(quinn::EndpointConfig::default(), None, socket, runtime)
            .map_err(bind_err)?;
        Self::with_quic(quic, creds, config)
    }

    fn with_quic(
        quic: quinn::Endpoint,
        creds: &Credentials,
        config: TransportSettings,
    ) -> Result<Arc<Self>> {
        let client = client_config(creds, &config).map_err(|e| match e {
            Error::Bind { reason, .. } => Error::Bind {
                addr: quic
                    .local_addr()
                    .unwrap_or_else(|_| SocketAddr::from(([0, 0, 0, 0], 0))),
                reason,
            },
            other => other,
        })?;
        let name = creds.identity().name.clone();
        let role = creds.identity().role;
        let connections = Arc::new(Connections::new(config.max_connections_per_identity));
        let budget = config
            .max_receive_bytes
            .clamp(HEADER_BYTES + MAX_FRAME_BYTES, Semaphore::MAX_PERMITS);
        Ok(Arc::new_cyclic(|me| Endpoint {
            connections,
            receive_budget: Arc::new(Semaphore::new(budget)),
            quic,
            client: RwLock::new(client),
            accepting: Mutex::new(false),
            config,
            pool: Mutex::new(HashMap::new()),
            tasks: TaskTracker::new(),
            shutdown: CancellationToken::new(),
            gossip_tasks: TaskTracker::new(),
            gossip_inflight: Arc::new(Semaphore::new(MAX_GOSSIP_INFLIGHT)),
            name,
            role,
            serving: OnceLock::new(),
            me: me.clone(),
        }))
    }

    /// Replaces the certificate, key and CA bundle the endpoint uses with
    /// `creds` (a node's SIGHUP): connections made from now on, dialed and
    /// (on a node endpoint that still accepts) accepted alike, use them;
    /// connections already open keep the ones they were made with and go on
    /// working, pooled ones included. Both new configurations are built
    /// before either is installed, so a failure changes nothing.
    ///
    /// What stays as bound: the stateless-reset and connection-id keys
    /// (derived from the key the endpoint was bound with; the next start
    /// derives them from the new key), the transport settings, and the
    /// endpoint's name.
    ///
    /// # Errors
    /// [`Error::Tls`] when `creds` carry another identity than the
    /// endpoint's (role and name), or do not make a configuration; the
    /// endpoint then goes on with what it had.
    pub fn reload(&self, creds: &Credentials) -> Result<()> {
        let identity = creds.identity();
        if identity.name != self.name || identity.role != self.role {
            return Err(Error::Tls(kv_tls::Error::Identity {
                reason: format!(
                    "the new certificate is for {identity}; this endpoint is {} {:?}'s",
                    self.role, self.name
                ),
            }));
        }
        let client = client_config(creds, &self.config)?;
        let accepting = self.accepting.lock().unwrap_or_else(|p| p.into_inner());
        if *accepting {
            let server = server_config(creds, &self.config)?;
            self.quic.set_server_config(Some(server));
        }
        *self.client.write().unwrap_or_else(|p| p.into_inner()) = client;
        drop(accepting);
        debug!(name = %self.name, "TLS configuration reloaded");
        Ok(())
    }

    /// The bound UDP address.
    ///
    /// # Errors
    /// [`Error::Bind`] if the OS cannot tell.
    pub fn local_addr(&self) -> Result<SocketAddr> {
        self.quic.local_addr().map_err(|e| Error::Bind {
            addr: SocketAddr::from(([0, 0, 0, 0], 0)),
            reason: e.to_string(),
        })
    }

    /// Sends a client `request` to the node at `addr` and waits for its
    /// answer, at most `timeout` (connecting included). `server_name` is the
    /// node id expected behind `addr`, or [`kv_tls::ANY_NODE`] to accept any
    /// node of the cluster.
    ///
    /// # Errors
    /// See [`Error`]; [`Error::is_unsent`] tells whether the request may
    /// have been executed.
    pub async fn call(
        &self,
        addr: SocketAddr,
        server_name: &str,
        request: &Request,
        timeout: Duration,
    ) -> Result<ClientReply> {
        let reply: ClientReply = self
            .exchange(addr, server_name, FrameKind::Request, request, timeout)
            .await?;
        reply.response.validate().map_err(|e| Error::Protocol {
            addr,
            reason: e.to_string(),
        })?;
        Ok(reply)
    }

    /// Makes sure a connection to `addr` is open (pooled for the next
    /// [`Endpoint::call`]), connecting if there is none, within `timeout`
    /// (and the endpoint's connect timeout). `server_name` is as for
    /// [`Endpoint::call`]. Answers whether a handshake was made (false: a
    /// pooled connection was there). A client races connection attempts
    /// with this before it sends a request on exactly one of them.
    ///
    /// # Errors
    /// [`Error::Connect`] (nothing was sent), a TLS refusal, or
    /// [`Error::Timeout`] with `sent` false.
    pub async fn connect(
        &self,
        addr: SocketAddr,
        server_name: &str,
        timeout: Duration,
    ) -> Result<bool> {
        let slot = self.slot(addr);
        if let Ok(guard) = slot.try_lock()
            && let Some(pooled) = guard.as_ref()
            && pooled.conn.close_reason().is_none()
        {
            check_expected(addr, pooled, server_name)?;
            return Ok(false);
        }
        match tokio::time::timeout(timeout, self.connection(addr, server_name)).await {
            Ok(result) => result.map(|_| true),
            Err(_) => Err(Error::Timeout {
                addr,
                timeout_ms: u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX),
                sent: false,
            }),
        }
    }

    /// Sends a replica call to the node at `addr` (whose certificate must
    /// name `server_name`) and waits for its answer, as [`Endpoint::call`].
    ///
    /// # Errors
    /// As [`Endpoint::call`].
    pub async fn call_peer(
        &self,
        addr: SocketAddr,
        server_name: &str,
        call: &PeerCall,
        timeout: Duration,
    ) -> Result<PeerReply> {
        let reply: PeerReply = self
            .exchange(addr, server_name, FrameKind::PeerRequest, call, timeout)
            .await?;
        reply.validate().map_err(|e| Error::Protocol {
            addr,
            reason: e.to_string(),
        })?;
        Ok(reply)
    }

    /// One request frame of `kind` out, one answer frame (of the matching
    /// kind) back, on a stream of its own.
    async fn exchange<Q: Serialize, A: DeserializeOwned>(
        &self,
        addr: SocketAddr,
        server_name: &str,
        kind: FrameKind,
        request: &Q,
        timeout: Duration,
    ) -> Result<A> {
        let answer_kind = match kind {
            FrameKind::PeerRequest => FrameKind::PeerResponse,
            _ => FrameKind::Response,
        };
        let bytes = frame::encode(kind, request)?;
        let sent = AtomicBool::new(false);
        let exchange = async {
            let conn = self.connection(addr, server_name).await?;
            let (mut send, mut recv) = conn
                .open_bi()
                .await
                .map_err(|e| connection_error(addr, &e, false))?;
            send.write_all(&bytes)
                .await
                .map_err(|e| stream_error(addr, e.to_string(), &conn, false))?;
            send.finish()
                .map_err(|e| stream_error(addr, e.to_string(), &conn, false))?;
            sent.store(true, Ordering::Release);
            let reply = recv
                .read_to_end(HEADER_BYTES + MAX_FRAME_BYTES)
                .await
                .map_err(|e| stream_error(addr, e.to_string(), &conn, true))?;
            frame::decode(answer_kind, &reply).map_err(|e| Error::Protocol {
                addr,
                reason: e.to_string(),
            })
        };
        match tokio::time::timeout(timeout, exchange).await {
            Ok(result) => result,
            Err(_) => Err(Error::Timeout {
                addr,
                timeout_ms: timeout.as_millis() as u64,
                sent: sent.load(Ordering::Acquire),
            }),
        }
    }

    /// Sends one gossip message to `addr` without waiting (chitchat awaits
    /// its sends inside its gossip loop, so a dead peer must not stall it).
    /// Dropped, with a debug log, when too many sends are in flight.
    pub fn send_gossip(self: &Arc<Self>, addr: SocketAddr, payload: &[u8]) {
        let Ok(permit) = self.gossip_inflight.clone().try_acquire_owned() else {
            debug!(%addr, "gossip send dropped: too many in flight");
            return;
        };
        let bytes = match frame::wrap(FrameKind::Gossip, payload) {
            Ok(b) => b,
            Err(e) => {
                debug!(%addr, error = %e, "gossip message not sent");
                return;
            }
        };
        let this = self.clone();
        let deadline = self.config.connect_timeout + self.config.connect_timeout;
        self.gossip_tasks.spawn(async move {
            let _permit = permit;
            let send = async {
                let conn = this.connection(addr, ANY_NODE).await?;
                let mut stream = conn
                    .open_uni()
                    .await
                    .map_err(|e| connection_error(addr, &e, false))?;
                stream
                    .write_all(&bytes)
                    .await
                    .map_err(|e| stream_error(addr, e.to_string(), &conn, false))?;
                stream
                    .finish()
                    .map_err(|e| stream_error(addr, e.to_string(), &conn, false))?;
                Ok::<(), Error>(())
            };
            match tokio::time::timeout(deadline, send).await {
                Ok(Ok(())) => {}
                Ok(Err(e)) => debug!(%addr, error = %e, "gossip send failed"),
                Err(_) => debug!(%addr, "gossip send timed out"),
            }
        });
    }

    /// The pooled connection to `addr`, connecting if there is none. When
    /// `server_name` names a node, the connection's certificate must be that
    /// node's.
    async fn connection(&self, addr: SocketAddr, server_name: &str) -> Result<quinn::Connection> {
        let slot = self.slot(addr);
        let mut guard = slot.lock().await;
        if let Some(pooled) = guard.as_ref()
            && pooled.conn.close_reason().is_none()
        {
            check_expected(addr, pooled, server_name)?;
            return Ok(pooled.conn.clone());
        }
        let client = self
            .client
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        let connecting = self
            .quic
            .connect_with(client, addr, server_name)
            .map_err(|e| Error::Connect {
                addr,
                reason: e.to_string(),
            })?;
        let conn = match tokio::time::timeout(self.config.connect_timeout, connecting).await {
            Ok(Ok(conn)) => conn,
            Ok(Err(e)) => return Err(connection_error(addr, &e, false)),
            Err(_) => {
                return Err(Error::Connect {
                    addr,
                    reason: format!(
                        "no handshake within {} ms",
                        self.config.connect_timeout.as_millis()
                    ),
                });
            }
        };
        *guard = Some(Pooled::new(conn.clone()));
        if let (Some(serving), Some(me)) = (self.serving.get(), self.me.upgrade()) {
            let (serving, served) = (serving.clone(), conn.clone());
            self.tasks
                .spawn(async move { server::serve_connection(me, served, serving).await });
        }
        Ok(conn)
    }

    fn slot(&self, addr: SocketAddr) -> Slot {
        // A poisoned lock only means another task panicked while inserting;
        // the map itself is still consistent.
        let mut pool = self.pool.lock().unwrap_or_else(|p| p.into_inner());
        pool.entry(addr).or_default().clone()
    }

    /// Offers an accepted connection from a node to the pool, so replies and
    /// calls to that node reuse it instead of dialing a second one.
    pub(crate) fn offer(&self, addr: SocketAddr, conn: &quinn::Connection) {
        let slot = self.slot(addr);
        if let Ok(mut guard) = slot.try_lock() {
            let stale = guard
                .as_ref()
                .is_none_or(|p| p.conn.close_reason().is_some());
            if stale {
                *guard = Some(Pooled::new(conn.clone()));
            }
        }
    }

    /// Connections this endpoint serves streams on now (accepted ones, and
    /// on a node endpoint the ones it dialed), every peer together.
    pub fn served_connections(&self) -> usize {
        self.connections.count()
    }

    /// Tasks serving connections and streams now (the accept loop
    /// included): what a peer's connections and streams cost the node.
    pub fn serving_tasks(&self) -> usize {
        self.tasks.len()
    }

    /// Stops accepting new connections and new streams; requests already
    /// being served go on, and outgoing calls still work.
    pub fn stop_accepting(&self) {
        let mut accepting = self.accepting.lock().unwrap_or_else(|p| p.into_inner());
        *accepting = false;
        self.quic.set_server_config(None);
        self.shutdown.cancel();
    }

    /// Waits, at most `deadline`, until every request being served has been
    /// answered (call after [`Endpoint::stop_accepting`]). Gossip sends are
    /// not waited for: [`Endpoint::close`] ends them.
    pub async fn drain(&self, deadline: Duration) {
        self.tasks.close();
        if tokio::time::timeout(deadline, self.tasks.wait())
            .await
            .is_err()
        {
            debug!("transport drain deadline passed with requests still running");
        }
    }

    /// Closes every connection, which ends the gossip sends still in flight
    /// (they fail at once), and waits briefly for them and for peers to be
    /// told.
    pub async fn close(&self) {
        self.quic.close(VarInt::from_u32(0), b"shutdown");
        self.gossip_tasks.close();
        let _ = tokio::time::timeout(Duration::from_secs(1), async {
            self.gossip_tasks.wait().await;
            self.quic.wait_idle().await;
        })
        .await;
    }

    /// [`Endpoint::stop_accepting`], [`Endpoint::drain`] (at most
    /// `deadline`), then [`Endpoint::close`].
    pub async fn shutdown(&self, deadline: Duration) {
        self.stop_accepting();
        self.drain(deadline).await;
        self.close().await;
    }
}

/// A UDP socket bound to `addr` (dual-stack when IPv6, as
/// `quinn::Endpoint::client` makes it) with a `receive_buffer`-byte
/// receive buffer asked for: what every endpoint, node or client, runs on.
///
/// # Errors
/// The socket cannot be made or bound.
fn udp_socket(addr: SocketAddr, receive_buffer: usize) -> std::io::Result<std::net::UdpSocket> {
    let socket = socket2::Socket::new(
        socket2::Domain::for_address(addr),
        socket2::Type::DGRAM,
        Some(socket2::Protocol::UDP),
    )?;
    if addr.is_ipv6()
        && let Err(e) = socket.set_only_v6(false)
    {
        debug!(error = %e, "UDP socket not dual-stack");
    }
    socket.bind(&addr.into())?;
    let socket = std::net::UdpSocket::from(socket);
    size_receive_buffer(&socket, receive_buffer);
    Ok(socket)
}

/// Asks for a `bytes` receive buffer on `socket`; what the kernel granted
/// is logged. Not fatal: a smaller buffer only risks drops under bursts,
/// which QUIC recovers from.
fn size_receive_buffer(socket: &std::net::UdpSocket, bytes: usize) {
    let sock = socket2::SockRef::from(socket);
    if let Err(e) = sock.set_recv_buffer_size(bytes) {
        tracing::warn!(bytes, error = %e, "cannot size the UDP receive buffer");
    }
    match sock.recv_buffer_size() {
        Ok(granted) if granted < bytes => tracing::info!(
            asked = bytes,
            granted,
            "UDP receive buffer smaller than asked (net.core.rmem_max)"
        ),
        Ok(granted) => debug!(granted, "UDP receive buffer"),
        Err(e) => debug!(error = %e, "UDP receive buffer size unknown"),
    }
}

/// The server configuration of a node endpoint: `creds` with the
/// transport settings.
fn server_config(creds: &Credentials, config: &TransportSettings) -> Result<quinn::ServerConfig> {
    let tls = kv_tls::server_config(creds)?;
    let crypto = QuicServerConfig::try_from(tls).map_err(|e| Error::Bind {
        addr: SocketAddr::from(([0, 0, 0, 0], 0)),
        reason: e.to_string(),
    })?;
    let mut server = quinn::ServerConfig::with_crypto(Arc::new(crypto));
    server.transport_config(Arc::new(transport_config(config)?));
    Ok(server)
}

/// The configuration outgoing connections are made with: `creds` with the
/// transport settings.
fn client_config(creds: &Credentials, config: &TransportSettings) -> Result<quinn::ClientConfig> {
    let tls = kv_tls::client_config(creds)?;
    let crypto = QuicClientConfig::try_from(tls).map_err(|e| Error::Bind {
        addr: SocketAddr::from(([0, 0, 0, 0], 0)),
        reason: e.to_string(),
    })?;
    let mut client = quinn::ClientConfig::new(Arc::new(crypto));
    client.transport_config(Arc::new(transport_config(config)?));
    Ok(client)
}

fn transport_config(config: &TransportSettings) -> Result<quinn::TransportConfig> {
    let mut t = quinn::TransportConfig::default();
    let idle = IdleTimeout::try_from(config.idle_timeout).map_err(|e| Error::Bind {
        addr: SocketAddr::from(([0, 0, 0, 0], 0)),
        reason: format!("idle timeout: {e}"),
    })?;
    t.max_idle_timeout(Some(idle));
    t.keep_alive_interval(Some(config.keep_alive.min(config.idle_timeout / 2)));
    t.max_concurrent_bidi_streams(VarInt::from_u32(config.max_streams_per_connection));
    t.max_concurrent_uni_streams(VarInt::from_u32(config.max_gossip_streams));
    t.receive_window(VarInt::from_u32(config.connection_window));
    Ok(t)
}

/// The certificate identity of a connection's peer.
pub(crate) fn identity_of(conn: &quinn::Connection) -> std::result::Result<PeerIdentity, String> {
    let any = conn.peer_identity().ok_or("no peer certificate")?;
    let certs = any
        .downcast::<Vec<rustls_pki_types::CertificateDer<'static>>>()
        .map_err(|_| "unexpected peer identity type")?;
    let leaf = certs.first().ok_or("empty certificate chain")?;
    kv_tls::peer_identity(leaf).map_err(|e| e.to_string())
}

fn check_expected(addr: SocketAddr, pooled: &Pooled, server_name: &str) -> Result<()> {
    if server_name == ANY_NODE {
        return Ok(());
    }
    match &pooled.peer {
        Ok(name) if name == server_name => Ok(()),
        Ok(name) => Err(Error::Refused {
            addr,
            reason: format!("expected node {server_name}, found {name}"),
        }),
        Err(reason) => Err(Error::Refused {
            addr,
            reason: reason.clone(),
        }),
    }
}

/// Whether a QUIC close code is a TLS alert (QUIC "CRYPTO_ERROR" range
/// 0x100..=0x1ff, RFC 9001 section 4.8).
fn is_crypto_code(code: u64) -> bool {
    (0x100..=0x1ff).contains(&code)
}

fn connection_error(addr: SocketAddr, e: &ConnectionError, sent: bool) -> Error {
    let crypto = match e {
        ConnectionError::TransportError(t) => is_crypto_code(u64::from(t.code)),
        ConnectionError::ConnectionClosed(c) => is_crypto_code(u64::from(c.error_code)),
        _ => false,
    };
    if crypto {
        return Error::Refused {
            addr,
            reason: e.to_string(),
        };
    }
    match e {
        ConnectionError::TimedOut if !sent => Error::Connect {
            addr,
            reason: e.to_string(),
        },
        _ => Error::Lost {
            addr,
            reason: e.to_string(),
            sent,
        },
    }
}

/// A stream operation failed: if the connection died of a TLS alert (the
/// server refuses our certificate only after our handshake completed, in
/// TLS 1.3), say so; otherwise the stream or connection was lost.
fn stream_error(addr: SocketAddr, reason: String, conn: &quinn::Connection, sent: bool) -> Error {
    match conn.close_reason() {
        Some(e) => connection_error(addr, &e, sent),
        None => Error::Lost { addr, reason, sent },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An endpoint's socket gets the buffer asked for, up to what the
    /// kernel allows (`net.core.rmem_max`; Linux reports twice the granted
    /// value), more than a socket bound with the kernel's default.
    #[test]
    fn receive_buffer_is_sized() {
        let plain = std::net::UdpSocket::bind("127.0.0.1:0").expect("bind on loopback");
        let before = socket2::SockRef::from(&plain)
            .recv_buffer_size()
            .expect("buffer size");
        let asked = 4 << 20;
        let socket = udp_socket(SocketAddr::from(([127, 0, 0, 1], 0)), asked).expect("bind");
        let after = socket2::SockRef::from(&socket)
            .recv_buffer_size()
            .expect("buffer size");
        let cap = std::fs::read_to_string("/proc/sys/net/core/rmem_max")
            .ok()
            .and_then(|s| s.trim().parse::<usize>().ok())
            .unwrap_or(0);
        assert!(
            after >= asked.min(cap),
            "asked {asked}, rmem_max {cap}, got {after}"
        );
        if cap > before {
            assert!(after > before, "the buffer grew from {before}");
        }
    }
}
