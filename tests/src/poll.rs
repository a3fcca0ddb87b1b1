//! Waiting for a condition: poll it, with a deadline, and say what was
//! last seen when it never held.

use std::time::Duration;

use tokio::time::Instant;

/// The default deadline of a wait. Generous on purpose: a debug build of
/// five nodes on two cores is slow, and a wait that ends early is a flake.
pub const DEADLINE: Duration = Duration::from_secs(60);

/// Time between two checks of a polled condition.
pub const POLL_INTERVAL: Duration = Duration::from_millis(200);

/// Checks `check` every [`POLL_INTERVAL`] until it returns `Ok`, and
/// returns that value. `Err(reason)` means "not yet"; the last reason is
/// part of the error when `timeout` passes, so a failed wait says what it
/// saw.
///
/// # Errors
/// When `check` never succeeded within `timeout`.
pub async fn poll_until<T>(
    what: &str,
    timeout: Duration,
    mut check: impl AsyncFnMut() -> Result<T, String>,
) -> anyhow::Result<T> {
    poll(what, timeout, async || check().await.map_err(Step::NotYet)).await
}

/// Why a polled condition does not hold.
pub(crate) enum Step {
    /// Not yet: check again.
    NotYet(String),
    /// Never will (e.g. the node exited): stop waiting.
    Never(String),
}

/// [`poll_until`] whose check can also end the wait early.
pub(crate) async fn poll<T>(
    what: &str,
    timeout: Duration,
    mut check: impl AsyncFnMut() -> Result<T, Step>,
) -> anyhow::Result<T> {
    let deadline = Instant::now() + timeout;
    loop {
        let reason = match check().await {
            Ok(value) => return Ok(value),
            Err(Step::Never(reason)) => anyhow::bail!("gave up waiting for {what}: {reason}"),
            Err(Step::NotYet(reason)) => reason,
        };
        if Instant::now() >= deadline {
            anyhow::bail!("timed out after {timeout:?} waiting for {what}; last seen: {reason}");
        }
        tokio::time::sleep(POLL_INTERVAL).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn polling_returns_the_first_success() {
        let mut calls = 0;
        let got = poll_until("three calls", DEADLINE, async || {
            calls += 1;
            if calls == 3 {
                Ok(calls)
            } else {
                Err(format!("{calls} calls"))
            }
        })
        .await;
        assert_eq!(got.ok(), Some(3));
    }

    #[tokio::test]
    async fn a_condition_that_never_holds_reports_what_it_saw() {
        let e = poll_until("nothing", Duration::from_millis(300), async || {
            Err::<(), _>("still nothing".to_string())
        })
        .await
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
        assert!(e.contains("waiting for nothing"), "{e}");
        assert!(e.contains("still nothing"), "{e}");
    }
}
