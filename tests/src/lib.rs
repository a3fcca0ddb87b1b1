//! Multi-node black-box tests that start real kvnode processes.
//!
//! This crate's one job is the harness those tests share: [`TestCluster`]
//! makes certificates with `kv_tls::init`, writes one node config per node
//! (the shape `scripts/cluster` writes: three zones, node4 sharing host-1
//! with node1 from five nodes on, the first three nodes as seeds, one worker
//! thread each), starts `kvnode` processes on free UDP ports of 127.0.0.1,
//! kills, stops and restarts them, and polls their `status` until the
//! cluster reaches a state (converged, a node dead, a node alive, a node
//! JOINING, UP, DRAINING or LEFT everywhere); it also adds a node that
//! joins the running cluster (`kvnode --join`), wipes a stopped node's
//! data directory, and has a node reload its certificates (SIGHUP,
//! [`TestCluster::reload`]). Tests talk to the nodes like users do: through `kvctl`
//! ([`TestCluster::kvctl`]), `kv-client` ([`TestCluster::client`]), and
//! the plaintext front doors: each node gets free TCP ports for its RESP
//! listener ([`TestCluster::resp_addr`]) and admin endpoint
//! ([`TestCluster::admin_get`]). The tests themselves live in
//! `tests/tests/*.rs`, one file per behaviour.
//!
//! Inputs: the `kvnode` and `kvctl` binaries, built beforehand with
//! `cargo build -p kv-node -p kvctl` (Cargo only tells a binary's own
//! package where it is; see [`bins`]). Outputs: assertions, and on failure
//! the tail of every node's log on standard error.
//!
//! Clusters run one at a time: every [`TestCluster`] holds a process-wide
//! lock for its whole life, because a 2-core machine cannot host two
//! clusters without timing out requests. Cargo runs test binaries one
//! after another, so the lock serializes the whole suite. Waiting is always
//! polling towards a condition under a generous deadline ([`poll_until`]),
//! never sleeping as synchronisation. The harness depends only on the
//! public faces of the product (its binaries, `kv-client`, `kv-wire`,
//! `kv-tls`), never on node internals.

pub mod bins;
mod cluster;
mod config;
mod front;
mod keys;
mod kvctl;
mod membership;
mod observe;
mod poll;
mod process;

pub use cluster::{ClusterBuilder, ReloadOutcome, TestCluster};
pub use front::HttpAnswer;
pub use kvctl::KvctlOutput;
pub use poll::{DEADLINE, POLL_INTERVAL, poll_until};

/// The gossip interval the harness configures (ms): short, so that joins
/// and failure detection take seconds, not tens of seconds.
pub const GOSSIP_INTERVAL_MS: u64 = 200;
