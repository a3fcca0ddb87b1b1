//! The node's metrics: a Prometheus recorder (the `metrics` facade and
//! `metrics-exporter-prometheus`), the request series recorded on the hot
//! path, and the gauges sampled when `/metrics` is scraped.
//!
//! Series (all prefixed `kv_`):
//!
//! | series | type | labels | source |
//! | --- | --- | --- | --- |
//! | `requests_total`, `request_duration_seconds` | counter, histogram | `door` (quic, resp), `op`, `outcome` | every client request, timed at its front door |
//! | `resp_connections`, `resp_connections_total`, `resp_connections_rejected_total` | gauge, counters | | the RESP listener |
//! | `resp_protocol_errors_total` | counter | `reason` | malformed frames, unknown commands, bad arguments |
//! | `resp_auth_failures_total` | counter | | wrong AUTH passwords |
//! | `requests_in_flight`, `requests_in_flight_limit` | gauges | `kind` (client, peer) | the admission semaphores: queue depth and bound |
//! | `router_score`, `router_latency_seconds` | gauges | `peer`, `op` (get, put) | the scorer, ranking every ring member |
//! | `router_failure_rate`, `router_excluded` | gauges | `peer` | the scorer's failure window and hard filter |
//! | `hints_pending`, `hints_delivered_total`, `hints_dropped_total` | gauge, counters | | storage's hint tree, hinted handoff |
//! | `anti_entropy_*` | gauges, counters | | anti-entropy progress |
//! | `transfer_objects_received_total`, `transfer_segments_reconciled_total` | counters | | partition pulls (joins, drains): objects received, and segments found different from a holder after a partition's full pull |
//! | `back_fills_total` | counter | `outcome` (sent, skipped) | reads of moving partitions back-filling their pending owners, within `[transfer] back_fills_per_sec` |
//! | `storage_bytes_on_disk`, `storage_keys`, `storage_writes_total`, `storage_flushes_total`, `storage_writes_per_flush`, `storage_corrupt_quarantined_total`, `storage_failed`, `storage_disk_full`, `storage_free_bytes` | gauges, counters | | the storage engine |
//! | `storage_scrub_checked_total`, `storage_scrub_corrupt_total`, `storage_scrub_repaired_total` | counters | | the background scrub (`[storage] scrub_interval_secs`): records re-checked, damaged ones found, and rewritten from other replicas. `storage_corrupt_quarantined_total` counts damaged records overwritten by any write (a scrub repair, a read repair, anti-entropy, a client write): a record the scrub found and repaired counts once in each; one found again before its repair counts again in `scrub_corrupt` only |
//! | `ring_members`, `nodes_alive`, `uptime_seconds` | gauges | | membership |
//! | `replica_not_owner_total` | counter | | copies received for keys this node did not replicate (the sender routed with another ring) |
//! | `ring_version_mismatches_total` | counter | | answers and calls from nodes that routed with another ring than this node's |
//! | `tls_reloads_total` | counter | `outcome` (ok, failed) | certificate reloads (SIGHUP); a failed one kept the files loaded before |
//! | `tls_cert_not_after_seconds`, `tls_trusted_cas` | gauges | | the node's certificate as loaded last: its `notAfter` (Unix seconds), the CAs its bundle holds |
//!
//! Durations are in seconds, sizes in bytes (Prometheus conventions). The
//! read cache's hit ratio joins when the cache exists.

mod sample;

pub use sample::Sources;

use std::time::Duration;

use kv_wire::{ErrorKind, RequestBody, Response};
use metrics::{counter, describe_counter, describe_gauge, describe_histogram, histogram};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};

/// Request latency buckets, seconds: 100 us to 10 s.
const LATENCY_BUCKETS: [f64; 16] = [
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
    5.0, 10.0,
];

