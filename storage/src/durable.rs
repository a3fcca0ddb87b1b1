//! [`Durable`]: a future that resolves once a write applied with
//! [`crate::Storage::update_deferred`] is durable, so an async caller waits
//! for the group commit without parking a thread.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use crate::Result;
use crate::group_commit::{GroupCommit, Ticket};
use crate::memory::Commit;

/// Resolves to `Ok(())` once the write it was returned with is durable (the
/// flush covering it completed), or to [`crate::Error::Io`] when that flush
/// failed or the database was reopened first (the write's outcome is then
/// unknown, as with [`crate::Storage::update`]). Runtime-agnostic: the
/// group-commit flusher wakes the task's waker. Dropping it abandons the
/// wait, not the write.
#[derive(Debug)]
#[must_use = "a write is acknowledged only once its Durable resolves"]
pub struct Durable {
    pending: Option<Pending>,
}

/// Whose flush a [`Durable`] waits for.
#[derive(Debug)]
enum Pending {
    /// The sled engine's group commit.
    Group(Arc<GroupCommit>, Ticket),
    /// A journaled memory engine's flush, by write sequence number.
    Memory(Arc<Commit>, u64),
}

impl Durable {
    /// Already durable (an engine without deferred durability, or a write
    /// that needs no flush).
    pub fn ready() -> Self {
        Durable { pending: None }
    }

    pub(crate) fn pending(commit: Arc<GroupCommit>, ticket: Ticket) -> Self {
        Durable {
            pending: Some(Pending::Group(commit, ticket)),
        }
    }

    pub(crate) fn memory(commit: Arc<Commit>, seq: u64) -> Self {
        Durable {
            pending: Some(Pending::Memory(commit, seq)),
        }
    }
}

impl Future for Durable {
    type Output = Result<()>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<()>> {
        match &self.pending {
            None => Poll::Ready(Ok(())),
            Some(Pending::Group(commit, ticket)) => commit.poll_durable(*ticket, cx),
            Some(Pending::Memory(commit, seq)) => commit.poll_durable(*seq, cx),
        }
    }
}
