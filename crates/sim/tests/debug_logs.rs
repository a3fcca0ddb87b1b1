//! The core's debug logs, which `--trace` prints (among them which replica
//! coordinated each write and the dot it issued), leave a seed's schedule
//! exactly as it is.
//!
//! Alone in its test binary: `tracing` caches each callsite's interest
//! for the whole process, and beside other tests whose threads reach the
//! core's callsites with no subscriber set, the scoped subscriber here
//! missed every event (it failed that way in `determinism.rs`).

use std::io::Write;
use std::sync::{Arc, Mutex};

use kv_sim::{SimSettings, run_seed};

/// Log lines written by the test subscriber.
#[derive(Clone, Default)]
struct Logs(Arc<Mutex<Vec<u8>>>);

impl Logs {
    fn text(&self) -> String {
        let bytes = self.0.lock().unwrap_or_else(|p| p.into_inner());
        String::from_utf8_lossy(&bytes).into_owned()
    }
}

impl Write for Logs {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The same history and trace with the debug logs on as without. Seed
/// 1674 is the one whose investigation needed the coordinated-write lines.
#[test]
fn the_cores_debug_logs_do_not_change_a_seeds_schedule() -> kv_sim::Result<()> {
    let settings = SimSettings::default();
    let quiet = run_seed(1674, &settings)?;
    let logs = Logs::default();
    let writer = logs.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::new("kv_replication=debug"))
        .with_ansi(false)
        .without_time()
        .with_writer(move || writer.clone())
        .finish();
    let logged = tracing::subscriber::with_default(subscriber, || run_seed(1674, &settings))?;
    let text = logs.text();
    assert!(
        text.contains("coordinated write: dot issued") && text.contains("write coordinated"),
        "the subscriber saw no coordinated write"
    );
    assert!(!quiet.failed(), "seed 1674 failed");
    assert_eq!(quiet.trace, logged.trace);
    assert!(
        quiet.history == logged.history,
        "seed 1674 gave another history with the debug logs on"
    );
    Ok(())
}