/// Installs the process-wide Prometheus recorder and describes the series.
///
/// # Errors
/// When a recorder is installed already (a bug: called twice).
pub fn install() -> anyhow::Result<PrometheusHandle> {
    let handle = PrometheusBuilder::new()
        .set_buckets_for_metric(
            Matcher::Full("kv_request_duration_seconds".into()),
            &LATENCY_BUCKETS,
        )?
        .install_recorder()?;
    describe_counter!(
        "kv_requests_total",
        "Client requests answered, by front door, operation and outcome."
    );
    describe_histogram!(
        "kv_request_duration_seconds",
        metrics::Unit::Seconds,
        "Time from a request's arrival at its front door to its answer."
    );
    describe_gauge!("kv_resp_connections", "Open RESP connections.");
    describe_counter!("kv_resp_connections_total", "RESP connections accepted.");
    describe_counter!(
        "kv_admin_connections_refused_total",
        "Admin endpoint connections closed at accept: the connection cap was reached."
    );
    describe_counter!(
        "kv_resp_connections_rejected_total",
        "RESP connections refused because max_connections were open."
    );
    describe_counter!(
        "kv_resp_protocol_errors_total",
        "RESP requests refused: malformed frames, unknown commands, bad arguments."
    );
    describe_counter!(
        "kv_resp_auth_failures_total",
        "RESP AUTH attempts with a wrong password."
    );
    describe_gauge!(
        "kv_requests_in_flight",
        "Requests being served (admission queue depth)."
    );
    describe_gauge!(
        "kv_requests_in_flight_limit",
        "Bound of the admission queue."
    );
    describe_gauge!(
        "kv_router_score",
        "The scorer's score of a peer in [0, 1] (0 when excluded)."
    );
    describe_gauge!(
        "kv_router_latency_seconds",
        metrics::Unit::Seconds,
        "Latency the scorer uses for a peer (its EWMA, or the cluster mean while it has few samples)."
    );
    describe_gauge!(
        "kv_router_failure_rate",
        "A peer's failure rate over the scorer's window."
    );
    describe_gauge!(
        "kv_router_excluded",
        "1 when the hard filter excludes a peer (dead, breaker, failures)."
    );
    describe_gauge!(
        "kv_hints_pending",
        "Hints this node holds for other replicas."
    );
    describe_counter!(
        "kv_hints_delivered_total",
        "Hints delivered to their owner and deleted."
    );
    describe_counter!(
        "kv_hints_dropped_total",
        "Hints dropped: too old, or refused when the hint store was full."
    );
    describe_counter!(
        "kv_replica_not_owner_total",
        "Copies received for keys this node replicates under neither its current nor its target ring (stored, then handed to the owners)."
    );
    describe_counter!(
        "kv_ring_version_mismatches_total",
        "Answers and replica calls from nodes that routed with another ring than this node's."
    );
    describe_counter!(
        "kv_tls_reloads_total",
        "Certificate reloads (SIGHUP), by outcome: ok, or failed (the files loaded before were kept)."
    );
    describe_gauge!(
        "kv_tls_cert_not_after_seconds",
        metrics::Unit::Seconds,
        "When the node's certificate as loaded last stops being valid, seconds since the Unix epoch."
    );
    describe_gauge!(
        "kv_tls_trusted_cas",
        "CA certificates in the node's CA bundle as loaded last (2 while the cluster CA is rotated)."
    );
    describe_gauge!(
        "kv_anti_entropy_running",
        "1 while a full anti-entropy pass runs."
    );
    describe_gauge!(
        "kv_anti_entropy_partitions_done",
        "Partitions compared by the current or last full pass (kvctl repair; 0 until one runs: scheduled exchanges count in kv_anti_entropy_exchanges_total)."
    );
    describe_gauge!(
        "kv_anti_entropy_partitions_total",
        "Partitions of the current or last full pass (kvctl repair; 0 until one runs)."
    );
    describe_counter!(
        "kv_cache_hits_total",
        "Reads answered by the LRU read cache in front of the storage engine."
    );
    describe_counter!(
        "kv_cache_misses_total",
        "Reads the LRU read cache could not answer (served by the storage engine)."
    );
    describe_gauge!(
        "kv_cache_hit_ratio",
        "Hits over lookups of the LRU read cache since the node started (0.0..=1.0)."
    );
    describe_gauge!("kv_cache_entries", "Objects held by the LRU read cache.");
    describe_gauge!(
        "kv_cache_bytes",
        metrics::Unit::Bytes,
        "Approximate size of the objects held by the LRU read cache."
    );
    describe_counter!(
        "kv_back_fills_total",
        "Read back-fills to the pending new owners of moving partitions, by outcome: sent, or skipped over [transfer] back_fills_per_sec."
    );
    describe_counter!(
        "kv_transfer_objects_received_total",
        "Objects received by partition pulls (joins, drains) since the node started."
    );
    describe_counter!(
        "kv_transfer_segments_reconciled_total",
        "Segments a pull found different from another holder's after a partition's full pull, each then pulled from that holder."
    );
    describe_counter!(
        "kv_anti_entropy_keys_repaired_total",
        "Keys repaired by anti-entropy."
    );
    describe_counter!(
        "kv_anti_entropy_exchanges_total",
        "Anti-entropy exchanges completed."
    );
    describe_counter!(
        "kv_anti_entropy_segments_differing_total",
        "Segments found different."
    );
    describe_counter!(
        "kv_anti_entropy_failures_total",
        "Anti-entropy steps (a partition's or segment's comparison, a key's repair) that could not complete because a peer or the local store did not answer."
    );
    describe_gauge!(
        "kv_storage_bytes_on_disk",
        metrics::Unit::Bytes,
        "Size of the storage engine's files."
    );
    describe_gauge!("kv_storage_keys", "Objects stored.");
    describe_counter!(
        "kv_storage_writes_total",
        "Writes applied by the storage engine."
    );
    describe_counter!(
        "kv_storage_flushes_total",
        "Group-commit flushes (fsyncs) completed."
    );
    describe_gauge!(
        "kv_storage_writes_per_flush",
        "Average writes made durable per flush."
    );
    describe_counter!(
        "kv_storage_corrupt_quarantined_total",
        "Corrupt records quarantined."
    );
    describe_counter!(
        "kv_storage_scrub_checked_total",
        "Records re-read and re-checked by the background scrub."
    );
    describe_counter!(
        "kv_storage_scrub_corrupt_total",
        "Damaged records the scrub found (again at each pass until repaired)."
    );
    describe_counter!(
        "kv_storage_scrub_repaired_total",
        "Damaged records the scrub rewrote from other replicas."
    );
    describe_gauge!(
        "kv_storage_failed",
        "1 while the engine is failed and waiting to reopen."
    );
    describe_gauge!(
        "kv_storage_disk_full",
        "1 while writes are refused because free space is below [storage] min_free_bytes."
    );
    describe_gauge!(
        "kv_storage_free_bytes",
        metrics::Unit::Bytes,
        "Free space of the filesystem holding the data directory (statvfs, at most 250 ms old)."
    );
    describe_gauge!("kv_ring_members", "Nodes in the ring.");
    describe_gauge!(
        "kv_nodes_alive",
        "Ring members the failure detector believes alive."
    );
    describe_gauge!(
        "kv_uptime_seconds",
        metrics::Unit::Seconds,
        "Time since this node started."
    );
    Ok(handle)
}

