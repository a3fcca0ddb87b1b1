//! Sending one request: to the hops the router planned, racing connection
//! attempts so that a node that does not answer its handshake costs a short
//! delay, not a connect timeout (happy eyeballs, RFC 8305), failing over
//! only when that is safe, hedging a read to the next hop when the first
//! one stalls (within the hedge budget), and failing a read over to the
//! next hop when the first has not answered within the failover delay
//! (whatever the budget: a dead node's connection stays open until its
//! idle timeout, and a read must not wait for that).

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use futures::StreamExt;
use futures::stream::FuturesUnordered;
use kv_router::{Op as RouterOp, Outcome, Ticket};
use kv_tls::ANY_NODE;
use kv_transport::Endpoint;
use kv_types::NodeId;
use kv_wire::{Request, RequestBody, Response};
use tokio::time::Instant;
use tracing::debug;

use crate::Error;
use crate::failover::{Op, may_try_next, summarize};
use crate::resolve::{lookup, pick};
use crate::routing::{Hop, Routing};

/// What every request of one client shares: the QUIC endpoint, the router,
/// the configured endpoints.
pub(crate) struct Shared {
    pub endpoint: Arc<Endpoint>,
    pub routing: Arc<Routing>,
    /// The configured endpoints, as hops.
    pub configured: Vec<Hop>,
    /// Whether the socket is IPv6.
    pub ipv6: bool,
    /// Longest wait for one handshake.
    pub connect_timeout: Duration,
    /// The ring version of the last answer (0 before any).
    pub ring_version: AtomicU64,
}

/// No hop: an attempt with no call in flight.
const NO_HOP: usize = usize::MAX;

/// What a successful send answers: the endpoint that answered, and its
/// answer.
pub(crate) type Answer = (String, Response);

/// A request in flight to a node, for the router. A read's call runs as a
/// task of its own ([`Shared::attempts`]), so a read whose caller stopped
/// waiting (a hedge's loser, a read failed over, a caller that gave up)
/// still hears its answer, and the router folds in the node's true
/// latency: the request stays in flight, its age flooring the node's
/// latency, until then. Dropped unanswered (a write whose caller gave up,
/// a read whose runtime shut down under it) it is abandoned: its age
/// floors the node's latency until the node answers something, the
/// deadline passes, or the router's `abandoned_hold` times that age has
/// passed.
struct InFlight {
    routing: Arc<Routing>,
    node: NodeId,
    op: RouterOp,
    ticket: Option<Ticket>,
    sent: std::time::Instant,
    until: std::time::Instant,
}

impl InFlight {
    fn end(mut self, outcome: Outcome) {
        if let Some(ticket) = self.ticket.take() {
            self.routing.end(&ticket, &self.node, self.op, outcome);
        }
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        if let Some(ticket) = self.ticket.take() {
            self.routing.abandon(&ticket, self.sent, self.until);
        }
    }
}

