//! The simulation's one error type: what can stop a seed from being run
//! at all (a failing seed is not an error: it is a verdict).

/// Result alias of this crate.
pub type Result<T> = std::result::Result<T, Error>;

/// Why a seed could not be run.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Unusable settings (no nodes, an unknown fault name).
    #[error("invalid simulation settings: {0}")]
    Invalid(String),
    /// The workload could not run or write its history.
    #[error("workload: {0}")]
    Workload(#[from] kv_workload::Error),
    /// The scratch directory or the runtime could not be created.
    #[error("simulation I/O: {0}")]
    Io(#[from] std::io::Error),
}
