//! The four requests the workload makes, as a trait: the real client
//! implements it, and tests drive the runner against in-memory stores
//! (a correct one, and ones that lose or invent writes) to show that the
//! checker catches what it must.

use std::future::Future;

use kv_client::{Client, GetReply, StatusReport};

/// What the workload needs from a cluster. The methods mean what the
/// [`Client`] methods of the same names mean, errors included.
pub trait Store: Send + Sync + 'static {
    /// Quorum read; `r` overrides the read quorum.
    fn get(
        &self,
        key: &[u8],
        r: Option<u8>,
    ) -> impl Future<Output = kv_client::Result<GetReply>> + Send;

    /// Write superseding what `context` saw (empty: a blind write).
    fn put(
        &self,
        key: &[u8],
        value: &[u8],
        context: &[u8],
        w: Option<u8>,
    ) -> impl Future<Output = kv_client::Result<Vec<u8>>> + Send;

    /// Tombstone superseding what `context` saw.
    fn delete(
        &self,
        key: &[u8],
        context: &[u8],
        w: Option<u8>,
    ) -> impl Future<Output = kv_client::Result<Vec<u8>>> + Send;

    /// Membership as one node sees it.
    fn status(&self) -> impl Future<Output = kv_client::Result<StatusReport>> + Send;
}

impl Store for Client {
    fn get(
        &self,
        key: &[u8],
        r: Option<u8>,
    ) -> impl Future<Output = kv_client::Result<GetReply>> + Send {
        Client::get(self, key, r)
    }

    fn put(
        &self,
        key: &[u8],
        value: &[u8],
        context: &[u8],
        w: Option<u8>,
    ) -> impl Future<Output = kv_client::Result<Vec<u8>>> + Send {
        Client::put(self, key, value, context, w)
    }

    fn delete(
        &self,
        key: &[u8],
        context: &[u8],
        w: Option<u8>,
    ) -> impl Future<Output = kv_client::Result<Vec<u8>>> + Send {
        Client::delete(self, key, context, w)
    }

    fn status(&self) -> impl Future<Output = kv_client::Result<StatusReport>> + Send {
        Client::status(self)
    }
}
