//! Where every key lives and which replica to ask first: the ring and the
//! replica scorer of the store. Pure logic, no I/O.
//!
//! The **ring** ([`Ring`]) cuts the 64-bit xxh3 key-hash space into Q equal
//! partitions (Dynamo's "strategy 3", design.md, Ring), lets the eligible members
//! claim them in proportion to their weight with a deterministic,
//! exactly-balanced, low-movement algorithm ([`claim`]), and precomputes
//! every partition's preference list of N distinct nodes spread over zones
//! and hosts ([`preference`]). Every node computes the same ring, with the
//! same [`Ring::version`], from the same member set; [`Ring::to_bytes`]
//! persists it in a versioned format ([`persist`]). The seed's token ring
//! ([`tokens`]) is kept as the baseline that [`report`] measures it against.
//!
//! The **scorer** ([`Scorer`]) turns what the coordinator observed about its
//! peers (latencies per operation, errors, timeouts, liveness from the
//! failure detector) into an explainable ordering of a key's candidate
//! replicas (design.md, "The scoring model"): a hard filter (dead, circuit breaker
//! open, failure rate), then a score.
//!
//! Inputs are values ([`kv_types::Member`], observations, `now:
//! std::time::Instant` passed in by the caller); outputs are values. This
//! crate must not depend on tokio, quinn, chitchat, sled or any other crate
//! that does I/O, and never reads a clock: time is an argument, so every
//! decision can be replayed in a test.

pub mod breaker;
pub mod claim;
mod error;
pub mod ewma;
pub mod persist;
pub mod preference;
pub mod rendezvous;
pub mod report;
pub mod ring;
pub mod scorer;
pub mod settings;
pub mod tokens;
pub mod window;

pub use breaker::{Breaker, BreakerState};
pub use error::{Error, Result};
pub use ewma::Ewma;
pub use report::{BalanceRow, balance_report};
pub use ring::{MAX_OWNERS, MAX_WEIGHT, Move, Ring};
pub use scorer::{
    Candidate, ExcludeReason, LatencyInputs, Op, Outcome, Ranked, Scorer, ScorerSettings,
};
pub use settings::RingSettings;
pub use tokens::TokenRing;
pub use window::FailureWindow;
