//! The replication core of the store: everything between a client's
//! request and the disks of a key's replicas, and the background work that
//! keeps replicas in agreement.
//!
//! Its one job: keep every acknowledged write on W replicas and make
//! replicas converge. It joins storage ([`kv_storage`]) and routing
//! ([`kv_router`]) and speaks only its own types: results such as
//! [`Read`] and [`Written`], and one [`Error`] whose variants are what a
//! caller decides with. Translation to wire types happens at the node's
//! front doors and its peer transport, never here.
//!
//! - [`Coordinator`]: quorum reads with causal merge and read repair,
//!   quorum writes with a sloppy quorum and hints.
//! - [`Replica`]: this node's reads, coordinated writes and merges.
//! - [`Peers`]: calls to replicas (this node's own is a function call).
//! - [`Handoff`], [`Transfer`], [`AntiEntropy`]: hinted handoff,
//!   partition streaming for joins and drains, Merkle anti-entropy with
//!   tombstone purge and clock compaction.
//! - [`Cluster`] and [`Placement`]: membership view, status, the current
//!   and target rings.
//! - [`Core`]: one node's core, assembled from its [`CoreParts`].
//!
//! Seams, so that tests and the simulation run whole clusters in one
//! process: [`Network`] (replica calls to other nodes; QUIC in a running
//! node, [`testkit::MemoryNetwork`] in tests), [`Membership`] (views and
//! announcements; chitchat gossip in a running node,
//! [`testkit::MemoryMembership`] in tests), [`Clock`] (tokio's instants
//! and a wall clock with a per-node offset) and [`Rng`] (seedable).
//!
//! This crate must not depend on the gossip, transport, TLS or wire crates,
//! quinn, chitchat, or any front door (`scripts/check-deps` enforces it).

mod antientropy;
mod assembly;
mod backoff;
mod clock;
mod cluster;
mod coordinator;
mod datadir;
mod error;
mod handoff;
mod membership;
mod network;
mod offload;
mod peers;
mod periodic;
mod placement;
mod plan;
mod rate;
mod replica;
mod report;
mod report_text;
mod rng;
mod scoring;
mod scrub;
mod service;
mod settings;
mod strays;
pub mod testkit;
mod transfer;

pub use antientropy::{AntiEntropy, Progress, RepairProgress};
pub use assembly::{Core, CoreParts};
pub use clock::Clock;
pub use cluster::Cluster;
pub use coordinator::{ClientWrite, Coordinator, Explanation, Read, WriteMode, Written};
pub use error::{Error, Refusal, Result};
pub use handoff::{Handoff, HandoffStats};
pub use membership::{Announcement, LoadReport, Membership, PeerState, View};
pub use network::{
    CallError, Coordinate, Envelope, HintCopy, Network, ReplaceIf, Reply, ScanPage, ScanRequest,
    TransferStatus,
};
pub use peers::Peers;
pub use placement::{Placement, Replicas};
pub use plan::{PLANNED_ID, Plan, PlannedMove};
pub use replica::{DotFloor, Replica, ReplicaParts};
pub use report::Reporter;
pub use report_text::{MAX_HINT_OWNERS, MAX_HOT_KEYS, ReportText};
pub use rng::Rng;
pub use scoring::{DecisionLog, DecisionRecord, Route, Scoring};
pub use scrub::{SLICES, Scrub, ScrubOutcome, ScrubSettings, ScrubStats};
pub use service::PeerService;
pub use settings::{AntiEntropySettings, HandoffSettings, Quorums, Settings, TransferSettings};
pub use strays::Strays;
pub use transfer::Transfer;
