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
//! The **router** orders a key's candidate replicas before the coordinator
//! fans out (docs/design.md, "The scoring model"). The stateful [`Scorer`]
//! folds in what the coordinator observes (latencies per operation,
//! failures, requests in flight, what replica answers piggyback) and takes
//! a snapshot of it with what the membership reports ([`Inputs`]); the pure
//! [`decide`] orders the candidates by the configured [`Mode`]: ours
//! ([`modes::scoring`]: a hard filter, four dimensions, weights, penalties,
//! slow start, near-ties) or a published scheme we measure against
//! (Cassandra's dynamic snitch, ScyllaDB's HWLB, C3, P2C, plain order).
//! Every number behind a decision is kept ([`Decision`]), so it can be
//! explained, logged and replayed from its inputs and its random draw.
//! [`hedge`] holds the hedge budget and the latency quantiles hedges wait
//! for; [`policy`] every tunable with its default and source.
//!
//! Inputs are values ([`kv_types::Member`], observations, `now:
//! std::time::Instant` passed in by the caller); outputs are values. This
//! crate must not depend on tokio, quinn, chitchat, sled or any other crate
//! that does I/O, and never reads a clock: time is an argument, so every
//! decision can be replayed in a test.

pub mod affinity;
pub mod breaker;
pub mod claim;
mod decide;
pub mod draw;
mod error;
pub mod ewma;
pub mod hedge;
pub mod inputs;
mod mode;
pub mod modes;
pub mod persist;
pub mod policy;
pub mod preference;
mod record;
pub mod rendezvous;
pub mod report;
pub mod ring;
pub mod scorer;
pub mod settings;
pub mod tokens;
pub mod window;

pub use breaker::{Breaker, BreakerState};
pub use decide::{Applied, Decision, Dimensions, Exclusion, Hedge, Penalty, Scored, decide};
pub use error::{Error, Result};
pub use ewma::Ewma;
pub use hedge::{HedgeBudget, LatencyQuantiles};
pub use inputs::{BreakerInput, CandidateInputs, Inputs, ModeInputs, ReportInputs};
pub use mode::Mode;
pub use policy::{Penalties, RouterSettings, Weights};
pub use record::DecisionRecord;
pub use report::{BalanceRow, balance_report};
pub use ring::{MAX_OWNERS, MAX_WEIGHT, Move, Ring};
pub use scorer::{
    ABANDONED_DOUBLINGS, Ask, Candidate, Feedback, OUTLIER_MIN_SLOW, Op, Outcome, Scorer, Ticket,
};
pub use settings::RingSettings;
pub use tokens::TokenRing;
pub use window::FailureWindow;
