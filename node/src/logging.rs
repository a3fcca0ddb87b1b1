//! Log output: `tracing`, human-readable or JSON lines.

use std::io::IsTerminal;

use tracing_subscriber::EnvFilter;

use crate::config::LogConfig;

/// Installs the global subscriber. `RUST_LOG`, when set, overrides the
/// configured level. Colours only on a terminal: log files and
/// `docker logs` get plain text.
pub fn init(config: &LogConfig) {
    let filter =
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(&config.level));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal());
    let result = if config.format == "json" {
        builder.json().try_init()
    } else {
        builder.try_init()
    };
    if let Err(e) = result {
        eprintln!("kvnode: logging already initialised: {e}");
    }
}
