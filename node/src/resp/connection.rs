//! One RESP connection: buffered frame I/O, authentication state, and the
//! dispatch of each command.
//!
//! Requests are answered in order, one at a time (pipelined requests are
//! parsed from the buffer back to back and their answers written together).
//! Shutdown is noticed only between commands: a command that started
//! finishes and is answered, then the connection closes.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Instant;

use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_util::sync::CancellationToken;
use tracing::{Instrument, debug};

use super::admission::Ticket;
use super::{Core, reply};
use crate::metrics::{self, Outcome};
use kv_resp::command::{self, Command};
use kv_resp::parse::RequestParser;

/// Wrong passwords accepted on one connection before it is closed (slows
/// down guessing; every failure is counted in metrics).
const MAX_AUTH_FAILURES: u32 = 3;

/// Output buffered before it is written even in the middle of a pipeline.
const FLUSH_AT: usize = 64 * 1024;

/// Read buffer size.
const READ_CHUNK: usize = 16 * 1024;

/// How long a connection closed for a protocol error keeps reading (and
/// dropping) what the client still sends, so the error reaches it.
const LINGER: std::time::Duration = std::time::Duration::from_secs(1);

/// Most bytes read and dropped that way.
const LINGER_BYTES: usize = 8 * 1024 * 1024;

/// Time a client has to read the answers written to it; a client that
/// reads nothing for this long is disconnected, freeing what its answers
/// hold.
const WRITE_DEADLINE: std::time::Duration = std::time::Duration::from_secs(30);

/// The state of one client connection.
pub(super) struct Connection {
    core: Arc<Core>,
    stream: TcpStream,
    /// Client address, for logs.
    peer: SocketAddr,
    /// Connection number (CLIENT ID).
    id: u64,
    parser: RequestParser,
    input: BytesMut,
    output: BytesMut,
    /// True once AUTH succeeded, or from the start without a password.
    authenticated: bool,
    /// Wrong passwords so far.
    auth_failures: u32,
    /// Its place among the open connections.
    ticket: Ticket,
    /// When the connection opened.
    opened: Instant,
    /// When the first bytes of the request still incomplete arrived.
    request_started: Option<Instant>,
}

/// Why a connection is closed by the server while waiting for input.
enum Cut {
    /// Closed to make room for a new connection.
    Evicted,
    /// No authentication or first command within the deadline.
    Unauthenticated,
    /// A request left incomplete past its deadline.
    Request,
    /// The idle timeout (silent, as Redis does).
    Idle,
}

/// Whether to keep the connection after a command.
#[derive(PartialEq, Eq)]
enum Next {
    Continue,
    Close,
}

impl Connection {
    /// A connection over `stream`.
    pub(super) fn new(
        core: Arc<Core>,
        stream: TcpStream,
        peer: SocketAddr,
        id: u64,
        ticket: Ticket,
    ) -> Self {
        let _ = stream.set_nodelay(true);
        let authenticated = core.settings.password.is_none();
        let parser = RequestParser::new(core.limits);
        Connection {
            core,
            stream,
            peer,
            id,
            parser,
            input: BytesMut::with_capacity(READ_CHUNK),
            output: BytesMut::with_capacity(READ_CHUNK),
            authenticated,
            auth_failures: 0,
            ticket,
            opened: Instant::now(),
            request_started: None,
        }
    }

    /// How long the next read may wait, and what ends the connection when
    /// it passes: the deadline of a connection not yet engaged, of a
    /// request under way, else the idle timeout.
    fn read_limit(&self) -> Option<(std::time::Duration, Cut)> {
        let settings = &self.core.settings;
        if !self.ticket.engaged()
            && let Some(limit) = settings.unauthenticated_timeout
        {
            return Some((
                limit.saturating_sub(self.opened.elapsed()),
                Cut::Unauthenticated,
            ));
        }
        if let (Some(started), Some(limit)) = (self.request_started, settings.request_timeout) {
            return Some((limit.saturating_sub(started.elapsed()), Cut::Request));
        }
        settings.idle_timeout.map(|limit| (limit, Cut::Idle))
    }

