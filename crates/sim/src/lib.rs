//! Deterministic simulation of a whole cluster (issue 9): 3 to 7 nodes of
//! the replication core in one process, on the testkit's in-memory network
//! and membership and on journaled memory engines, under a seeded nemesis,
//! while the `kv-workload` clients run their histories; then the same
//! checker as the chaos runs, plus a convergence check after healing.
//!
//! **Why a paused, single-threaded tokio runtime and not turmoil or
//! madsim.** The core already reaches the network, the membership and the
//! clock only through seams, and the testkit implements them in memory
//! with per-link faults; the scenario tests run on them under tokio's
//! paused clock. One `current_thread` runtime with paused time, one per
//! seed, makes that deterministic: tasks run one at a time in a fixed
//! order, and time jumps to the next timer only when every task waits, so
//! a seed runs thousands of simulated seconds in milliseconds. turmoil
//! would replace the testkit's network with its own host/socket model
//! (the core speaks no sockets: its network seam is a trait of replica
//! calls), and madsim replaces tokio itself through a patched build of
//! the whole dependency tree. Neither adds anything the seams do not give
//! us, and both would be a second harness beside the testkit.
//!
//! **Determinism.** Every draw comes from the seed: the network's losses
//! and jitter, each node's [`kv_replication::Rng`] (request ids,
//! incarnations, the router's ties), the clients' steps and pauses
//! (`kv-workload`), the coordinator each request goes to, the nemesis and
//! the crash losses. Storage runs inline (no `spawn_blocking`), wall
//! clocks follow tokio's paused clock ([`kv_replication::Clock::following_tokio`]),
//! the core's `select!`s are biased, and nothing iterates a hash map where
//! order matters. The same seed gives the same history byte for byte
//! (`tests/determinism.rs` runs one seed twice).
//!
//! **What is simulated.** Crashes (with or without losing a seeded suffix
//! of unflushed writes), a wiped disk (new incarnation) on one victim node,
//! pauses, partitions (halves, a bridge node, one node isolated, one-way),
//! slow, reordering and lossy links, wall-clock offsets from seconds to
//! hours, failing flushes (EIO, ENOSPC), a damaged record on the victim,
//! and membership changes (a join, a drain, the removal of the crashed
//! victim) ([`faults`]). Liveness comes from a simulated failure detector
//! ([`nemesis`]).
//!
//! **What is not.** QUIC, TLS and chitchat's own protocol: the node's
//! implementations of the seams are not run; membership comes through the
//! core's membership seam ([`kv_replication::testkit::MemoryMembership`])
//! and announcements reach every node at once. The sled engine is not run
//! either: the journaled memory engine models its durability contract
//! (acknowledged only after a flush; unflushed writes may be lost).
//!
//! Inputs: a seed and [`SimSettings`]. Output: a [`SeedOutcome`] with the
//! history, the trace and the checker's [`kv_workload::Report`]. The
//! `kv-sim` binary runs many seeds and prints one summary line; it is what
//! `scripts/simulate` calls. This crate is a test harness: nothing but
//! tests and that script depends on it.

pub mod converge;
mod error;
pub mod faults;
pub mod nemesis;
mod run;
pub mod store;
pub mod trace;
pub mod world;

pub use error::{Error, Result};
pub use faults::{FaultKind, Faults};
pub use run::{SeedOutcome, SimSettings, run_seed};
