//! Rates of background work: a pacer that callers wait for (partition
//! pulls) and a token bucket that skips what is over its rate (read
//! back-fills). Both run on tokio's clock, so paused-time tests and the
//! simulation see the same schedule.

use std::sync::Mutex;
use std::time::Duration;

use tokio::time::Instant;

/// A budget of items per second that callers wait for (the objects of a
/// node's pulls: `[transfer] objects_per_sec`): each batch reserves the
/// next `objects / rate` of time after the reservations before it and
/// waits for its slot to start, so the pulls together stay within the
/// rate however many streams run (a batch already done may be
/// one batch ahead of it).
pub(crate) struct Pacer {
    /// Objects per second (at least 1).
    per_sec: u32,
    /// When the last reservation ends.
    next: Mutex<Instant>,
}

impl Pacer {
    pub(crate) fn new(per_sec: u32) -> Self {
        Pacer {
            per_sec: per_sec.max(1),
            next: Mutex::new(Instant::now()),
        }
    }

    /// Waits until `objects` more fit in the budget.
    pub(crate) async fn spend(&self, objects: u64) {
        if objects == 0 {
            return;
        }
        let cost = Duration::from_secs_f64(objects as f64 / f64::from(self.per_sec));
        let start = {
            let mut next = self.next.lock().unwrap_or_else(|p| p.into_inner());
            let start = (*next).max(Instant::now());
            *next = start + cost;
            start
        };
        tokio::time::sleep_until(start).await;
    }
}

/// A token bucket that skips what does not fit instead of waiting (the
/// read back-fills of one coordinator: `[transfer] back_fills_per_sec`):
/// `per_sec` tokens a second, at most one second's worth banked.
pub(crate) struct TokenBucket {
    /// Tokens added per second (0: nothing ever fits).
    per_sec: u32,
    /// Tokens now and when they were counted.
    state: Mutex<(f64, Option<Instant>)>,
}

impl TokenBucket {
    pub(crate) fn new(per_sec: u32) -> Self {
        TokenBucket {
            per_sec,
            state: Mutex::new((f64::from(per_sec), None)),
        }
    }

    /// Takes one token at `now` if there is one.
    pub(crate) fn try_take(&self, now: Instant) -> bool {
        if self.per_sec == 0 {
            return false;
        }
        let rate = f64::from(self.per_sec);
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let (tokens, at) = &mut *state;
        if let Some(then) = *at {
            let refill = now.saturating_duration_since(then).as_secs_f64() * rate;
            *tokens = (*tokens + refill).min(rate);
        }
        *at = Some(now);
        if *tokens >= 1.0 {
            *tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[tokio::test(start_paused = true)]
    async fn the_budget_holds_concurrent_pulls_to_its_rate() {
        let budget = Arc::new(Pacer::new(1000));
        let begin = tokio::time::Instant::now();
        // Four streams of ten 500-object pages: 20,000 objects at 1,000/s.
        let streams = (0..4).map(|_| {
            let budget = budget.clone();
            async move {
                for _ in 0..10 {
                    budget.spend(500).await;
                }
            }
        });
        futures::future::join_all(streams).await;
        let took = begin.elapsed();
        // The last page's slot starts at 19.5 s.
        assert!(took >= Duration::from_millis(19_500), "{took:?}");
        assert!(took < Duration::from_millis(20_000), "{took:?}");
    }

    #[test]
    fn a_token_bucket_passes_its_rate_and_skips_the_rest() {
        let bucket = TokenBucket::new(100);
        let t0 = Instant::now();
        // A second's worth banked at the start, then 100 a second.
        let first = (0..250).filter(|_| bucket.try_take(t0)).count();
        assert_eq!(first, 100);
        let later = t0 + Duration::from_millis(500);
        let more = (0..250).filter(|_| bucket.try_take(later)).count();
        assert_eq!(more, 50);
        // Idle for a minute banks one second, not sixty.
        let idle = later + Duration::from_secs(60);
        assert_eq!((0..250).filter(|_| bucket.try_take(idle)).count(), 100);
        assert!(!TokenBucket::new(0).try_take(idle));
    }

    #[tokio::test(start_paused = true)]
    async fn an_idle_budget_does_not_bank_time() {
        let budget = Pacer::new(1000);
        tokio::time::sleep(Duration::from_secs(60)).await;
        let begin = tokio::time::Instant::now();
        budget.spend(500).await;
        budget.spend(500).await;
        budget.spend(500).await;
        // Idle for a minute: the first page starts at once, the next ones
        // wait their 0.5 s each, not spending a banked minute.
        assert_eq!(begin.elapsed(), Duration::from_millis(1000));
    }
}
