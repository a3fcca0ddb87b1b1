//! Group commit: many writers share one flush.
//!
//! A writer applies its change, takes a [`Ticket`] (the next write sequence
//! number), and waits until a flush that *began after* its ticket was issued
//! has completed. One flusher thread loops: take the highest sequence
//! applied so far, flush (write and fsync), publish that sequence as
//! durable, wake everyone. Writers that arrive while a flush runs are all
//! covered by the next one, so under load one fsync acknowledges many
//! writes.
//!
//! Failures: a failed flush fails every ticket it covered and, since sled
//! latches I/O errors, every later ticket of the same *epoch* (one epoch per
//! open sled database). Reopening the database starts a new epoch; tickets
//! of the old epoch that were not durable by then are failed, so a flush of
//! the new database never acknowledges a write made to the old one.

use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use crate::{Error, Result};

/// Default commit window: how long a flush waits for more writes to join it
/// when writes are concurrent (see [`GroupCommit::with_window`]).
pub(crate) const DEFAULT_COMMIT_WINDOW: Duration = Duration::from_micros(1000);

/// Proof that a write was applied: its sequence number and epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Ticket {
    seq: u64,
    epoch: u64,
}

/// One flush the flusher must perform: everything up to `target`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Batch {
    target: u64,
    epoch: u64,
}

/// Counters of the group commit, for [`crate::StorageStats`].
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Counters {
    pub(crate) writes: u64,
    pub(crate) flushes: u64,
    pub(crate) writes_flushed: u64,
    /// Sequence numbers applied but not yet made durable (writes and
    /// barriers): the flush backlog.
    pub(crate) unflushed: u64,
}

#[derive(Debug, Default)]
struct State {
    /// Highest sequence number handed out (writes applied, plus barriers).
    applied: u64,
    /// Sequence numbers handed out as barriers rather than for writes.
    barriers: u64,
    /// Writes started (see [`GroupCommit::begin`]) that have no ticket yet.
    in_flight: u64,
    /// Highest sequence number a writer is waiting for.
    wanted: u64,
    /// Every sequence up to this one was made durable by a flush.
    durable: u64,
    /// Highest sequence covered by a failed flush.
    failed_upto: u64,
    /// Current epoch (incremented on every reopen).
    epoch: u64,
    /// Set on the first failed flush of the current epoch: the durable
    /// sequence then. Later tickets of this epoch are not acknowledged.
    failed_after: Option<u64>,
    /// Tickets of the previous epoch up to this sequence were durable.
    prev_epoch_durable: u64,
    /// Message of the last failure, for the errors handed to writers.
    last_error: String,
    /// Set by [`GroupCommit::stop`]: the flusher does a last flush and exits.
    stop: bool,
    /// Set when the flusher thread has exited (or panicked): nothing will
    /// become durable any more, so pending tickets fail instead of hanging.
    flusher_gone: bool,
    flushes: u64,
    writes_flushed: u64,
    /// Writes covered by the last successful flush.
    last_batch: u64,
    /// The flusher holds a batch open for more writes (writers need not
    /// wake it).
    delaying: bool,
    /// The flusher is blocked waiting for work and needs a notification
    /// to act. Writers notify only then: a futex wake per write, with the
    /// flusher busy or asleep on a timer, was about a tenth of a node's CPU
    /// under RESP SET (perf, docs/benchmarks.md).
    flusher_waiting: bool,
    /// Threads blocked in [`GroupCommit::wait_durable`] (the `done`
    /// condvar is notified only when there are some; async writers are
    /// woken through `waiters`).
    blocked_writers: usize,
    /// Times a writer woke the flusher (for tests).
    flusher_wakeups: u64,
    /// Async writers waiting for a verdict ([`GroupCommit::poll_durable`]);
    /// all are woken whenever verdicts may have changed.
    waiters: Vec<Waker>,
}

impl State {
    fn resolved(&self) -> u64 {
        self.durable.max(self.failed_upto)
    }

    /// The fate of `t`, or `None` while it is still pending.
    fn verdict(&self, t: Ticket) -> Option<Result<()>> {
        let lost = || {
            Err(Error::Io(format!(
                "write not made durable: {}",
                self.last_error
            )))
        };
        if self.epoch != t.epoch {
            let ok = self.epoch == t.epoch + 1 && t.seq <= self.prev_epoch_durable;
            return Some(if ok { Ok(()) } else { lost() });
        }
        let after_failure = self.failed_after.is_some_and(|f| t.seq > f);
        if after_failure && self.failed_upto >= t.seq {
            return Some(lost());
        }
        if self.durable >= t.seq {
            return Some(if after_failure { lost() } else { Ok(()) });
        }
        if self.flusher_gone {
            return Some(Err(Error::Io("storage is closed".into())));
        }
        None
    }
}

/// The shared state of writers and the flusher thread.
#[derive(Debug)]
pub(crate) struct GroupCommit {
    state: Mutex<State>,
    /// Wakes the flusher: a writer wants a flush, or stop was requested.
    work: Condvar,
    /// Wakes writers: a flush completed or failed, or the epoch changed.
    done: Condvar,
    /// Whether writers wait for durability (`SledSettings::sync_writes`).
    sync_writes: bool,
    /// Period of background flushes when writers do not wait.
    period: Duration,
    /// How long a flush waits for concurrent writes to join it.
    window: Duration,
}

