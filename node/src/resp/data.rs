//! The data commands, GET SET DEL EXISTS MGET MSET, through the node's
//! coordinator: the same quorum paths as QUIC clients, with R and W from
//! `[resp] r` and `[resp] w`.
//!
//! - `SET` is a write in [`WriteMode::Overwrite`]: it supersedes what the
//!   coordinating replica holds (RESP carries no causal context; versions
//!   written concurrently elsewhere still become siblings).
//! - `DEL` reads the key and, when it exists, writes a tombstone with the
//!   read's context (also in overwrite mode); it counts keys that existed.
//! - `GET` with siblings follows the configured [`SiblingRule`].
//! - Multi-key commands run their keys concurrently, at most
//!   [`MULTI_KEY_CONCURRENCY`] at a time (and take that many admission
//!   slots); Redis's atomicity of `MSET` is not offered (a failure names the
//!   keys not written). An `MGET` answer is bounded by [`MAX_MGET_BYTES`].

use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use futures::StreamExt;
use futures::stream;
use kv_replication::{ClientWrite, Error, Read, WriteMode};

use super::Core;
use super::reply;
use super::siblings::{self, SiblingRule};
use crate::metrics::Outcome;

/// Keys of one multi-key command in flight at once.
pub(super) const MULTI_KEY_CONCURRENCY: usize = 64;

/// Largest `MGET` answer, in value bytes: beyond, the command fails instead
/// of buffering an unbounded reply.
pub(super) const MAX_MGET_BYTES: usize = 64 << 20;

/// What one key's read found.
enum Found {
    /// One value to answer (siblings already resolved).
    Value(Vec<u8>),
    /// Absent or deleted.
    Missing,
}

/// An error to answer, with its outcome label.
struct Failed {
    outcome: Outcome,
    message: String,
}

impl Failed {
    /// The answer to a core error at node `node`.
    fn new(node: &kv_types::NodeId, e: &Error) -> Failed {
        let wire = crate::translate::error_to_wire(node, e);
        let outcome = Outcome::of_error(wire.kind);
        Failed {
            outcome,
            message: format!("{} on {}: {}", outcome.as_str(), wire.node, wire.message),
        }
    }
}

impl Core {
    /// `GET`.
    pub(super) async fn get(self: &Arc<Self>, id: u64, key: Bytes, out: &mut BytesMut) -> Outcome {
        match self.read(id, key).await {
            Ok(Found::Value(v)) => {
                reply::bulk(out, &v);
                Outcome::Ok
            }
            Ok(Found::Missing) => {
                reply::null(out);
                Outcome::NotFound
            }
            Err(f) => answer_error(out, f),
        }
    }

    /// `SET`.
    pub(super) async fn set(
        self: &Arc<Self>,
        id: u64,
        key: Bytes,
        value: Bytes,
        out: &mut BytesMut,
    ) -> Outcome {
        match self.write(id, key, Some(value), Vec::new()).await {
            Ok(()) => {
                reply::ok(out);
                Outcome::Ok
            }
            Err(f) => answer_error(out, f),
        }
    }

    /// `MGET`: the keys concurrently, in order; one failed read fails the
    /// command (a nil would claim the key is absent), and so does an answer
    /// over [`MAX_MGET_BYTES`].
    pub(super) async fn mget(
        self: &Arc<Self>,
        id: u64,
        keys: Vec<Bytes>,
        out: &mut BytesMut,
    ) -> Outcome {
        let count = keys.len();
        let mut reads = stream::iter(keys)
            .map(|k| self.read(id, k))
            .buffered(MULTI_KEY_CONCURRENCY);
        let (mut values, mut bytes) = (Vec::with_capacity(count), 0usize);
        while let Some(read) = reads.next().await {
            match read {
                Ok(found) => {
                    if let Found::Value(v) = &found {
                        bytes += v.len();
                    }
                    if bytes > MAX_MGET_BYTES {
                        reply::err(
                            out,
                            &format!(
                                "MGET answer over {} MiB; ask for fewer keys at once",
                                MAX_MGET_BYTES >> 20
                            ),
                        );
                        return Outcome::Invalid;
                    }
                    values.push(found);
                }
                Err(f) => return answer_error(out, f),
            }
        }
        reply::array(out, values.len());
        for found in values {
            match found {
                Found::Value(v) => reply::bulk(out, &v),
                Found::Missing => reply::null(out),
            }
        }
        Outcome::Ok
    }

    /// `EXISTS`: how many of the keys exist (repeats count each time).
    pub(super) async fn exists(
        self: &Arc<Self>,
        id: u64,
        keys: Vec<Bytes>,
        out: &mut BytesMut,
    ) -> Outcome {
        let reads: Vec<_> = stream::iter(keys)
            .map(|k| self.read_raw(id, k))
            .buffered(MULTI_KEY_CONCURRENCY)
            .collect()
            .await;
        let mut count = 0;
        for read in reads {
            match read {
                Ok(r) if !r.is_deleted() => count += 1,
                Ok(_) => {}
                Err(f) => return answer_error(out, f),
            }
        }
        reply::integer(out, count);
        Outcome::Ok
    }

