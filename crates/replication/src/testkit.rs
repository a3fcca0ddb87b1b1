//! Whole clusters in one process, for tests and the simulation: an
//! in-memory network whose links can be cut, delayed and made lossy per
//! ordered pair of nodes and whose nodes can be paused and crashed
//! ([`MemoryNetwork`]), an in-memory membership whose liveness the test
//! decides ([`MemoryMembership`]), and a harness that builds cores on
//! memory engines over them ([`TestCluster`]).
//!
//! Not simulated: QUIC, TLS and chitchat's own protocol (a running node's
//! implementations of the seams). Storage work runs inline
//! ([`run_storage_inline`]), so tests can pause tokio's clock.

mod cluster;
mod membership;
mod network;

pub use cluster::{ClusterSpec, TestCluster, TestNode, id, test_settings, zone_of};
pub use membership::MemoryMembership;
pub use network::{Link, MemoryNetwork};

/// Makes the core run its storage work inline instead of on tokio's
/// blocking pool, in this whole process: for memory engines only (they
/// never block), so that tokio's paused clock advances only when every
/// task waits. [`TestCluster`] calls it.
pub fn run_storage_inline() {
    crate::offload::set_inline(true);
}