    /// Answers why the connection is closed (nothing for the idle timeout).
    async fn cut(&mut self, cut: Cut) -> std::io::Result<()> {
        let settings = &self.core.settings;
        let secs = |d: Option<std::time::Duration>| d.map_or(0, |d| d.as_secs());
        let message = match cut {
            Cut::Idle => return Ok(()),
            Cut::Evicted => {
                "connection closed to make room: the server is at its connection limit and this connection had sent no command".to_string()
            }
            Cut::Unauthenticated => format!(
                "connection closed: no {} within {} s of connecting",
                if settings.password.is_some() { "AUTH" } else { "command" },
                secs(settings.unauthenticated_timeout)
            ),
            Cut::Request => format!(
                "connection closed: the request was not complete within {} s",
                secs(settings.request_timeout)
            ),
        };
        debug!(peer = %self.peer, %message, "RESP connection cut");
        ::metrics::counter!("kv_resp_connections_cut_total", "reason" => match cut {
            Cut::Evicted => "evicted",
            Cut::Unauthenticated => "unauthenticated",
            Cut::Request => "request_timeout",
            Cut::Idle => "idle",
        })
        .increment(1);
        self.output.clear();
        reply::err(&mut self.output, &message);
        self.close_after_error().await
    }

    /// Serves requests until the client leaves, a fatal protocol error,
    /// the idle timeout, or `stop`.
    pub(super) async fn run(mut self, stop: CancellationToken) {
        if let Err(e) = self.serve(&stop).await {
            debug!(peer = %self.peer, error = %e, "RESP connection ended");
        }
    }

    async fn serve(&mut self, stop: &CancellationToken) -> std::io::Result<()> {
        loop {
            loop {
                match self.parser.next(&mut self.input) {
                    Ok(Some(args)) => {
                        self.request_started = None;
                        let next = self.execute(args).await;
                        if self.authenticated {
                            self.ticket.engage();
                        }
                        if next == Next::Close {
                            return self.flush().await;
                        }
                        if self.output.len() >= FLUSH_AT {
                            self.flush().await?;
                        }
                    }
                    Ok(None) => break,
                    Err(e) => {
                        metrics::resp_protocol_error(e.reason());
                        reply::err(
                            &mut self.output,
                            &format!("Protocol error: {}", e.message()),
                        );
                        if let kv_resp::Error::Fatal(_) = e {
                            debug!(peer = %self.peer, error = e.message(), "closing after a protocol error");
                            return self.close_after_error().await;
                        }
                    }
                }
            }
            self.flush().await?;
            if stop.is_cancelled() {
                return Ok(());
            }
            if self.input.capacity() - self.input.len() < READ_CHUNK / 4 {
                self.input.reserve(READ_CHUNK);
            }
            // A request's clock runs from its first byte until it parses;
            // nothing pending (even after input the parser skipped, such as
            // an empty `*0`) means no request is under way.
            if !self.parser.in_request() && self.input.is_empty() {
                self.request_started = None;
            } else if self.request_started.is_none() {
                self.request_started = Some(Instant::now());
            }
            let limit = self.read_limit();
            let evicted = self.ticket.state.evicted.clone();
            let read = self.stream.read_buf(&mut self.input);
            let n = tokio::select! {
                _ = stop.cancelled() => return Ok(()),
                _ = evicted.cancelled() => Err(Cut::Evicted),
                n = async {
                    match limit {
                        Some((limit, cut)) => tokio::time::timeout(limit, read).await.map_err(|_| cut),
                        None => Ok(read.await),
                    }
                } => n,
            };
            let n = match n {
                Ok(n) => n?,
                Err(cut) => return self.cut(cut).await,
            };
            if n == 0 {
                return Ok(());
            }
            self.ticket.read();
        }
    }