impl Shared {
    /// Sends `body` (about `key`, if any) as the router plans it, within
    /// `timeout`.
    ///
    /// # Errors
    /// The last failure, with every earlier one in its message; an error
    /// answer as [`Error`].
    pub async fn send(
        self: &Arc<Self>,
        op: Op,
        key: Option<&[u8]>,
        mut body: RequestBody,
        timeout: Duration,
    ) -> crate::Result<Answer> {
        let deadline = Instant::now() + timeout;
        let router_op = match op {
            Op::Read => RouterOp::Get,
            Op::Write => RouterOp::Put,
        };
        let plan = self.routing.plan(key, router_op, &self.configured);
        for probe in plan.probes {
            self.probe(probe);
        }
        if key.is_some() {
            self.routing.on_request();
        }
        let hedge_after = plan
            .hedge_after
            .filter(|_| op == Op::Read && plan.hops.len() > 1);
        // The client hedges this read itself: the coordinator must not.
        if let (Some(_), RequestBody::Get { hedged, .. }) = (hedge_after, &mut body) {
            *hedged = true;
        }
        let request = Arc::new(crate::client::request(body)?);
        // A node the router keeps out is re-tested by this read too, in the
        // background (its call tells the router how long the node took;
        // the caller does not wait for it), when the hedge budget allows.
        if let Some(hop) = plan
            .latency_probe
            .filter(|_| op == Op::Read && key.is_some())
            && self.routing.try_hedge()
        {
            debug!(id = request.id, endpoint = %hop.name, "probing a node kept out");
            let shared = Arc::clone(self);
            let request = Arc::clone(&request);
            let key = key.map(<[u8]>::to_vec);
            tokio::spawn(async move {
                let _ = shared
                    .attempts(&[hop], 0, &request, op, key.as_deref(), deadline, None)
                    .await;
            });
        }
        let hops = plan.hops;
        let started = Instant::now();
        // A read (any request that changes nothing) still unanswered after
        // the failover delay goes to the next hop too, whatever the budget:
        // its node is most likely dead with its connection still open (a
        // killed process answers nothing until the idle timeout).
        let failover_at = (op == Op::Read && hops.len() > 1)
            .then(|| started + self.routing.failover_after(router_op, timeout));
        let second_at = match (hedge_after, failover_at) {
            (Some(delay), Some(at)) => Some((started + delay).min(at)),
            (None, at) => at,
            (Some(_), None) => None,
        };
        // The hop the primary attempt has a call in flight to (`NO_HOP`:
        // none): as the hedge leaves, the request the hedge is sent past
        // (a hedge that loses is not outrun: it was sent a moment ago, and
        // its age says nothing, so the hedge's own hop is not kept).
        let primary_at = AtomicUsize::new(NO_HOP);
        let Some(second_at) = second_at else {
            return self
                .attempts(&hops, 0, &request, op, key, deadline, None)
                .await
                .map_err(|failures| self.no_answer(failures, timeout));
        };
        let primary = self.attempts(&hops, 0, &request, op, key, deadline, Some(&primary_at));
        tokio::pin!(primary);
        tokio::select! {
            result = &mut primary => {
                return result.map_err(|failures| self.no_answer(failures, timeout));
            }
            () = tokio::time::sleep_until(second_at) => {}
        }
        let failing_over = failover_at.is_some_and(|at| Instant::now() >= at);
        let may_hedge = || {
            let target = hops.get(1).and_then(|hop| hop.node.as_ref());
            self.routing.hedge_may_help(target, started.elapsed()) && self.routing.try_hedge()
        };
        if !failing_over && plan.budgeted && !may_hedge() {
            // No budget for a hedge, or the next replica is as slow: wait
            // for the failover delay.
            let Some(at) = failover_at else {
                return primary
                    .await
                    .map_err(|failures| self.no_answer(failures, timeout));
            };
            tokio::select! {
                result = &mut primary => {
                    return result.map_err(|failures| self.no_answer(failures, timeout));
                }
                () = tokio::time::sleep_until(at) => {}
            }
        }
        debug!(id = request.id, "asking the next node too");
        let passed = primary_at.load(Ordering::Relaxed);
        let hedge = self.attempts(&hops, 1, &request, op, key, deadline, None);
        tokio::pin!(hedge);
        let mut failures = Vec::new();
        let mut primary_done = false;
        let mut hedge_done = false;
        while !(primary_done && hedge_done) {
            tokio::select! {
                result = &mut primary, if !primary_done => match result {
                    Ok(answer) => return Ok(answer),
                    Err(f) => { failures.extend(f); primary_done = true; }
                },
                result = &mut hedge, if !hedge_done => match result {
                    Ok(answer) => {
                        // Still the call the hedge was sent past (not one
                        // the primary failed over to since, younger than
                        // the hedge), to another node than the one that
                        // answered.
                        if primary_at.load(Ordering::Relaxed) == passed {
                            self.outrun(&hops, passed, &answer.0);
                        }
                        return Ok(answer);
                    }
                    Err(f) => { failures.extend(f); hedge_done = true; }
                },
            }
        }
        Err(self.no_answer(failures, timeout))
    }

    /// Tells the router that the call in flight to hop `index` (`NO_HOP`:
    /// none) was outrun: the hedge sent past it answered the read first,
    /// from endpoint `answered_by`, and the call runs on to its answer
    /// ([`Routing::outrun`]). Nothing when the hop is the endpoint that
    /// answered (the primary had failed over to the hedge's node).
    fn outrun(&self, hops: &[Hop], index: usize, answered_by: &str) {
        let node = hops
            .get(index)
            .filter(|hop| hop.name != answered_by)
            .and_then(|hop| hop.node.as_ref());
        if let Some(node) = node {
            self.routing.outrun(node);
        }
    }

    fn no_answer(&self, failures: Vec<Error>, timeout: Duration) -> Error {
        summarize(failures).unwrap_or_else(|| Error::Indeterminate {
            node: "client".into(),
            message: format!("no endpoint answered within {timeout:?}"),
        })
    }

