//! [`Durable`]: a future that resolves once a write applied with
//! [`crate::Storage::update_deferred`] is durable, so an async caller waits
//! for the group commit without parking a thread.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use crate::Result;
use crate::group_commit::{GroupCommit, Ticket};

/// Resolves to `Ok(())` once the write it was returned with is durable (the
/// flush covering it completed), or to [`crate::Error::Io`] when that flush
/// failed or the database was reopened first (the write's outcome is then
/// unknown, as with [`crate::Storage::update`]). Runtime-agnostic: the
/// group-commit flusher wakes the task's waker. Dropping it abandons the
/// wait, not the write.
#[derive(Debug)]
#[must_use = "a write is acknowledged only once its Durable resolves"]
pub struct Durable {
    pending: Option<(Arc<GroupCommit>, Ticket)>,
}

impl Durable {
    /// Already durable (an engine without deferred durability, or a write
    /// that needs no flush).
    pub fn ready() -> Self {
        Durable { pending: None }
    }

    pub(crate) fn pending(commit: Arc<GroupCommit>, ticket: Ticket) -> Self {
        Durable {
            pending: Some((commit, ticket)),
        }
    }
}

impl Future for Durable {
    type Output = Result<()>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<()>> {
        match &self.pending {
            None => Poll::Ready(Ok(())),
            Some((commit, ticket)) => commit.poll_durable(*ticket, cx),
        }
    }
}
