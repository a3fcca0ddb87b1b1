//! `kvctl bench --trace FILE`: every measured request of a run, one line
//! each, for lining latencies up with outside events (a fault script's
//! SIGSTOP times, a sampler's seconds) that the run's percentiles hide.
//!
//! The file starts with a `#` header; then per request
//! `UNIX_US LATENCY_US OP KEY REPLICAS OUTCOME`: the wall-clock time the
//! request was meant to leave (open loop; closed loop: when it left), in
//! microseconds since the Unix epoch, its latency in microseconds, `get`
//! or `put`, the key's index, the key's preference list by the client's
//! ring (node ids joined by commas; `-` before the client learned a
//! ring), `ok` or `error`. At most [`MAX_LINES`]
//! requests are kept; the header says how many more were left out.

use std::collections::HashMap;
use std::io::Write;
use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result};
use tokio::time::Instant;

use kv_types::NodeId;

use super::BenchOp;

/// Requests a trace keeps at most (about 40 bytes each in memory: 10
/// minutes at 8,000 ops/s).
pub const MAX_LINES: usize = 5_000_000;

/// One traced request.
#[derive(Clone, Copy, Debug)]
struct Line {
    /// Intended send time after the trace's origin.
    at: Duration,
    latency_us: u32,
    key: u64,
    /// Index in [`Trace::lists`] of its preference list (`None`: unknown).
    replicas: Option<u32>,
    get: bool,
    ok: bool,
}

/// The traced requests of one run.
#[derive(Debug)]
pub struct Trace {
    /// The wall clock and the monotonic clock at the same moment.
    origin_unix: Duration,
    origin: Instant,
    lines: Vec<Line>,
    /// The distinct preference lists seen, comma-joined, and each one's
    /// index (a ring of Q partitions has at most Q).
    lists: Vec<String>,
    index: HashMap<Vec<NodeId>, u32>,
    /// Lines kept at most ([`MAX_LINES`]).
    bound: usize,
    dropped: u64,
}

impl Trace {
    /// An empty trace whose times count from now.
    pub fn new() -> Self {
        Trace {
            origin_unix: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .unwrap_or_default(),
            origin: Instant::now(),
            lines: Vec::new(),
            lists: Vec::new(),
            index: HashMap::new(),
            bound: MAX_LINES,
            dropped: 0,
        }
    }

    /// Adds one request meant to leave at `intended`, about key number
    /// `key` whose preference list is `replicas`.
    pub fn push(
        &mut self,
        intended: Instant,
        latency: Duration,
        op: BenchOp,
        key: u64,
        replicas: Option<&[NodeId]>,
        ok: bool,
    ) {
        if self.lines.len() >= self.bound {
            self.dropped += 1;
            return;
        }
        let replicas = replicas.map(|list| match self.index.get(list) {
            Some(i) => *i,
            None => {
                let i = u32::try_from(self.lists.len()).unwrap_or(u32::MAX);
                let names: Vec<&str> = list.iter().map(NodeId::as_str).collect();
                self.lists.push(names.join(","));
                self.index.insert(list.to_vec(), i);
                i
            }
        });
        self.lines.push(Line {
            at: intended.saturating_duration_since(self.origin),
            latency_us: u32::try_from(latency.as_micros()).unwrap_or(u32::MAX),
            key,
            replicas,
            get: op == BenchOp::Get,
            ok,
        });
    }

    /// Writes the trace to `path`, sorted by send time.
    ///
    /// # Errors
    /// When the file cannot be written.
    pub fn write(&mut self, path: &Path) -> Result<()> {
        let file = std::fs::File::create(path)
            .with_context(|| format!("cannot create {}", path.display()))?;
        let mut out = std::io::BufWriter::new(file);
        self.write_to(&mut out)
            .and_then(|()| out.flush())
            .with_context(|| format!("cannot write {}", path.display()))
    }

    /// Writes the header and the lines, sorted by send time first.
    fn write_to(&mut self, out: &mut impl Write) -> std::io::Result<()> {
        self.lines.sort_by_key(|l| l.at);
        writeln!(
            out,
            "# unix_us latency_us op key replicas outcome ({} requests, {} left out beyond {})",
            self.lines.len(),
            self.dropped,
            self.bound
        )?;
        let origin = self.origin_unix.as_micros();
        for l in &self.lines {
            let replicas = l
                .replicas
                .and_then(|i| self.lists.get(i as usize))
                .map_or("-", String::as_str);
            writeln!(
                out,
                "{} {} {} {} {replicas} {}",
                origin + l.at.as_micros(),
                l.latency_us,
                if l.get { "get" } else { "put" },
                l.key,
                if l.ok { "ok" } else { "error" }
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_come_out_by_send_time_with_wall_clock_times() {
        let mut trace = Trace::new();
        let origin = trace.origin;
        let list: Vec<NodeId> = ["node2", "node3"]
            .into_iter()
            .map(|n| NodeId::new(n).unwrap())
            .collect();
        trace.push(
            origin + Duration::from_millis(5),
            Duration::from_micros(900),
            BenchOp::Put,
            7,
            Some(&list),
            false,
        );
        trace.push(
            origin + Duration::from_millis(2),
            Duration::from_micros(1_500),
            BenchOp::Get,
            3,
            None,
            true,
        );
        trace.push(
            origin + Duration::from_millis(9),
            Duration::from_micros(700),
            BenchOp::Get,
            7,
            Some(&list),
            true,
        );
        let mut out = Vec::new();
        trace.write_to(&mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert!(
            lines[0]
                .starts_with("# unix_us latency_us op key replicas outcome (3 requests, 0 left")
        );
        let base = trace.origin_unix.as_micros();
        assert_eq!(lines[1], format!("{} 1500 get 3 - ok", base + 2_000));
        assert_eq!(
            lines[2],
            format!("{} 900 put 7 node2,node3 error", base + 5_000)
        );
        assert_eq!(
            lines[3],
            format!("{} 700 get 7 node2,node3 ok", base + 9_000)
        );
        assert_eq!(trace.lists.len(), 1, "one list, kept once");
    }

    #[test]
    fn beyond_the_bound_requests_are_counted_not_kept() {
        let mut trace = Trace::new();
        trace.bound = 2;
        for key in 0..3 {
            trace.push(
                Instant::now(),
                Duration::ZERO,
                BenchOp::Get,
                key,
                None,
                true,
            );
        }
        assert_eq!(trace.lines.len(), 2);
        assert_eq!(trace.dropped, 1);
        let mut out = Vec::new();
        trace.write_to(&mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(text.starts_with(
            "# unix_us latency_us op key replicas outcome (2 requests, 1 left out beyond 2)"
        ));
    }
}
