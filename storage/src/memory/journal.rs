//! Simulated durability for the memory engine: what a crash loses.
//!
//! A journaled engine ([`MemoryEngine::journaled`]) keeps, beside its maps,
//! the undo record of every write applied since the last flush. A flush
//! makes them durable (the journal empties and every waiting [`crate::Durable`]
//! resolves); [`MemoryEngine::crash`] undoes a seeded suffix of the writes
//! still in the journal (objects, hints and metadata alike) and returns
//! the engine a restarted process would open, with every flushed write.
//! Writes that promise durability on return (`update`, `put_meta`,
//! `put_hint`, `remove_if`, `remove_hint_if`) flush before they return, as
//! the sled engine's group commit does; `update_deferred` is durable only
//! once a flush ran, which the simulation's flusher does after a seeded
//! delay. Storage faults are injected here too: flushes that fail
//! ([`FlushFault`]: EIO or ENOSPC; the failed writes stay applied and
//! unflushed, their waiters get [`crate::Error::Io`], as sled reports).

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll, Waker};

use kv_types::key_hash;

use super::{MemoryEngine, State};
use crate::digest::segment_of;
use crate::{Error, Result, keyspace};

/// Which map a journaled write changed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Tree {
    /// Objects (on-disk keys).
    Objects,
    /// Hints (on-disk hint keys).
    Hints,
    /// Metadata (names as bytes).
    Meta,
}

/// How to undo one write: the entry's previous raw value (`None`: absent).
#[derive(Clone, Debug)]
pub(super) struct Undo {
    tree: Tree,
    key: Vec<u8>,
    previous: Option<Vec<u8>>,
}

/// A storage fault of one flush.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FlushFault {
    /// The device reported an I/O error (EIO).
    Eio,
    /// The device is full (ENOSPC).
    NoSpace,
}

impl FlushFault {
    fn message(self) -> &'static str {
        match self {
            FlushFault::Eio => "flush failed: Input/output error (os error 5, simulated)",
            FlushFault::NoSpace => "flush failed: No space left on device (os error 28, simulated)",
        }
    }
}

/// What a simulated crash lost.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CrashLoss {
    /// Writes applied but not flushed at the crash.
    pub unflushed: usize,
    /// Of those, the suffix that was lost (the rest had reached the disk).
    pub lost: usize,
}

/// The flush state shared by a journaled engine and its [`crate::Durable`]s.
#[derive(Debug, Default)]
pub(crate) struct Commit {
    state: Mutex<CommitState>,
}

#[derive(Debug, Default)]
struct CommitState {
    /// Sequence number of the last write applied.
    applied: u64,
    /// Every write up to this one is durable.
    flushed: u64,
    /// Writes up to this one were in a flush that failed (their waiters
    /// get the error once).
    failed: Option<(u64, String)>,
    /// The engine crashed: every wait ends with an error.
    closed: bool,
    /// Tasks waiting for a flush.
    waiters: Vec<Waker>,
}

impl Commit {
    fn lock(&self) -> MutexGuard<'_, CommitState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The outcome for the write numbered `seq`, or pending.
    pub(crate) fn poll_durable(&self, seq: u64, cx: &mut Context<'_>) -> Poll<Result<()>> {
        let mut st = self.lock();
        if st.flushed >= seq {
            return Poll::Ready(Ok(()));
        }
        if st.closed {
            return Poll::Ready(Err(Error::Io(
                "the engine crashed before the write was durable".into(),
            )));
        }
        if let Some((upto, message)) = &st.failed
            && *upto >= seq
        {
            return Poll::Ready(Err(Error::Io(message.clone())));
        }
        if !st.waiters.iter().any(|w| w.will_wake(cx.waker())) {
            st.waiters.push(cx.waker().clone());
        }
        Poll::Pending
    }

    fn wake(&self) {
        let waiters = std::mem::take(&mut self.lock().waiters);
        for waker in waiters {
            waker.wake();
        }
    }
}

/// The journal of a journaled engine, kept in its state.
#[derive(Debug, Default)]
pub(super) struct Journal {
    /// Undo records of the writes applied since the last flush, oldest
    /// first.
    undo: Vec<Undo>,
    /// Faults of the next flushes, in order.
    faults: VecDeque<FlushFault>,
    /// Flush state shared with the [`crate::Durable`]s.
    pub(super) commit: Arc<Commit>,
}

