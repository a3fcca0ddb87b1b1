//! After the run: wait for the cluster to converge, then read back every
//! key the clients touched with R=N and record those reads (`op: "final"`).
//!
//! Convergence means a status answer in which every node of the ring (any
//! status but LEFT) is alive. The wait, the final reads and their retries
//! share one deadline, [`crate::WorkloadSettings::settle`] from the end of the
//! run; a cluster that never converges is noted and read anyway (keys whose
//! reads still fail end up unchecked, never passed). A key with a missing
//! acknowledged write is read again a few times before the verdict, in case
//! a replica was still catching up; the checker judges the last successful
//! final read of each key.

use std::collections::BTreeSet;
use std::path::Path;
use std::time::Duration;

use tokio::time::Instant;
use tracing::info;

use crate::Result;
use crate::checker::check;
use crate::history::{OpKind, read_history};
use crate::report::AnomalyKind;
use crate::runner::{Shared, fail, text};
use crate::store::Store;

/// Pause between status polls while waiting for convergence.
const POLL: Duration = Duration::from_millis(500);

/// Pause between attempts of a final read that failed.
const RETRY: Duration = Duration::from_millis(250);

/// Rounds of re-reading keys that miss an acknowledged write.
const REREADS: usize = 3;

/// Pause before each re-read round.
const REREAD_PAUSE: Duration = Duration::from_secs(2);

/// Waits for convergence and records the final reads; returns notes for the
/// report (a cluster that never converged).
///
/// # Errors
/// [`crate::Error::Io`] when the history cannot be written or read back.
pub(crate) async fn settle<S: Store>(shared: &Shared<S>, history: &Path) -> Result<Vec<String>> {
    let deadline = Instant::now() + shared.config.settle;
    let mut notes = Vec::new();
    let replicas = match converge(shared, deadline).await {
        Ok(replicas) => replicas,
        Err(problem) => {
            notes.push(format!(
                "the cluster did not converge within {} s ({problem}); final reads attempted anyway",
                shared.config.settle.as_secs()
            ));
            shared.replicas
        }
    };
    let keys: Vec<String> = {
        let touched = shared.touched.lock().unwrap_or_else(|p| p.into_inner());
        touched.iter().cloned().collect()
    };
    info!(keys = keys.len(), r = replicas, "final reads");
    for key in &keys {
        final_read(shared, key, replicas, deadline).await;
    }
    for _ in 0..REREADS {
        if Instant::now() + REREAD_PAUSE >= deadline {
            break;
        }
        shared.writer.flush()?;
        let report = check(&read_history(history)?);
        let missing: BTreeSet<&str> = report
            .anomalies
            .iter()
            .filter(|a| a.kind == AnomalyKind::Lost)
            .map(|a| a.key.as_str())
            .collect();
        if missing.is_empty() {
            break;
        }
        info!(
            keys = missing.len(),
            "re-reading keys that miss an acknowledged write"
        );
        tokio::time::sleep(REREAD_PAUSE).await;
        for key in missing {
            final_read(shared, key, replicas, deadline).await;
        }
    }
    Ok(notes)
}

/// Polls status until every node of the ring is alive; returns N, or what
/// was still wrong at the deadline.
async fn converge<S: Store>(
    shared: &Shared<S>,
    deadline: Instant,
) -> std::result::Result<u8, String> {
    loop {
        let problem = match shared.store.status().await {
            Ok(status) => {
                let down: Vec<&str> = status
                    .nodes
                    .iter()
                    .filter(|n| n.status != "LEFT" && !n.alive)
                    .map(|n| n.id.as_str())
                    .collect();
                if down.is_empty() {
                    return Ok(status.replicas);
                }
                format!("{} sees {} not alive", status.node, down.join(", "))
            }
            Err(e) => format!("status failed: {e}"),
        };
        if Instant::now() + POLL >= deadline {
            return Err(problem);
        }
        info!(%problem, "waiting for the cluster to converge");
        tokio::time::sleep(POLL).await;
    }
}

/// Reads `key` with R=`replicas` until a read succeeds or the deadline
/// passes (at least once); records the success, or the last failure.
async fn final_read<S: Store>(shared: &Shared<S>, key: &str, replicas: u8, deadline: Instant) {
    loop {
        let began = Instant::now();
        let result = shared
            .store
            .get(key.as_bytes(), Some(replicas.max(1)))
            .await;
        let mut entry = shared.entry(OpKind::Final, None, key, began);
        match result {
            Ok(reply) => {
                entry.values = Some(reply.values.iter().map(|v| text(v)).collect());
                entry.deleted = Some(reply.deleted);
                shared.writer.append(&entry);
                return;
            }
            Err(e) if Instant::now() + RETRY >= deadline => {
                fail(&mut entry, &e);
                shared.writer.append(&entry);
                return;
            }
            Err(_) => tokio::time::sleep(RETRY).await,
        }
    }
}
