//! The whole workload (runner, settle phase, history file, checker) against
//! in-memory stores built on the real dotted version vectors: a correct
//! store passes, and stores that lose, invent or dishonestly report writes
//! are caught.
#![allow(clippy::unwrap_used)]

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kv_client::{GetReply, NodeReport, Object, Sibling, StatusReport};
use kv_types::{Actor, NodeId, VersionVector};
use kv_workload::{AnomalyKind, Error, Report, Store, WorkloadSettings, check, read_history, run};

/// How the store misbehaves.
#[derive(Clone, Copy, PartialEq)]
enum Fault {
    /// Not at all.
    None,
    /// Acknowledges every 7th put without storing it.
    DropPuts,
    /// Stores every 5th put but answers "unavailable".
    LieUnavailable,
    /// Every 6th write times out, stored or not (alternately).
    Timeouts,
    /// Final reads (R given) of registers return a value nobody wrote.
    Invent,
    /// Status never answers.
    Down,
}

struct MemoryStore {
    objects: Mutex<HashMap<Vec<u8>, Object>>,
    actor: Actor,
    writes: AtomicU64,
    fault: Fault,
}

impl MemoryStore {
    fn new(fault: Fault) -> Arc<Self> {
        Arc::new(MemoryStore {
            objects: Mutex::new(HashMap::new()),
            actor: Actor {
                node: NodeId::new("node1").unwrap(),
                incarnation: 1,
            },
            writes: AtomicU64::new(0),
            fault,
        })
    }

    fn unavailable() -> kv_client::Error {
        kv_client::Error::Unavailable {
            node: "node1".into(),
            message: "only 1 of 3 replicas alive".into(),
        }
    }

    fn write(&self, key: &[u8], data: Option<&[u8]>, context: &[u8]) -> kv_client::Result<Vec<u8>> {
        let n = self.writes.fetch_add(1, Ordering::Relaxed) + 1;
        let is_put = data.is_some();
        let dropped = self.fault == Fault::DropPuts && is_put && n.is_multiple_of(7);
        let timed_out_unstored = self.fault == Fault::Timeouts && n.is_multiple_of(12);
        let store = !(dropped || timed_out_unstored);
        if store {
            let context = VersionVector::from_context(context)?;
            let mut objects = self.objects.lock().unwrap();
            let object = objects.entry(key.to_vec()).or_default();
            let sibling = Sibling {
                data: data.map(<[u8]>::to_vec),
                written_at_ms: 0,
            };
            *object = object.update(&context, &self.actor, sibling);
        }
        if self.fault == Fault::LieUnavailable && is_put && n.is_multiple_of(5) {
            return Err(Self::unavailable());
        }
        if self.fault == Fault::Timeouts && n.is_multiple_of(6) {
            return Err(kv_client::Error::Indeterminate {
                node: "node1".into(),
                message: "no answer within 10000 ms after sending".into(),
            });
        }
        Ok(Vec::new())
    }
}

impl Store for MemoryStore {
    async fn get(&self, key: &[u8], r: Option<u8>) -> kv_client::Result<GetReply> {
        tokio::time::sleep(Duration::from_millis(1)).await;
        let object = self
            .objects
            .lock()
            .unwrap()
            .get(key)
            .cloned()
            .unwrap_or_default();
        let mut values: Vec<Vec<u8>> = object.live_values().map(<[u8]>::to_vec).collect();
        if self.fault == Fault::Invent && r.is_some() && key.starts_with(b"reg-") {
            values.push(b"c99-0".to_vec());
        }
        Ok(GetReply {
            deleted: values.is_empty(),
            values,
            context: object.join().to_context().unwrap(),
        })
    }

    async fn put(
        &self,
        key: &[u8],
        value: &[u8],
        context: &[u8],
        _w: Option<u8>,
    ) -> kv_client::Result<Vec<u8>> {
        tokio::time::sleep(Duration::from_millis(1)).await;
        self.write(key, Some(value), context)
    }

    async fn delete(
        &self,
        key: &[u8],
        context: &[u8],
        _w: Option<u8>,
    ) -> kv_client::Result<Vec<u8>> {
        tokio::time::sleep(Duration::from_millis(1)).await;
        self.write(key, None, context)
    }

    async fn status(&self) -> kv_client::Result<StatusReport> {
        if self.fault == Fault::Down {
            return Err(Self::unavailable());
        }
        let node = |id: &str| NodeReport {
            id: id.into(),
            addr: "127.0.0.1:1".into(),
            zone: "z".into(),
            host: "h".into(),
            status: "UP".into(),
            alive: true,
            ring_share: 0.5,
            transfer: String::new(),
            resp: String::new(),
            admin: String::new(),
        };
        Ok(StatusReport {
            node: "node1".into(),
            ring_version: 1,
            partitions: 8,
            replicas: 3,
            nodes: vec![node("node1"), node("node2")],
            mode: "scoring".into(),
        })
    }
}

/// Runs 400 ms of workload against a store with `fault`; returns the
/// report and checks that re-checking the history file gives the same.
async fn workload(fault: Fault) -> Report {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("history.jsonl");
    let mut config = WorkloadSettings::new(Duration::from_millis(400), 4, 6, 11);
    config.settle = Duration::from_secs(3);
    let report = run(MemoryStore::new(fault), &config, &path).await.unwrap();
    let again = check(&read_history(&path).unwrap());
    assert_eq!(again.summary_line(), report.summary_line());
    assert!(report.stats.ops > 100, "{}", report.summary_line());
    report
}

#[tokio::test]
async fn a_correct_store_passes() {
    let report = workload(Fault::None).await;
    assert_eq!(
        report.exit_code(),
        0,
        "{}\n{:#?}",
        report.summary_line(),
        report.detail_lines()
    );
    assert!(report.counts.acked > 50);
    assert!(report.notes.is_empty(), "{:?}", report.notes);
}

#[tokio::test]
async fn timeouts_stored_or_not_are_not_anomalies() {
    let report = workload(Fault::Timeouts).await;
    assert!(report.counts.indeterminate > 0);
    assert_eq!(report.exit_code(), 0, "{:#?}", report.detail_lines());
}

#[tokio::test]
async fn dropped_writes_are_lost() {
    let report = workload(Fault::DropPuts).await;
    assert!(
        report.count(AnomalyKind::Lost) > 0,
        "{}",
        report.summary_line()
    );
    assert_eq!(report.exit_code(), 6);
}

#[tokio::test]
async fn a_dishonest_unavailable_is_caught() {
    let report = workload(Fault::LieUnavailable).await;
    assert!(report.counts.failed > 0);
    assert!(
        report
            .anomalies
            .iter()
            .any(|a| a.detail.contains("was not honest")),
        "{:#?}",
        report.detail_lines()
    );
    assert_eq!(report.exit_code(), 6);
}

#[tokio::test]
async fn invented_values_are_unexpected() {
    let report = workload(Fault::Invent).await;
    assert!(
        report.count(AnomalyKind::Unexpected) > 0,
        "{}",
        report.summary_line()
    );
}

#[tokio::test]
async fn a_cluster_that_does_not_answer_stops_the_run_before_it_starts() {
    let dir = tempfile::tempdir().unwrap();
    let config = WorkloadSettings::new(Duration::from_millis(100), 1, 1, 1);
    let e = run(
        MemoryStore::new(Fault::Down),
        &config,
        &dir.path().join("h"),
    )
    .await
    .unwrap_err();
    assert!(matches!(e, Error::Start(_)), "{e}");
    assert_eq!(e.exit_code(), 3);
    assert!(!dir.path().join("h").exists());
}
