//! The workload: concurrent clients running seeded steps against a
//! [`Store`] for a while, every request recorded in the history; then the
//! settle phase ([`crate::settle`]) and the checker.
//!
//! Each client is a tokio task with its own [`crate::Generator`], seeded
//! from the run's seed (its steps are in [`crate::client`]); all of them
//! share one [`Store`] and one history writer.

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::task::JoinSet;
use tokio::time::Instant;

use crate::checker::check;
use crate::generator::Mix;
use crate::history::{Entry, OpKind, Outcome, read_history};
use crate::report::Report;
use crate::store::Store;
use crate::writer::HistoryWriter;
use crate::{Error, Result};

/// A set holding this many elements is full: clients move on to the slot's
/// next key, so values stay small however long the run.
pub const SET_CAPACITY: usize = 1000;

/// Settings of one run.
#[derive(Clone, Debug)]
pub struct WorkloadSettings {
    /// How long clients start new operations.
    pub duration: Duration,
    /// Concurrent clients.
    pub clients: u32,
    /// Registers (`reg-0` ...).
    pub keys: u32,
    /// Grow-only set slots (`set-0` ...).
    pub sets: u32,
    /// Seed of every client's generator.
    pub seed: u64,
    /// Longest wait, after the run, for the cluster to converge and the
    /// final reads to succeed.
    pub settle: Duration,
    /// Prefix of every key (`<namespace>/reg-3`), so that a run never sees
    /// the values of an earlier run on the same cluster; empty for none.
    pub namespace: String,
    /// The operation mix.
    pub mix: Mix,
    /// Stop after this many client steps in all (`None`: only the duration
    /// bounds the run), so a simulated run does a fixed amount of work.
    pub max_ops: Option<u64>,
}

impl WorkloadSettings {
    /// A configuration with 4 set slots, a 120 s settle deadline, no
    /// namespace and the default mix.
    pub fn new(duration: Duration, clients: u32, keys: u32, seed: u64) -> Self {
        WorkloadSettings {
            duration,
            clients,
            keys,
            sets: 4,
            seed,
            settle: Duration::from_secs(120),
            namespace: String::new(),
            mix: Mix::default(),
            max_ops: None,
        }
    }
}

/// Runs the workload against `store`, writing the history to `history`,
/// and checks the history it wrote (read back from the file, so the verdict
/// is exactly what `check` on that file gives).
///
/// # Errors
/// [`Error::Invalid`] for unusable settings, [`Error::Start`] when the
/// cluster does not answer a first status request (nothing was attempted),
/// [`Error::Io`] when the history cannot be written.
pub async fn run<S: Store>(
    store: Arc<S>,
    config: &WorkloadSettings,
    history: &Path,
) -> Result<Report> {
    if config.clients == 0 || config.keys == 0 {
        return Err(Error::Invalid {
            message: "--clients and --keys must be at least 1".into(),
        });
    }
    // The run's time base starts before its first request (the status
    // request), so a caller's clock read just before `run` matches it.
    let start = Instant::now();
    let status = store.status().await.map_err(Error::Start)?;
    let writer = HistoryWriter::create(history)?;
    let shared = Arc::new(Shared {
        store,
        writer,
        start,
        end: start + config.duration,
        replicas: status.replicas,
        touched: Mutex::new(BTreeSet::new()),
        started: AtomicU64::new(0),
        config: config.clone(),
    });
    let mut clients = JoinSet::new();
    for client in 0..config.clients {
        let shared = Arc::clone(&shared);
        clients.spawn(async move { shared.client(client).await });
    }
    while clients.join_next().await.is_some() {}
    let notes = crate::settle::settle(&shared, history).await?;
    shared.writer.flush()?;
    let mut report = check(&read_history(history)?);
    report.notes.extend(notes);
    Ok(report)
}

/// What every client task shares.
pub(crate) struct Shared<S> {
    /// The cluster.
    pub(crate) store: Arc<S>,
    /// The history file.
    pub(crate) writer: HistoryWriter,
    /// Time zero of the history.
    pub(crate) start: Instant,
    /// When clients stop starting operations.
    pub(crate) end: Instant,
    /// N, from the status at the start (final reads use R=N).
    pub(crate) replicas: u8,
    /// Every key a client operation used, for the final reads.
    pub(crate) touched: Mutex<BTreeSet<String>>,
    /// Client steps started so far (for [`WorkloadSettings::max_ops`]).
    pub(crate) started: AtomicU64,
    /// The settings.
    pub(crate) config: WorkloadSettings,
}

impl<S: Store> Shared<S> {
    /// Counts one more client step; false once `max_ops` were started.
    pub(crate) fn take_op(&self) -> bool {
        let n = self.started.fetch_add(1, Ordering::Relaxed);
        self.config.max_ops.is_none_or(|max| n < max)
    }

    /// Milliseconds since the start of the run.
    pub(crate) fn ms_since_start(&self, at: Instant) -> f64 {
        micros(at.saturating_duration_since(self.start))
    }

    /// An entry with timing filled in from `began` to now.
    pub(crate) fn entry(
        &self,
        op: OpKind,
        client: Option<u32>,
        key: &str,
        began: Instant,
    ) -> Entry {
        Entry {
            op,
            client,
            key: key.to_string(),
            value: None,
            element: None,
            blind: false,
            saw: None,
            values: None,
            deleted: None,
            outcome: Outcome::Ok,
            error: None,
            start_ms: self.ms_since_start(began),
            latency_ms: micros(began.elapsed()),
        }
    }

    pub(crate) fn record(&self, entry: &Entry) {
        if entry.op != OpKind::Final {
            let mut touched = self.touched.lock().unwrap_or_else(|p| p.into_inner());
            touched.insert(entry.key.clone());
        }
        self.writer.append(entry);
    }
}

/// A duration in milliseconds, rounded to the microsecond (finer digits
/// are noise, and they make the history hard to read).
fn micros(d: Duration) -> f64 {
    (d.as_secs_f64() * 1e6).round() / 1000.0
}

/// Marks `entry` as ended by `error`.
pub(crate) fn fail(entry: &mut Entry, error: &kv_client::Error) {
    entry.outcome = Outcome::of_error(error);
    entry.error = Some(error.to_string());
}

/// Bytes as history text (the workload writes UTF-8 only; anything else
/// shows up as unexpected).
pub(crate) fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}
