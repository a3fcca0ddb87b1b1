//! Storage trait with sled and in-memory engines: checksummed records, tombstones, group commit.
