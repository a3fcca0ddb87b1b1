//! The readable trace of one seed: faults, client requests and what a
//! crash lost, each stamped with simulated time since the start. A failing
//! seed replayed with `--trace` prints it, together with the core's own
//! debug logs.

use std::sync::{Arc, Mutex};

use tokio::time::Instant;

/// A shared, append-only list of trace lines.
#[derive(Clone)]
pub struct Trace {
    /// Time zero (simulated).
    start: Instant,
    /// The lines, in order.
    lines: Arc<Mutex<Vec<String>>>,
    /// Also print each line to standard error as it happens.
    echo: bool,
}

impl Trace {
    /// An empty trace starting now; `echo` prints lines as they come.
    pub fn new(echo: bool) -> Self {
        Trace {
            start: Instant::now(),
            lines: Arc::new(Mutex::new(Vec::new())),
            echo,
        }
    }

    /// Appends `what`, stamped with the simulated time.
    pub fn note(&self, what: impl AsRef<str>) {
        let ms = self.start.elapsed().as_secs_f64() * 1000.0;
        let line = format!("[{ms:>10.3} ms] {}", what.as_ref());
        if self.echo {
            eprintln!("{line}");
        }
        crate::world::lock(&self.lines).push(line);
    }

    /// Every line so far.
    pub fn lines(&self) -> Vec<String> {
        crate::world::lock(&self.lines).clone()
    }
}