/// How a request ended, for the `outcome` label.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Answered with data or an acknowledgement.
    Ok,
    /// The key is absent or deleted.
    NotFound,
    /// Malformed or out of bounds.
    Invalid,
    /// Refused by certificate role or authentication.
    Refused,
    /// Quorum not reached; nothing stored.
    Unavailable,
    /// The outcome is unknown; a write may be stored.
    Indeterminate,
    /// The admission queue was full.
    Overloaded,
    /// Siblings: the sibling cap was hit, or RESP's `error` rule refused a
    /// read with siblings.
    Siblings,
    /// A node's storage failed before storing anything.
    Storage,
    /// Anything else (corruption, internal errors).
    Error,
}

impl Outcome {
    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Ok => "ok",
            Outcome::NotFound => "not_found",
            Outcome::Invalid => "invalid",
            Outcome::Refused => "refused",
            Outcome::Unavailable => "unavailable",
            Outcome::Indeterminate => "indeterminate",
            Outcome::Overloaded => "overloaded",
            Outcome::Siblings => "siblings",
            Outcome::Storage => "storage",
            Outcome::Error => "error",
        }
    }

    /// The outcome of an error of `kind`.
    pub fn of_error(kind: ErrorKind) -> Outcome {
        match kind {
            ErrorKind::Unavailable => Outcome::Unavailable,
            ErrorKind::Indeterminate => Outcome::Indeterminate,
            ErrorKind::Overloaded => Outcome::Overloaded,
            ErrorKind::Invalid => Outcome::Invalid,
            ErrorKind::Refused => Outcome::Refused,
            ErrorKind::TooManySiblings => Outcome::Siblings,
            ErrorKind::Storage => Outcome::Storage,
            ErrorKind::Corrupt | ErrorKind::Internal => Outcome::Error,
        }
    }

    /// The outcome of a response.
    pub fn of_response(response: &Response) -> Outcome {
        match response {
            Response::Error(e) => Outcome::of_error(e.kind),
            Response::Get(reply) if reply.deleted => Outcome::NotFound,
            _ => Outcome::Ok,
        }
    }
}