    /// Tries `hops` from `from` on until one answers or failing over is no
    /// longer safe. A refusal or an error answer ends it at once. `at`, if
    /// given, holds the index of the hop a call is in flight to (`NO_HOP`
    /// between calls).
    #[allow(clippy::too_many_arguments)]
    async fn attempts(
        self: &Arc<Self>,
        hops: &[Hop],
        from: usize,
        request: &Arc<Request>,
        op: Op,
        key: Option<&[u8]>,
        deadline: Instant,
        at: Option<&AtomicUsize>,
    ) -> Result<Answer, Vec<Error>> {
        let note = |hop: usize| {
            if let Some(at) = at {
                at.store(hop, Ordering::Relaxed);
            }
        };
        let mut failures = Vec::new();
        let mut next = from;
        while next < hops.len() {
            let remaining = deadline.saturating_duration_since(Instant::now());
            if remaining.is_zero() {
                break;
            }
            let (i, addr) = match self.race(hops, next, deadline).await {
                Ok(won) => won,
                Err((e, stop)) => {
                    failures.extend(e);
                    if stop {
                        return Err(failures);
                    }
                    break;
                }
            };
            next = i + 1;
            let hop = &hops[i];
            let server_name = hop.node.as_ref().map_or(ANY_NODE, NodeId::as_str);
            let remaining = deadline.saturating_duration_since(Instant::now());
            let router_op = match op {
                Op::Read => RouterOp::Get,
                Op::Write => RouterOp::Put,
            };
            let flight = hop.node.as_ref().map(|node| {
                let sent = std::time::Instant::now();
                InFlight {
                    routing: Arc::clone(&self.routing),
                    node: node.clone(),
                    op: router_op,
                    ticket: Some(self.routing.begin(node, router_op)),
                    sent,
                    until: sent + remaining,
                }
            });
            // A read's call is a task of its own: dropped, this future (a
            // hedge's loser, a read failed over) stops waiting for it, but
            // the call goes on to its answer or deadline and tells the
            // router how long the node took (see [`InFlight`]). A write is
            // never hedged nor failed over: its call stays in this future,
            // so a caller that gives up on it before it is sent (a user's
            // own timeout) still keeps it from being sent at all.
            let call = {
                let endpoint = Arc::clone(&self.endpoint);
                let request = Arc::clone(request);
                let server_name = server_name.to_string();
                async move {
                    let started = Instant::now();
                    let result = endpoint.call(addr, &server_name, &request, remaining).await;
                    if let Some(flight) = flight {
                        flight.end(match &result {
                            Ok(_) => Outcome::Ok {
                                latency: started.elapsed(),
                            },
                            Err(e) if e.is_timeout() => Outcome::Timeout,
                            Err(_) => Outcome::Error,
                        });
                    }
                    result
                }
            };
            note(i);
            let result = if op == Op::Read {
                match tokio::spawn(call).await {
                    Ok(result) => result,
                    // The call panicked: as it would have here.
                    Err(join) if join.is_panic() => std::panic::resume_unwind(join.into_panic()),
                    Err(_) => {
                        // Cancelled: the runtime is shutting down.
                        note(NO_HOP);
                        failures.push(Error::Indeterminate {
                            node: hop.name.clone(),
                            message: "the client is shutting down".into(),
                        });
                        return Err(failures);
                    }
                }
            } else {
                call.await
            };
            note(NO_HOP);
            match result {
                Ok(reply) => {
                    self.saw_ring(reply.ring_version);
                    self.routing.mark_alive(&hop.name);
                    self.routing.answered(&hop.name, key, hop.node.as_ref());
                    // An error answer is the answer: reported as it is.
                    return match reply.response {
                        Response::Error(e) => Err(vec![Error::from_wire(e)]),
                        response => Ok((hop.name.clone(), response)),
                    };
                }
                Err(e) => {
                    debug!(endpoint = %hop.name, id = request.id, error = %e, "request failed");
                    if matches!(e, kv_transport::Error::Connect { .. }) {
                        self.routing.mark_dead(&hop.name, std::time::Instant::now());
                    }
                    let error = Error::from_transport(&hop.name, &e);
                    failures.push(error);
                    if !may_try_next(op, &e) {
                        return Err(failures);
                    }
                }
            }
        }
        Err(failures)
    }

