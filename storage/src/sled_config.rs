//! Settings of the sled engine.

/// Default of [`SledSettings::min_free_bytes`]: 256 MiB, room for sled's
/// segment cleaning and a few seconds of writes at full speed.
pub const DEFAULT_MIN_FREE_BYTES: u64 = 256 << 20;

/// Settings of a [`crate::SledEngine`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SledSettings {
    /// Size of sled's own page cache, in bytes (default 16 MiB). Kept small
    /// on purpose: sled's default of 1 GiB per node would hide the misses of
    /// the node's own LRU cache.
    pub cache_capacity_bytes: u64,
    /// Whether a write returns only once it is durable (default true). When
    /// false, writes return as soon as they are applied in memory and a
    /// background flush runs every [`SledSettings::flush_every_ms`]: a crash
    /// or power loss then loses up to that much of *acknowledged* writes,
    /// which breaks the store's promise that W acks mean W durable copies.
    /// Only for benchmarks and throwaway clusters.
    pub sync_writes: bool,
    /// Period of the background flush when `sync_writes` is false, in
    /// milliseconds (default 500; at least 1).
    pub flush_every_ms: u64,
    /// Commit window in microseconds (default 1000; 0 flushes at once):
    /// while writes are concurrent, a flush waits this long for more of
    /// them to join it, so one flush acknowledges more writes. A lone
    /// writer is never delayed. See `docs/benchmarks.md` for its effect.
    pub commit_window_us: u64,
    /// Minimum time between two attempts to reopen the database after sled
    /// reported an I/O error, in milliseconds (default 1000).
    pub reopen_interval_ms: u64,
    /// Free-space reserve in bytes (default 256 MiB; 0 disables it): while
    /// the filesystem holding the database has less free space than this,
    /// writes that grow the store (`update`, `merge`, `put_hint`) fail with
    /// [`crate::Error::DiskFull`]; reads, removals and metadata writes go
    /// on. Free space is measured with `statvfs(2)` at most every 250 ms.
    /// Opening fails if the reserve is not smaller than the filesystem.
    pub min_free_bytes: u64,
}

impl Default for SledSettings {
    fn default() -> Self {
        SledSettings {
            cache_capacity_bytes: 16 << 20,
            sync_writes: true,
            flush_every_ms: 500,
            commit_window_us: u64::try_from(crate::group_commit::DEFAULT_COMMIT_WINDOW.as_micros())
                .unwrap_or(u64::MAX),
            reopen_interval_ms: 1000,
            min_free_bytes: DEFAULT_MIN_FREE_BYTES,
        }
    }
}
