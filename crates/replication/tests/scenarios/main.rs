//! The replication core on the in-memory network: whole clusters in one
//! process, under tokio's paused clock, with exact assertions on what each
//! replica stores and what each call answered.
#![allow(clippy::unwrap_used)]

mod antientropy;
mod datadir;
mod handoff;
mod quorum;
mod read_repair;
mod routing;
mod scrub;
mod skew;
mod sloppy;
mod strays;
mod support;
mod teardown;
mod transfer;
