//! Unit tests of the group commit's bookkeeping (no disk involved).

use std::sync::Arc;

use super::*;

#[test]
fn one_flush_acknowledges_every_write_applied_before_it() {
    let gc = Arc::new(GroupCommit::new(true, Duration::from_millis(5)));
    let tickets: Vec<Ticket> = (0..5).map(|_| gc.begin().applied()).collect();
    let flusher = {
        let gc = gc.clone();
        std::thread::spawn(move || {
            let batch = gc.next_batch().unwrap();
            gc.finish(batch, Ok(()));
        })
    };
    gc.wait_durable(tickets[4]).unwrap();
    flusher.join().unwrap();
    for t in tickets {
        gc.wait_durable(t).unwrap();
    }
    let c = gc.counters();
    assert_eq!((c.writes, c.flushes, c.writes_flushed), (5, 1, 5));
}

#[test]
fn failures_fail_the_epoch_until_a_reopen() {
    let gc = GroupCommit::new(true, Duration::from_millis(5));
    let ok = gc.begin().applied();
    gc.finish(
        Batch {
            target: 1,
            epoch: 0,
        },
        Ok(()),
    );
    let lost = gc.begin().applied();
    gc.finish(
        Batch {
            target: 2,
            epoch: 0,
        },
        Err("disk on fire".into()),
    );
    assert!(gc.wait_durable(ok).is_ok());
    let err = gc.wait_durable(lost).unwrap_err();
    assert!(err.to_string().contains("disk on fire"), "{err}");
    // A write after the failure, in the same epoch, is not acknowledged
    // even if a later flush of the same database reports success.
    let late = gc.begin().applied();
    gc.finish(
        Batch {
            target: 3,
            epoch: 0,
        },
        Ok(()),
    );
    assert!(gc.wait_durable(late).is_err());
    // After a reopen, a write still pending from the old database fails;
    // new writes are acknowledged by flushes of the new one.
    let pending = gc.begin().applied();
    gc.new_epoch("test");
    let fresh = gc.begin().applied();
    gc.finish(
        Batch {
            target: 5,
            epoch: 1,
        },
        Ok(()),
    );
    assert!(gc.wait_durable(pending).is_err());
    assert!(gc.wait_durable(ok).is_ok());
    assert!(gc.wait_durable(fresh).is_ok());
}

#[test]
fn readers_of_unticketed_writes_get_a_barrier() {
    let gc = GroupCommit::new(true, Duration::from_millis(5));
    assert_eq!(gc.observed().seq, 0, "nothing in flight: no barrier");
    let w = gc.begin();
    let seen = gc.observed();
    assert_eq!(seen.seq, 1, "a write in flight: a barrier");
    let t = w.applied();
    assert_eq!(t.seq, 2);
    drop(gc.begin());
    assert_eq!(
        gc.observed().seq,
        2,
        "an abandoned write is no longer in flight"
    );
    assert_eq!(gc.counters().writes, 1);
}

#[test]
fn asynchronous_mode_flushes_on_its_period_and_on_stop() {
    let gc = GroupCommit::new(false, Duration::from_millis(20));
    let t = gc.begin().applied();
    gc.acknowledge(t).unwrap();
    let start = Instant::now();
    let batch = gc.next_batch().unwrap();
    assert!(start.elapsed() >= Duration::from_millis(15));
    gc.finish(batch, Ok(()));
    gc.begin().applied();
    gc.stop();
    let last = gc.next_batch().unwrap();
    gc.finish(last, Ok(()));
    assert!(gc.next_batch().is_none());
    gc.flusher_exited();
    let orphan = gc.begin().applied();
    assert!(
        gc.wait_durable(orphan).is_err(),
        "no flusher: fail, never hang"
    );
}

/// A waker that counts its wake-ups.
struct CountingWaker(std::sync::atomic::AtomicUsize);

impl std::task::Wake for CountingWaker {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }
}

fn counting_waker() -> (Arc<CountingWaker>, Waker) {
    let counter = Arc::new(CountingWaker(std::sync::atomic::AtomicUsize::new(0)));
    (counter.clone(), Waker::from(counter))
}

