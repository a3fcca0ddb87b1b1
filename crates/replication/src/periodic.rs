//! The loop every background service of the core runs: a step at a fixed
//! period (the first at once), or earlier when woken, until shutdown. A
//! step that overruns delays the next tick rather than bunching ticks up.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// Spawns (on `tasks`) a loop that runs `step` every `interval` and
/// whenever `wake` is notified, until `stop` is cancelled. A step in
/// progress is not interrupted: steps check `stop` themselves.
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
            step().await;
        }
    });
}
