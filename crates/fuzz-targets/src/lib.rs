//! Fuzz targets: every decoder that takes bytes from outside (a peer, a
//! client, a disk), as a function of arbitrary bytes that panics on a
//! finding.
//!
//! Each target decodes its input, validates it as the receiver would, and,
//! where there is an encoder, checks the round trip: what decoded encodes,
//! and decodes back to the same value (compared by its canonical
//! encoding, so a NaN compares equal to itself). A decoder that accepts
//! what its own encoder cannot reproduce is a finding.
//!
//! `fuzz/` (a cargo-fuzz package outside the workspace) calls these under
//! libFuzzer (`scripts/fuzz`); `tests/corpus.rs` replays the committed
//! corpus `fuzz/corpus/<target>/` through the same functions, so CI checks
//! every committed input, and every crash found, without a fuzzer.
//!
//! Where a checksum or a length guards a format, a target's first input
//! byte may ask it to compute that guard itself, so that the fuzzer
//! reaches the decoder behind it instead of stopping at the checksum.
//!
//! This crate is a test harness: nothing in the store depends on it.

mod load;
mod resp;
mod ring;
mod round_trip;
mod storage;
mod wire;

pub use load::load_report;
pub use resp::resp;
pub use ring::ring;
pub use storage::{context, hint, record};
pub use wire::{client, frame, peer, ring_report};

/// A fuzz target: a function of arbitrary bytes that panics on a finding.
pub type Target = fn(&[u8]);

/// Every target by name (the names of `fuzz/fuzz_targets/*.rs` and of the
/// corpus directories).
pub const TARGETS: &[(&str, Target)] = &[
    ("frame", frame),
    ("client", client),
    ("peer", peer),
    ("ring_report", ring_report),
    ("resp", resp),
    ("record", record),
    ("hint", hint),
    ("context", context),
    ("ring", ring),
    ("load_report", load_report),
];