impl State {
    /// Records that `key` of `tree` had `previous` before a write; returns
    /// the write's sequence number (0 when the engine is not journaled).
    pub(super) fn journal(&mut self, tree: Tree, key: &[u8], previous: Option<Vec<u8>>) -> u64 {
        let Some(journal) = &mut self.journal else {
            return 0;
        };
        journal.undo.push(Undo {
            tree,
            key: key.to_vec(),
            previous,
        });
        let mut st = journal.commit.lock();
        st.applied += 1;
        st.applied
    }
}

impl MemoryEngine {
    /// An empty engine with simulated durability: writes applied since the
    /// last flush are lost by [`MemoryEngine::crash`] (a seeded suffix of
    /// them), and flushes can be made to fail
    /// ([`MemoryEngine::fail_flushes`]).
    pub fn journaled() -> Self {
        let engine = MemoryEngine::default();
        engine.lock().journal = Some(Journal::default());
        engine
    }

    /// Whether this engine simulates durability.
    pub fn is_journaled(&self) -> bool {
        self.lock().journal.is_some()
    }

    /// Makes the next `faults.len()` flushes fail, in order.
    pub fn fail_flushes(&self, faults: &[FlushFault]) {
        if let Some(journal) = &mut self.lock().journal {
            journal.faults.extend(faults.iter().copied());
        }
    }

    /// Forgets the flush faults still queued (the process they were meant
    /// for is gone: a restarted node meets a recovered disk).
    pub fn clear_flush_faults(&self) {
        if let Some(journal) = &mut self.lock().journal {
            journal.faults.clear();
        }
    }

    /// Writes applied and not yet flushed.
    pub fn unflushed(&self) -> usize {
        self.lock().journal.as_ref().map_or(0, |j| j.undo.len())
    }

    /// The sequence number of the last write applied (0: not journaled).
    pub(super) fn applied_seq(&self) -> u64 {
        self.lock()
            .journal
            .as_ref()
            .map_or(0, |j| j.commit.lock().applied)
    }

    /// The flush shared state, for a [`crate::Durable`] (journaled engines only).
    pub(super) fn commit(&self) -> Option<Arc<Commit>> {
        self.lock().journal.as_ref().map(|j| j.commit.clone())
    }

    /// Flushes a journaled engine: every applied write becomes durable, or
    /// the next queued fault fails the flush (the writes stay applied and
    /// unflushed; their waiters get the error).
    pub(super) fn flush_journal(&self) -> Result<()> {
        let mut state = self.lock();
        let Some(journal) = &mut state.journal else {
            return Ok(());
        };
        let commit = journal.commit.clone();
        let outcome = match journal.faults.pop_front() {
            Some(fault) => {
                let mut st = commit.lock();
                st.failed = Some((st.applied, fault.message().to_string()));
                Err(Error::Io(fault.message().to_string()))
            }
            None => {
                journal.undo.clear();
                let mut st = commit.lock();
                st.flushed = st.applied;
                Ok(())
            }
        };
        drop(state);
        commit.wake();
        outcome
    }

    /// A simulated crash: this engine is closed (every later call fails as
    /// a dead process's would, every pending [`crate::Durable`] ends with an
    /// error), a suffix of the unflushed writes of length drawn from
    /// `draw` (uniform over 0..=unflushed) is undone, and the engine a
    /// restarted process opens on the same disk is returned, journaled.
    pub fn crash(&self, draw: u64) -> (MemoryEngine, CrashLoss) {
        let mut state = self.lock();
        let mut objects = state.objects.clone();
        let mut hints = state.hints.clone();
        let mut meta = state.meta.clone();
        let mut loss = CrashLoss::default();
        if let Some(journal) = &mut state.journal {
            let n = journal.undo.len();
            let lost = usize::try_from(draw % (n as u64 + 1)).unwrap_or(0);
            loss = CrashLoss { unflushed: n, lost };
            for undo in journal.undo.iter().rev().take(lost) {
                match undo.tree {
                    Tree::Objects => restore(&mut objects, &undo.key, &undo.previous),
                    Tree::Hints => restore(&mut hints, &undo.key, &undo.previous),
                    Tree::Meta => {
                        let name = String::from_utf8_lossy(&undo.key).into_owned();
                        match &undo.previous {
                            Some(v) => meta.insert(name, v.clone()),
                            None => meta.remove(&name),
                        };
                    }
                }
            }
            let commit = journal.commit.clone();
            commit.lock().closed = true;
            commit.wake();
        }
        state.closed = true;
        drop(state);
        let reopened = MemoryEngine::journaled();
        {
            let mut fresh = reopened.lock();
            let segments: BTreeSet<u32> = objects
                .keys()
                .filter_map(|k| keyspace::user_key(k))
                .map(|k| segment_of(key_hash(k)))
                .collect();
            fresh.objects = objects;
            fresh.hints = hints;
            fresh.meta = meta;
            for segment in segments {
                reopened.resync(&fresh.objects, segment);
            }
        }
        (reopened, loss)
    }
}