impl GroupCommit {
    /// A fresh group commit; `period` is the background flush period used
    /// when `sync_writes` is false.
    pub(crate) fn new(sync_writes: bool, period: Duration) -> Self {
        GroupCommit {
            state: Mutex::new(State::default()),
            work: Condvar::new(),
            done: Condvar::new(),
            sync_writes,
            period,
            window: DEFAULT_COMMIT_WINDOW,
        }
    }

    /// Sets the commit window: when writes are concurrent (the last flush
    /// covered more than one, or one is being applied), a flush that is
    /// due waits this long for more writes to join it; a lone writer is
    /// flushed at once. The idea of PostgreSQL's `commit_delay` and
    /// Cassandra's group commitlog window. Measured here
    /// (`docs/benchmarks.md`): with 50 RESP clients, a 1 ms window took
    /// durable SET W=2 from 5.1-5.3k to 6.2-6.7k ops/s and 2 ms to 7.0-7.2k,
    /// with lower p50 and p99 too (the CPU a flush costs went to requests),
    /// at up to one window more latency for a few concurrent writers.
    pub(crate) fn with_window(mut self, window: Duration) -> Self {
        self.window = window;
        self
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // The state is only changed by short, panic-free sections.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Announces a write about to be applied. The returned guard must be
    /// turned into a ticket with [`InFlight::applied`] once the write is
    /// visible; dropping it instead means the write did not happen.
    pub(crate) fn begin(&self) -> InFlight<'_> {
        self.lock().in_flight += 1;
        InFlight { commit: self }
    }

    /// A ticket covering everything a reader has seen so far, for a
    /// read-modify-write that ends up writing nothing: what it read may
    /// have been written by a write that has no ticket yet, so while writes
    /// are in flight this takes a fresh sequence number (a barrier) that the
    /// next flush covers.
    pub(crate) fn observed(&self) -> Ticket {
        let mut st = self.lock();
        if st.in_flight > 0 {
            st.applied += 1;
            st.barriers += 1;
        }
        Ticket {
            seq: st.applied,
            epoch: st.epoch,
        }
    }

    /// Waits for `t` to be durable if writes are synchronous; otherwise
    /// returns at once (the background flush will cover it).
    pub(crate) fn acknowledge(&self, t: Ticket) -> Result<()> {
        if self.sync_writes {
            self.wait_durable(t)
        } else {
            Ok(())
        }
    }

    /// Asks for a flush covering `t` and waits for its outcome.
    ///
    /// # Errors
    /// [`Error::Io`] if the flush covering `t` failed or its database was
    /// replaced before `t` became durable.
    pub(crate) fn wait_durable(&self, t: Ticket) -> Result<()> {
        let mut st = self.lock();
        if st.verdict(t).is_none() {
            self.want(&mut st, t);
        }
        loop {
            if let Some(verdict) = st.verdict(t) {
                return verdict;
            }
            st.blocked_writers += 1;
            st = self.done.wait(st).unwrap_or_else(PoisonError::into_inner);
            st.blocked_writers -= 1;
        }
    }

    /// Asks for a flush covering `t`, waking the flusher only when it
    /// waits for work (a flushing one looks again when it is done; one
    /// holding a batch open takes `t` in when its window ends).
    fn want(&self, st: &mut State, t: Ticket) {
        if st.wanted < t.seq {
            st.wanted = t.seq;
            if st.flusher_waiting && !st.delaying {
                st.flusher_wakeups += 1;
                self.work.notify_one();
            }
        }
    }

    /// The async form of [`GroupCommit::acknowledge`]: `Ready` with the
    /// verdict of `t`, or `Pending` after registering the task's waker
    /// (woken by the next flush outcome, epoch change or flusher exit). No
    /// thread is parked, so an async writer costs no blocking-pool thread.
    pub(crate) fn poll_durable(&self, t: Ticket, cx: &mut Context<'_>) -> Poll<Result<()>> {
        if !self.sync_writes {
            return Poll::Ready(Ok(()));
        }
        let mut st = self.lock();
        if let Some(verdict) = st.verdict(t) {
            return Poll::Ready(verdict);
        }
        self.want(&mut st, t);
        if !st.waiters.iter().any(|w| w.will_wake(cx.waker())) {
            st.waiters.push(cx.waker().clone());
        }
        Poll::Pending
    }

    /// Wakes every async waiter; called with the lock released.
    fn wake(waiters: Vec<Waker>) {
        for waker in waiters {
            waker.wake();
        }
    }

