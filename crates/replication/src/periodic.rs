//! The loop every background service of the core runs: a step at a fixed
//! period (the first at once), or earlier when woken, until shutdown. A
//! step that overruns delays the next tick rather than bunching ticks up.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// Spawns (on `tasks`) a loop that runs `step` every `interval` and
/// whenever `wake` is notified, until `stop` is cancelled. Steps check
/// `stop` between their items, and a step still running when `stop` is
/// cancelled is dropped at its next await, as a crash would end it (every
/// step is restartable: hints stay until delivered, a transfer or a
/// repair resumes from storage). Without that a node's shutdown waited
/// for a step's network call to time out: up to 26 s measured after a
/// join, when every peer had stopped answering at once (docs/benchmarks.md,
/// "Slow stops after a join").
pub(crate) fn spawn_every<F, Fut>(
    tasks: &TaskTracker,
    stop: CancellationToken,
    interval: Duration,
    wake: Option<Arc<Notify>>,
    mut step: F,
) where
    F: FnMut() -> Fut + Send + 'static,
    Fut: Future<Output = ()> + Send,
{
    let wake = wake.unwrap_or_default();
    tasks.spawn(async move {
        let mut tick = tokio::time::interval(interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            // Biased: the same order every time (the simulation replays a
            // seed exactly; tokio's default draw is random).
            tokio::select! {
                biased;
                _ = stop.cancelled() => break,
                _ = wake.notified() => {}
                _ = tick.tick() => {}
            }
            tokio::select! {
                biased;
                _ = stop.cancelled() => break,
                _ = step() => {}
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};

    /// A step stuck in a call that never returns does not hold up the
    /// loop's end once `stop` is cancelled.
    #[tokio::test]
    async fn a_stuck_step_ends_with_the_stop() {
        let (tasks, stop) = (TaskTracker::new(), CancellationToken::new());
        let started = Arc::new(AtomicU32::new(0));
        let seen = started.clone();
        spawn_every(
            &tasks,
            stop.clone(),
            Duration::from_millis(10),
            None,
            move || {
                let seen = seen.clone();
                async move {
                    seen.fetch_add(1, Ordering::SeqCst);
                    std::future::pending::<()>().await;
                }
            },
        );
        tokio::time::timeout(Duration::from_secs(5), async {
            while started.load(Ordering::SeqCst) == 0 {
                tokio::task::yield_now().await;
            }
        })
        .await
        .expect("the first step starts at once");
        stop.cancel();
        tasks.close();
        tokio::time::timeout(Duration::from_secs(5), tasks.wait())
            .await
            .expect("the loop ends although its step never returns");
        assert_eq!(started.load(Ordering::SeqCst), 1, "one step ran, and hung");
    }
}
