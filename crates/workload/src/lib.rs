//! A Jepsen-style workload against the store and the checker that proves,
//! from the recorded history, that no acknowledged write was lost.
//!
//! Inputs: a [`Store`] (the real [`kv_client::Client`], or a test double), a
//! [`WorkloadSettings`] (duration, clients, keys, seed) and a history path.
//! [`run`] lets concurrent clients read, write unique values to registers
//! (with the context they read, sometimes blind), delete registers, and add
//! unique elements to grow-only sets, recording every request as one JSON
//! line ([`history`]). After the run it waits for the cluster to converge,
//! reads every key back with R=N ([`settle`]), and hands the history to
//! [`check`], whose rules are written down in [`checker`]. Outputs: the
//! history file and a [`Report`] with the one summary line scripts parse
//! and an exit code (0, 4 when some key could not be checked, 6 for
//! anomalies). [`read_history`] plus [`check`] re-judge a saved history.
//!
//! The crate talks to the cluster only through `kv-client`'s public API; it
//! knows no ring, storage or wire format, and the checker does no I/O.
//!
//! ```no_run
//! # async fn demo() -> kv_workload::Result<()> {
//! use std::sync::Arc;
//! use std::time::Duration;
//! use kv_client::{Client, ClientSettings};
//! use kv_workload::{WorkloadSettings, run};
//!
//! let client = Client::connect(ClientSettings::new(
//!     vec!["127.0.0.1:7101".into()],
//!     ".cluster/certs",
//! ))
//! .await
//! .map_err(kv_workload::Error::Start)?;
//! let config = WorkloadSettings::new(Duration::from_secs(20), 8, 50, 1);
//! let report = run(Arc::new(client), &config, "history.jsonl".as_ref()).await?;
//! println!("{}", report.summary_line());
//! std::process::exit(report.exit_code().into());
//! # }
//! ```

pub mod checker;
mod client;
mod error;
mod evidence;
pub mod faults;
pub mod generator;
pub mod history;
mod report;
mod runner;
pub mod settle;
mod stats;
mod store;
mod writer;

pub use checker::check;
pub use error::{Error, Result};
pub use faults::{FaultMoments, FaultSplit};
pub use generator::{Basis, Generator, Mix, Step, Target};
pub use history::{Entry, OpKind, Outcome, parse_lines, read_history};
pub use report::{Anomaly, AnomalyKind, Convergence, Counts, EXIT_ANOMALY, EXIT_UNCHECKED, Report};
pub use runner::{SET_CAPACITY, WorkloadSettings, run};
pub use stats::{Stats, percentile};
pub use store::Store;
pub use writer::HistoryWriter;