    /// `MSET`: the last value of a repeated key wins, as in Redis.
    pub(super) async fn mset(
        self: &Arc<Self>,
        id: u64,
        pairs: Vec<(Bytes, Bytes)>,
        out: &mut BytesMut,
    ) -> Outcome {
        let mut unique: Vec<(Bytes, Bytes)> = Vec::with_capacity(pairs.len());
        for (k, v) in pairs.into_iter().rev() {
            if !unique.iter().any(|(seen, _)| *seen == k) {
                unique.push((k, v));
            }
        }
        let writes = unique
            .into_iter()
            .map(|(k, v)| async move { (k.clone(), self.write(id, k, Some(v), Vec::new()).await) });
        let failed: Vec<(Bytes, Failed)> = stream::iter(writes)
            .buffer_unordered(MULTI_KEY_CONCURRENCY)
            .collect::<Vec<_>>()
            .await
            .into_iter()
            .filter_map(|(k, r)| r.err().map(|f| (k, f)))
            .collect();
        if failed.is_empty() {
            reply::ok(out);
            return Outcome::Ok;
        }
        many_failed(out, "written (some may be stored)", failed)
    }

    /// `DEL`: read each distinct key, tombstone those that exist.
    pub(super) async fn del(
        self: &Arc<Self>,
        id: u64,
        mut keys: Vec<Bytes>,
        out: &mut BytesMut,
    ) -> Outcome {
        keys.sort();
        keys.dedup();
        let deletes = keys.into_iter().map(|k| async move {
            let result = match self.read_raw(id, k.clone()).await {
                Ok(r) if r.is_deleted() => Ok(false),
                Ok(r) => self
                    .write(id, k.clone(), None, r.context)
                    .await
                    .map(|()| true),
                Err(f) => Err(f),
            };
            (k, result)
        });
        let mut count = 0;
        let mut failed = Vec::new();
        let results: Vec<_> = stream::iter(deletes)
            .buffer_unordered(MULTI_KEY_CONCURRENCY)
            .collect()
            .await;
        for (k, result) in results {
            match result {
                Ok(true) => count += 1,
                Ok(false) => {}
                Err(f) => failed.push((k, f)),
            }
        }
        if failed.is_empty() {
            reply::integer(out, count);
            return Outcome::Ok;
        }
        many_failed(out, "deleted (some may be)", failed)
    }

    /// A quorum read, siblings resolved by the configured rule.
    async fn read(self: &Arc<Self>, id: u64, key: Bytes) -> Result<Found, Failed> {
        let read = self.read_raw(id, key.clone()).await?;
        let mut values = read.values();
        match values.len() {
            0 => Ok(Found::Missing),
            1 => Ok(Found::Value(values.swap_remove(0))),
            count => match self.settings.siblings {
                SiblingRule::Error => Err(Failed {
                    outcome: Outcome::Siblings,
                    message: siblings::conflict_message(&key, count),
                }),
                SiblingRule::Newest => Ok(siblings::newest(&read.object)
                    .map_or(Found::Missing, |v| Found::Value(v.to_vec()))),
            },
        }
    }

    /// A quorum read as the coordinator answers it.
    async fn read_raw(self: &Arc<Self>, id: u64, key: Bytes) -> Result<Read, Failed> {
        self.coordinator
            .get(id, &key, self.settings.r)
            .await
            .map_err(|e| Failed::new(&self.node, &e))
    }

    /// A write (a value, or `None` for a tombstone) in overwrite mode.
    async fn write(
        self: &Arc<Self>,
        id: u64,
        key: Bytes,
        data: Option<Bytes>,
        context: Vec<u8>,
    ) -> Result<(), Failed> {
        let write = ClientWrite {
            key: key.to_vec(),
            value: data.map(|d| d.to_vec()),
            context,
            mode: WriteMode::Overwrite,
            w: self.settings.w,
        };
        self.coordinator
            .write(id, write)
            .await
            .map(|_| ())
            .map_err(|e| Failed::new(&self.node, &e))
    }
}

/// Answers `-ERR <message>` and returns the failure's outcome.
fn answer_error(out: &mut BytesMut, f: Failed) -> Outcome {
    reply::err(out, &f.message);
    f.outcome
}

/// The error of a multi-key command some of whose keys failed.
fn many_failed(out: &mut BytesMut, what: &str, failed: Vec<(Bytes, Failed)>) -> Outcome {
    let outcome = failed.first().map_or(Outcome::Error, |(_, f)| f.outcome);
    let detail: Vec<String> = failed
        .iter()
        .take(3)
        .map(|(k, f)| {
            format!(
                "'{}': {}",
                String::from_utf8_lossy(&k[..k.len().min(64)]),
                f.message
            )
        })
        .collect();
    reply::err(
        out,
        &format!(
            "{} key(s) not {what}: {}{}",
            failed.len(),
            detail.join("; "),
            if failed.len() > 3 { "; ..." } else { "" }
        ),
    );
    outcome
}