    /// Flusher side: blocks until there is something to flush and returns
    /// it; `None` once stop was requested and everything is resolved.
    pub(crate) fn next_batch(&self) -> Option<Batch> {
        let mut st = self.lock();
        let mut deadline = Instant::now() + self.period;
        let mut delay_until = None;
        loop {
            let now = Instant::now();
            let pending = st.applied > st.resolved();
            if !self.sync_writes && now >= deadline && !pending {
                // A period passed with nothing to flush: start the next one
                // (waiting until a deadline already past would spin).
                deadline = now + self.period;
            }
            let due = !self.sync_writes && now >= deadline;
            if (st.wanted > st.resolved()) || (pending && (st.stop || due)) {
                // Writers in the middle of applying will want a flush in a
                // moment: give them a short while to join this one.
                // Writes are concurrent (one is being applied, or the last
                // flush covered several): hold the batch open for the
                // window, so one flush covers more of them.
                let until = *delay_until.get_or_insert(now + self.window);
                let concurrent = st.in_flight > 0 || st.last_batch > 1;
                if self.sync_writes && concurrent && !st.stop && now < until {
                    st.delaying = true;
                    st = self.wait_work(st, until - now);
                    continue;
                }
                st.delaying = false;
                return Some(Batch {
                    target: st.applied,
                    epoch: st.epoch,
                });
            }
            if st.stop {
                return None;
            }
            st.flusher_waiting = true;
            st = if self.sync_writes {
                self.work.wait(st).unwrap_or_else(PoisonError::into_inner)
            } else {
                self.wait_work(st, deadline.saturating_duration_since(now))
            };
            st.flusher_waiting = false;
        }
    }

    fn wait_work<'a>(&self, st: MutexGuard<'a, State>, at_most: Duration) -> MutexGuard<'a, State> {
        self.work
            .wait_timeout(st, at_most)
            .unwrap_or_else(PoisonError::into_inner)
            .0
    }

    /// Wakes the blocked and the async writers: verdicts may have changed.
    /// Takes the lock's guard and releases it before waking.
    fn wake_writers(&self, mut st: MutexGuard<'_, State>) {
        let waiters = std::mem::take(&mut st.waiters);
        let blocked = st.blocked_writers > 0;
        drop(st);
        if blocked {
            self.done.notify_all();
        }
        Self::wake(waiters);
    }

    /// Flusher side: publishes the outcome of `batch` and wakes writers.
    pub(crate) fn finish(&self, batch: Batch, outcome: std::result::Result<(), String>) {
        let mut st = self.lock();
        if st.epoch == batch.epoch {
            match outcome {
                Ok(()) if batch.target > st.durable => {
                    st.last_batch = batch.target - st.durable;
                    st.flushes += 1;
                    st.writes_flushed += batch.target - st.durable;
                    st.durable = batch.target;
                }
                Ok(()) => {}
                Err(message) => {
                    if st.failed_after.is_none() {
                        st.failed_after = Some(st.durable);
                    }
                    st.failed_upto = st.failed_upto.max(batch.target);
                    st.last_error = message;
                }
            }
        }
        self.wake_writers(st);
    }

    /// Starts a new epoch after the database was reopened: tickets of the
    /// old epoch that were not durable yet are failed.
    pub(crate) fn new_epoch(&self, reason: &str) {
        let mut st = self.lock();
        st.prev_epoch_durable = match st.failed_after {
            Some(f) => f.min(st.durable),
            None => st.durable,
        };
        st.epoch += 1;
        st.failed_after = None;
        st.last_error = format!("database reopened after: {reason}");
        self.wake_writers(st);
    }

    /// Asks the flusher to do a last flush and exit.
    pub(crate) fn stop(&self) {
        self.lock().stop = true;
        self.work.notify_all();
    }

    /// Records that the flusher thread exited; fails every pending ticket.
    pub(crate) fn flusher_exited(&self) {
        let mut st = self.lock();
        st.flusher_gone = true;
        self.wake_writers(st);
    }

    /// Current counters.
    pub(crate) fn counters(&self) -> Counters {
        let st = self.lock();
        Counters {
            writes: st.applied - st.barriers,
            flushes: st.flushes,
            writes_flushed: st.writes_flushed,
            unflushed: st.applied.saturating_sub(st.durable.max(st.failed_upto)),
        }
    }
}

/// A write between [`GroupCommit::begin`] and its ticket. Call it while
/// still holding the database read guard, so that a reopen cannot slip
/// between the write and its ticket.
#[derive(Debug)]
pub(crate) struct InFlight<'a> {
    commit: &'a GroupCommit,
}

impl InFlight<'_> {
    /// The write is applied (visible to readers): its ticket.
    pub(crate) fn applied(self) -> Ticket {
        let ticket = {
            let mut st = self.commit.lock();
            st.applied += 1;
            st.in_flight = st.in_flight.saturating_sub(1);
            // No notification: the writer asks for its flush when it waits
            // for durability (`want`), and a flusher holding a batch open
            // for in-flight writes takes this one in when its window ends.
            Ticket {
                seq: st.applied,
                epoch: st.epoch,
            }
        };
        // The count was decremented above, in the same critical section as
        // the ticket was issued; skip the decrement of `drop`.
        std::mem::forget(self);
        ticket
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        let mut st = self.commit.lock();
        st.in_flight = st.in_flight.saturating_sub(1);
    }
}

#[cfg(test)]
mod tests;
