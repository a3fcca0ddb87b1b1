//! Storage work that may block (an fsync, a scan of a partition, a
//! metadata write) runs on tokio's blocking pool, through this one helper,
//! so that point reads and writes keep the async workers to themselves.
//!
//! Tests and the simulation run whole clusters on memory engines under
//! tokio's paused clock, where a blocking-pool task would look like an
//! idle runtime and let time jump: [`crate::testkit::run_storage_inline`]
//! makes this helper run the work inline instead (a memory engine never
//! blocks).

use std::sync::atomic::{AtomicBool, Ordering};

use crate::Error;

/// Whether storage work runs inline (memory engines only).
static INLINE: AtomicBool = AtomicBool::new(false);

/// Makes [`offload`] run its work inline in this process (or on the
/// blocking pool again).
pub(crate) fn set_inline(inline: bool) {
    INLINE.store(inline, Ordering::Relaxed);
}

/// Runs `f` on the blocking pool (or inline, see the module documentation)
/// and waits for it.
///
/// # Errors
/// [`Error::Internal`] when the task panicked or the runtime is shutting
/// down.
pub(crate) async fn offload<T: Send + 'static>(
    f: impl FnOnce() -> T + Send + 'static,
) -> Result<T, Error> {
    if INLINE.load(Ordering::Relaxed) {
        return Ok(f());
    }
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| Error::Internal(format!("storage task failed: {e}")))
}