    /// Connects to one of `hops` from `from` on: the first gets a head
    /// start of the race delay, then the next joins, and so on (at once
    /// when one fails); the first connection made wins. Attempts that lose
    /// go on in the background and mark their endpoint dead or alive.
    /// Answers the winner's index and address, or the failures and whether
    /// they forbid trying further (a TLS refusal: every node would refuse).
    async fn race(
        self: &Arc<Self>,
        hops: &[Hop],
        from: usize,
        deadline: Instant,
    ) -> Result<(usize, SocketAddr), (Vec<Error>, bool)> {
        let delay = self.routing.race_delay();
        let mut attempts = FuturesUnordered::new();
        let mut errors = Vec::new();
        let mut next = from;
        let mut start_next = Instant::now();
        // Attempts started and not yet finished, by hop index.
        let mut pending: Vec<usize> = Vec::new();
        loop {
            let now = Instant::now();
            if now >= deadline {
                return Err((errors, false));
            }
            if next < hops.len() && (attempts.is_empty() || now >= start_next) {
                let hop = hops[next].clone();
                let timeout = self
                    .connect_timeout
                    .min(deadline.saturating_duration_since(now));
                let shared = Arc::clone(self);
                let index = next;
                attempts.push(tokio::spawn(async move {
                    (index, shared.connect(&hop, timeout).await)
                }));
                pending.push(index);
                next += 1;
                start_next = now + delay;
                continue;
            }
            if attempts.is_empty() {
                return Err((errors, false));
            }
            let more = next < hops.len();
            tokio::select! {
                done = attempts.next() => match done {
                    Some(Ok((index, Ok(addr)))) => {
                        // Those started earlier and still shaking hands lost
                        // to a later start: they count as dead until their
                        // attempt, which goes on, or a probe reaches them.
                        let now = std::time::Instant::now();
                        for lost in pending.iter().filter(|i| **i < index) {
                            self.routing.mark_dead(&hops[*lost].name, now);
                        }
                        return Ok((index, addr));
                    }
                    Some(Ok((index, Err((e, refused))))) => {
                        pending.retain(|i| *i != index);
                        errors.push(e);
                        if refused {
                            return Err((errors, true));
                        }
                        start_next = Instant::now();
                    }
                    Some(Err(join)) => errors.push(Error::Protocol {
                        node: "client".into(),
                        message: format!("a connection attempt failed: {join}"),
                    }),
                    None => {}
                },
                () = tokio::time::sleep_until(start_next), if more => {}
                () = tokio::time::sleep_until(deadline) => return Err((errors, false)),
            }
        }
    }

    /// Opens (or finds) a connection to `hop`, noting whether it is alive.
    /// The error says whether it was a refusal of this client's
    /// certificate.
    async fn connect(&self, hop: &Hop, timeout: Duration) -> Result<SocketAddr, (Error, bool)> {
        let addr = match hop.addr {
            Some(addr) => addr,
            None => {
                let unavailable = |message: String| Error::Unavailable {
                    node: hop.name.clone(),
                    message,
                };
                let addrs = lookup(&hop.name, timeout)
                    .await
                    .map_err(|m| (unavailable(m), false))?;
                pick(&addrs, self.ipv6)
                    .ok_or_else(|| (unavailable("resolves to IPv6 only".into()), false))?
            }
        };
        let server_name = hop.node.as_ref().map_or(ANY_NODE, NodeId::as_str);
        let started = Instant::now();
        match self.endpoint.connect(addr, server_name, timeout).await {
            Ok(new) => {
                if new {
                    self.routing.handshake(started.elapsed());
                }
                self.routing.mark_alive(&hop.name);
                Ok(addr)
            }
            Err(e) => {
                let refused = matches!(
                    e,
                    kv_transport::Error::Refused { .. } | kv_transport::Error::Tls(_)
                );
                if !refused {
                    self.routing.mark_dead(&hop.name, std::time::Instant::now());
                }
                Err((Error::from_transport(&hop.name, &e), refused))
            }
        }
    }

    /// Probes a dead endpoint in the background: a connection attempt that
    /// marks it alive when it succeeds.
    fn probe(self: &Arc<Self>, hop: Hop) {
        let shared = Arc::clone(self);
        tokio::spawn(async move {
            let _ = shared.connect(&hop, shared.connect_timeout).await;
        });
    }

    /// Notes the ring version of an answer.
    pub fn saw_ring(&self, version: u64) {
        self.ring_version.store(version, Ordering::Relaxed);
        self.routing.saw_version(version);
    }
}