#[test]
fn async_waiters_are_woken_by_the_flush_that_covers_them() {
    let gc = GroupCommit::new(true, Duration::from_millis(5));
    let (count, waker) = counting_waker();
    let mut cx = Context::from_waker(&waker);
    let t = gc.begin().applied();
    assert!(gc.poll_durable(t, &mut cx).is_pending());
    // Polling again before a wake-up registers the waker only once.
    assert!(gc.poll_durable(t, &mut cx).is_pending());
    assert_eq!(gc.lock().waiters.len(), 1);
    assert_eq!(gc.lock().wanted, t.seq, "the flusher was asked for a flush");
    let batch = gc.next_batch().unwrap();
    gc.finish(batch, Ok(()));
    assert_eq!(count.0.load(std::sync::atomic::Ordering::SeqCst), 1);
    assert!(matches!(gc.poll_durable(t, &mut cx), Poll::Ready(Ok(()))));
    assert!(gc.lock().waiters.is_empty());

    // A failed flush wakes its waiters with the error.
    let lost = gc.begin().applied();
    assert!(gc.poll_durable(lost, &mut cx).is_pending());
    let batch = gc.next_batch().unwrap();
    gc.finish(batch, Err("disk on fire".into()));
    assert_eq!(count.0.load(std::sync::atomic::Ordering::SeqCst), 2);
    match gc.poll_durable(lost, &mut cx) {
        Poll::Ready(Err(e)) => assert!(e.to_string().contains("disk on fire"), "{e}"),
        other => panic!("expected the flush's failure, got {other:?}"),
    }

    // A reopen and the flusher's exit wake waiters too, with a failure.
    gc.new_epoch("test");
    let pending = gc.begin().applied();
    assert!(gc.poll_durable(pending, &mut cx).is_pending());
    gc.flusher_exited();
    assert_eq!(count.0.load(std::sync::atomic::Ordering::SeqCst), 3);
    assert!(matches!(
        gc.poll_durable(pending, &mut cx),
        Poll::Ready(Err(_))
    ));
}

#[test]
fn async_waiters_do_not_wait_when_writes_are_not_synchronous() {
    let gc = GroupCommit::new(false, Duration::from_millis(5));
    let (_, waker) = counting_waker();
    let t = gc.begin().applied();
    let mut cx = Context::from_waker(&waker);
    assert!(matches!(gc.poll_durable(t, &mut cx), Poll::Ready(Ok(()))));
}

#[test]
fn a_lone_writer_is_flushed_without_waiting_the_window() {
    // A window far longer than a flush without it takes, even on a loaded
    // machine.
    let window = Duration::from_secs(10);
    let gc = GroupCommit::new(true, Duration::from_millis(5)).with_window(window);
    for _ in 0..3 {
        let t = gc.begin().applied();
        gc.lock().wanted = t.seq;
        let started = Instant::now();
        let batch = gc.next_batch().unwrap();
        assert!(
            started.elapsed() < window,
            "a lone writer waited the window"
        );
        assert_eq!(batch.target, t.seq);
        gc.finish(batch, Ok(()));
        assert_eq!(gc.lock().last_batch, 1);
    }
}

#[test]
fn concurrent_writes_hold_the_flush_open_for_the_window() {
    let window = Duration::from_millis(300);
    let gc = Arc::new(GroupCommit::new(true, Duration::from_millis(5)).with_window(window));
    // Two writes covered by one flush: writes are concurrent now.
    gc.begin().applied();
    let t = gc.begin().applied();
    gc.lock().wanted = t.seq;
    let batch = gc.next_batch().unwrap();
    gc.finish(batch, Ok(()));
    assert_eq!(gc.lock().last_batch, 2);

    // So the next flush holds its batch open for the window, and a write
    // applied while it does (seen through `delaying`) joins it.
    let t = gc.begin().applied();
    gc.lock().wanted = t.seq;
    let late = {
        let gc = gc.clone();
        std::thread::spawn(move || {
            while !gc.lock().delaying {
                std::thread::yield_now();
            }
            gc.begin().applied()
        })
    };
    let started = Instant::now();
    let batch = gc.next_batch().unwrap();
    assert!(started.elapsed() >= window, "the flush did not wait");
    let late = late.join().unwrap();
    assert!(
        batch.target >= late.seq,
        "the write applied in the window joined the flush"
    );
    gc.finish(batch, Ok(()));
    assert_eq!(gc.lock().last_batch, 2);
}

#[test]
fn writers_wake_the_flusher_only_when_it_waits_for_work() {
    let gc = Arc::new(GroupCommit::new(true, Duration::from_millis(5)));
    let (_, waker) = counting_waker();
    let mut cx = Context::from_waker(&waker);
    // No flusher waits (it is busy flushing, say): writers ask for their
    // flush without a wake-up; the flusher finds it when it looks again.
    let mut last = None;
    for _ in 0..100 {
        let t = gc.begin().applied();
        assert!(gc.poll_durable(t, &mut cx).is_pending());
        last = Some(t);
    }
    assert_eq!(gc.lock().flusher_wakeups, 0);
    let batch = gc.next_batch().unwrap();
    assert_eq!(Some(batch.target), last.map(|t| t.seq));
    gc.finish(batch, Ok(()));

    // A flusher blocked for work is woken by the next writer, once.
    let flusher = {
        let gc = gc.clone();
        std::thread::spawn(move || {
            let batch = gc.next_batch().unwrap();
            gc.finish(batch, Ok(()));
            batch.target
        })
    };
    while !gc.lock().flusher_waiting {
        std::thread::yield_now();
    }
    let t = gc.begin().applied();
    gc.wait_durable(t).unwrap();
    assert_eq!(flusher.join().unwrap(), t.seq);
    assert_eq!(gc.lock().flusher_wakeups, 1);
}