    /// Sends the error, then closes so that the client still reads it:
    /// closing with unread input queued makes the kernel reset the
    /// connection, and the client may lose the error text. The input is
    /// read and dropped for at most [`LINGER`] or [`LINGER_BYTES`].
    async fn close_after_error(&mut self) -> std::io::Result<()> {
        self.flush().await?;
        self.stream.shutdown().await?;
        let drain = async {
            let mut drained = 0usize;
            let mut sink = [0u8; 16 * 1024];
            while drained < LINGER_BYTES {
                match self.stream.read(&mut sink).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => drained += n,
                }
            }
        };
        let _ = tokio::time::timeout(LINGER, drain).await;
        Ok(())
    }

    /// Writes the buffered answers, within [`WRITE_DEADLINE`].
    async fn flush(&mut self) -> std::io::Result<()> {
        if !self.output.is_empty() {
            tokio::time::timeout(WRITE_DEADLINE, self.stream.write_all(&self.output))
                .await
                .map_err(|_| {
                    std::io::Error::new(
                        std::io::ErrorKind::TimedOut,
                        "the client did not read its answers within the write deadline",
                    )
                })??;
            self.output.clear();
        }
        Ok(())
    }

    /// Runs one request, appending its answer to the output.
    async fn execute(&mut self, args: Vec<Bytes>) -> Next {
        self.core.stats.commands.fetch_add(1, Relaxed);
        let command = match command::parse(args) {
            Ok(c) => c,
            Err(e) => {
                metrics::resp_protocol_error(e.reason());
                reply::err(&mut self.output, e.message());
                return Next::Continue;
            }
        };
        if !self.authenticated && !command.allowed_unauthenticated() {
            reply::error(&mut self.output, "NOAUTH", "Authentication required.");
            return Next::Continue;
        }
        let out = &mut self.output;
        match command {
            Command::Ping(None) => reply::simple(out, "PONG"),
            Command::Ping(Some(m)) | Command::Echo(m) => reply::bulk(out, &m),
            Command::Quit => {
                reply::ok(out);
                return Next::Close;
            }
            Command::Reset => {
                self.authenticated = self.core.settings.password.is_none();
                reply::simple(out, "RESET");
            }
            Command::Auth(user, password) => return self.auth(user.as_ref(), &password),
            Command::Hello(version, auth) => return self.hello(version.as_ref(), auth),
            Command::Select(db) => {
                if db.as_ref() == b"0" {
                    reply::ok(out);
                } else {
                    reply::err(
                        out,
                        "DB index is out of range (this store has one database, 0)",
                    );
                }
            }
            Command::Client(args) => self.core.client(&args, self.id, out),
            Command::Info(sections) => self.core.info(&sections, out),
            Command::Introspect(args) => self.core.command(&args, out),
            Command::ConfigGet(patterns) => self.core.config_get(&patterns, out),
            data => return self.data(data).await,
        }
        Next::Continue
    }

    /// A data command: admission, a span with the request id, metrics.
    /// A large answer is written out before its admission slots are given
    /// back, so answers a client does not read count against the node's
    /// request limit (and the write deadline closes such a client).
    async fn data(&mut self, command: Command) -> Next {
        let Some(op) = command.data_op() else {
            return Next::Continue;
        };
        let started = Instant::now();
        // One admission slot per key in flight (multi-key commands run at
        // most MULTI_KEY_CONCURRENCY keys at once).
        let keys = match &command {
            Command::Del(k) | Command::Exists(k) | Command::MGet(k) => k.len(),
            Command::MSet(pairs) => pairs.len(),
            _ => 1,
        }
        .clamp(1, super::data::MULTI_KEY_CONCURRENCY);
        let core = self.core.clone();
        let Ok(_slots) = core
            .client_slots
            .try_acquire_many(u32::try_from(keys).unwrap_or(u32::MAX))
        else {
            reply::err(
                &mut self.output,
                &format!(
                    "overloaded: too many client requests in flight on {}; retry later",
                    core.node
                ),
            );
            metrics::record_request("resp", op, Outcome::Overloaded, started.elapsed());
            return Next::Continue;
        };
        let id = super::request_id();
        let span = tracing::debug_span!("resp", id, op, peer = %self.peer);
        let out = &mut self.output;
        let outcome = async {
            match command {
                Command::Get(key) => core.get(id, key, out).await,
                Command::Set(key, value) => core.set(id, key, value, out).await,
                Command::Del(keys) => core.del(id, keys, out).await,
                Command::Exists(keys) => core.exists(id, keys, out).await,
                Command::MGet(keys) => core.mget(id, keys, out).await,
                Command::MSet(pairs) => core.mset(id, pairs, out).await,
                _ => Outcome::Ok,
            }
        }
        .instrument(span)
        .await;
        metrics::record_request("resp", op, outcome, started.elapsed());
        if self.output.len() >= FLUSH_AT && self.flush().await.is_err() {
            // Nothing more reaches this client: drop its answers and close.
            self.output.clear();
            return Next::Close;
        }
        Next::Continue
    }

    /// `AUTH [username] password`: only the `default` user exists.
    fn auth(&mut self, user: Option<&Bytes>, password: &[u8]) -> Next {
        match self.check_password(user, password) {
            Ok(()) => {
                reply::ok(&mut self.output);
                Next::Continue
            }
            Err(next) => next,
        }
    }

    /// Checks a password. On failure the error is answered already and
    /// `Err` says whether to close (after [`MAX_AUTH_FAILURES`] wrong ones).
    fn check_password(&mut self, user: Option<&Bytes>, password: &[u8]) -> Result<(), Next> {
        let Some(expected) = &self.core.settings.password else {
            reply::err(
                &mut self.output,
                "AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?",
            );
            return Err(Next::Continue);
        };
        let user_ok = user.is_none_or(|u| u.as_ref() == b"default");
        if user_ok && constant_time_eq(expected.as_bytes(), password) {
            self.authenticated = true;
            return Ok(());
        }
        self.auth_failures += 1;
        ::metrics::counter!("kv_resp_auth_failures_total").increment(1);
        reply::error(
            &mut self.output,
            "WRONGPASS",
            "invalid username-password pair or user is disabled.",
        );
        if self.auth_failures >= MAX_AUTH_FAILURES {
            debug!(peer = %self.peer, "closing after repeated wrong passwords");
            return Err(Next::Close);
        }
        Err(Next::Continue)
    }

    /// `HELLO [2 [AUTH user pass]]`; RESP3 is not spoken.
    fn hello(&mut self, version: Option<&Bytes>, auth: Option<(Bytes, Bytes)>) -> Next {
        if let Some(v) = version
            && v.as_ref() != b"2"
        {
            reply::error(
                &mut self.output,
                "NOPROTO",
                "unsupported protocol version: this server speaks RESP2 only",
            );
            return Next::Continue;
        }
        if let Some((user, password)) = auth
            && let Err(next) = self.check_password(Some(&user), &password)
        {
            return next;
        }
        if !self.authenticated {
            reply::error(
                &mut self.output,
                "NOAUTH",
                "HELLO must be called with the client already authenticated, otherwise the HELLO <proto> AUTH <user> <pass> option can be used",
            );
            return Next::Continue;
        }
        self.core.hello(&mut self.output);
        Next::Continue
    }
}

/// Compares two byte strings in time that depends only on their lengths.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::constant_time_eq;

    #[test]
    fn passwords_compare_exactly() {
        assert!(constant_time_eq(b"secret", b"secret"));
        assert!(!constant_time_eq(b"secret", b"secreT"));
        assert!(!constant_time_eq(b"secret", b"secret!"));
    }
}