fn restore(map: &mut BTreeMap<Vec<u8>, Vec<u8>>, key: &[u8], previous: &Option<Vec<u8>>) {
    match previous {
        Some(v) => map.insert(key.to_vec(), v.clone()),
        None => map.remove(key),
    };
}

#[cfg(test)]
mod tests {
    use std::future::Future;
    use std::pin::pin;

    use kv_types::{Actor, NodeId, Object, Sibling, VersionVector};

    use super::*;
    use crate::{Durable, Storage};

    fn object(value: &[u8]) -> Object {
        let actor = Actor {
            node: NodeId::new("n1").unwrap_or_else(|e| panic!("{e}")),
            incarnation: 1,
        };
        let sibling = Sibling {
            data: Some(value.to_vec()),
            written_at_ms: 1,
        };
        Object::default().update(&VersionVector::new(), &actor, sibling)
    }

    fn deferred(engine: &MemoryEngine, key: &[u8], value: &[u8]) -> Durable {
        let o = object(value);
        match engine.update_deferred(key, &mut |_| Ok(o.clone())) {
            Ok((_, durable)) => durable,
            Err(e) => panic!("{e}"),
        }
    }

    fn poll(durable: &mut Durable) -> Poll<Result<()>> {
        let mut cx = Context::from_waker(Waker::noop());
        pin!(durable).poll(&mut cx)
    }

    #[test]
    fn a_crash_loses_a_suffix_of_the_unflushed_writes_only() -> Result<()> {
        let engine = MemoryEngine::journaled();
        let mut first = deferred(&engine, b"a", b"1");
        assert!(poll(&mut first).is_pending());
        engine.flush()?;
        assert!(matches!(poll(&mut first), Poll::Ready(Ok(()))));
        let mut second = deferred(&engine, b"b", b"2");
        let _third = deferred(&engine, b"c", b"3");
        engine.put_meta("m", b"x")?; // flushes everything before it
        assert!(matches!(poll(&mut second), Poll::Ready(Ok(()))));
        let _fourth = deferred(&engine, b"d", b"4");
        let _fifth = deferred(&engine, b"a", b"5");
        assert_eq!(engine.unflushed(), 2);
        // Draw 1 of 0..=2: the last write is lost, the one before kept.
        let (reopened, loss) = engine.crash(1);
        assert_eq!(
            loss,
            CrashLoss {
                unflushed: 2,
                lost: 1
            }
        );
        assert_eq!(reopened.get(b"a")?, Some(object(b"1")));
        assert_eq!(reopened.get(b"d")?, Some(object(b"4")));
        assert_eq!(reopened.get_meta("m")?, Some(b"x".to_vec()));
        assert!(matches!(engine.get(b"a"), Err(Error::Unavailable(_))));
        // The digests match the records the reopened engine holds.
        let fresh = MemoryEngine::new();
        fresh.update(b"a", &mut |_| Ok(object(b"1")))?;
        fresh.update(b"b", &mut |_| Ok(object(b"2")))?;
        fresh.update(b"c", &mut |_| Ok(object(b"3")))?;
        fresh.update(b"d", &mut |_| Ok(object(b"4")))?;
        let all = crate::SEGMENTS;
        assert_eq!(
            reopened.segment_digests(0, all),
            fresh.segment_digests(0, all)
        );
        Ok(())
    }

    #[test]
    fn a_failed_flush_fails_its_waiters_and_keeps_the_writes_unflushed() -> Result<()> {
        let engine = MemoryEngine::journaled();
        engine.fail_flushes(&[FlushFault::NoSpace]);
        let mut write = deferred(&engine, b"a", b"1");
        assert!(matches!(engine.flush(), Err(Error::Io(m)) if m.contains("No space")));
        assert!(matches!(poll(&mut write), Poll::Ready(Err(Error::Io(_)))));
        assert_eq!(engine.unflushed(), 1);
        let (reopened, loss) = engine.crash(1);
        assert_eq!(loss.lost, 1);
        assert_eq!(reopened.get(b"a")?, None);
        // A synchronous write reports the failed flush as an I/O error.
        reopened.fail_flushes(&[FlushFault::Eio]);
        assert!(matches!(reopened.put_meta("m", b"x"), Err(Error::Io(_))));
        Ok(())
    }
}