/// Records one request: `door` is `quic` or `resp`, `op` the operation.
///
/// The counter and histogram handles of each label set are looked up in
/// the registry once per thread and kept: a registry lookup builds the
/// labelled key and hashes it, 2.1% of a coordinator's CPU under RESP GET
/// R=1 when done per request (docs/benchmarks.md, set 6).
pub fn record_request(door: &'static str, op: &'static str, outcome: Outcome, elapsed: Duration) {
    HANDLES.with(|handles| {
        let mut handles = handles.borrow_mut();
        let at = handles.iter().position(|h| {
            std::ptr::eq(h.door, door) && std::ptr::eq(h.op, op) && h.outcome == outcome
        });
        let at = at.unwrap_or_else(|| {
            let labels = [("door", door), ("op", op), ("outcome", outcome.as_str())];
            handles.push(RequestHandles {
                door,
                op,
                outcome,
                count: counter!("kv_requests_total", &labels),
                duration: histogram!("kv_request_duration_seconds", &labels),
            });
            handles.len() - 1
        });
        if let Some(h) = handles.get(at) {
            h.count.increment(1);
            h.duration.record(elapsed.as_secs_f64());
        }
    });
}

/// One label set's request series, as [`record_request`] keeps them.
struct RequestHandles {
    door: &'static str,
    op: &'static str,
    outcome: Outcome,
    count: metrics::Counter,
    duration: metrics::Histogram,
}

thread_local! {
    /// This thread's request series handles (a few label sets: linear
    /// search by the labels' addresses).
    static HANDLES: std::cell::RefCell<Vec<RequestHandles>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// The `op` label of a QUIC client request.
pub fn quic_op(body: &RequestBody) -> &'static str {
    match body {
        RequestBody::Get { .. } => "get",
        RequestBody::Put { .. } => "put",
        RequestBody::Delete { .. } => "delete",
        RequestBody::LocalGet { .. } => "local_get",
        RequestBody::Status => "status",
        RequestBody::Certs => "certs",
        RequestBody::Explain { .. } => "explain",
        _ => "admin",
    }
}

/// Counts a refused RESP request.
pub fn resp_protocol_error(reason: &'static str) {
    counter!("kv_resp_protocol_errors_total", "reason" => reason).increment(1);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outcomes_follow_error_kinds() {
        assert_eq!(
            Outcome::of_error(ErrorKind::Overloaded),
            Outcome::Overloaded
        );
        assert_eq!(Outcome::of_error(ErrorKind::Corrupt), Outcome::Error);
        assert_eq!(
            Outcome::of_response(&Response::Get(kv_wire::GetReply {
                values: vec![],
                deleted: true,
                context: vec![],
            })),
            Outcome::NotFound
        );
        assert_eq!(Outcome::of_response(&Response::Ack), Outcome::Ok);
    }
}
