//! The nodes' own counters around a benchmark run: hedged reads and the
//! read cache, read from each node's admin endpoint (`GET /metrics`,
//! Prometheus text) before and after, so that the run's share is the
//! difference.
//!
//! A node whose admin endpoint cannot be reached from here (a Docker node
//! whose admin port is not published, say) is left out of both ends; when
//! none answers, the figures are reported as unknown, not as zero.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Longest wait for one node's `/metrics`.
const SCRAPE_TIMEOUT: Duration = Duration::from_secs(2);
/// Largest `/metrics` answer read, bytes.
const MAX_ANSWER: u64 = 4 << 20;

/// Cluster-wide sums of the counters a benchmark reports.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Counters {
    /// `kv_hedges_total{outcome="sent"}`: hedged reads the coordinators sent.
    pub hedges_sent: f64,
    /// `kv_hedges_total{outcome="won"}`: hedges answered first.
    pub hedges_won: f64,
    /// `kv_hedges_total{outcome="denied"}`: hedges the budget refused.
    pub hedges_denied: f64,
    /// `kv_requests_total{op="get"}`: reads the nodes coordinated.
    pub reads: f64,
    /// `kv_cache_hits_total`.
    pub cache_hits: f64,
    /// `kv_cache_misses_total`.
    pub cache_misses: f64,
}

impl Counters {
    /// What happened between `before` and `self` (never negative: a node
    /// restarted meanwhile counts from zero).
    pub fn since(&self, before: &Counters) -> Counters {
        let d = |a: f64, b: f64| (a - b).max(0.0);
        Counters {
            hedges_sent: d(self.hedges_sent, before.hedges_sent),
            hedges_won: d(self.hedges_won, before.hedges_won),
            hedges_denied: d(self.hedges_denied, before.hedges_denied),
            reads: d(self.reads, before.reads),
            cache_hits: d(self.cache_hits, before.cache_hits),
            cache_misses: d(self.cache_misses, before.cache_misses),
        }
    }

    /// Cache hits per cache lookup, 0..=1 (`None`: no lookups).
    pub fn hit_ratio(&self) -> Option<f64> {
        let lookups = self.cache_hits + self.cache_misses;
        (lookups > 0.0).then(|| self.cache_hits / lookups)
    }

    fn add(&mut self, other: &Counters) {
        self.hedges_sent += other.hedges_sent;
        self.hedges_won += other.hedges_won;
        self.hedges_denied += other.hedges_denied;
        self.reads += other.reads;
        self.cache_hits += other.cache_hits;
        self.cache_misses += other.cache_misses;
    }
}

/// The admin address to scrape for a node: its `admin` address, with an
/// unspecified host (`0.0.0.0`, `[::]`) replaced by the host of its QUIC
/// address. `None` when it has no admin endpoint.
pub fn admin_target(admin: &str, quic_addr: &str) -> Option<String> {
    let (host, port) = admin.rsplit_once(':')?;
    if port.is_empty() {
        return None;
    }
    if host == "0.0.0.0" || host == "[::]" || host.is_empty() {
        let (quic_host, _) = quic_addr.rsplit_once(':')?;
        return Some(format!("{quic_host}:{port}"));
    }
    Some(admin.to_string())
}

/// Each target's counters (`None` where the node did not answer).
pub async fn scrape(targets: &[String]) -> Vec<Option<Counters>> {
    let mut out = Vec::with_capacity(targets.len());
    for target in targets {
        let text = tokio::time::timeout(SCRAPE_TIMEOUT, metrics_text(target)).await;
        out.push(match text {
            Ok(Some(text)) => Some(parse(&text)),
            _ => None,
        });
    }
    out
}

/// The cluster's counters over the run: the sum over nodes that answered
/// both before and after (`None` when none did).
pub fn run_delta(before: &[Option<Counters>], after: &[Option<Counters>]) -> Option<Counters> {
    let mut total = Counters::default();
    let mut any = false;
    for (b, a) in before.iter().zip(after) {
        if let (Some(b), Some(a)) = (b, a) {
            total.add(&a.since(b));
            any = true;
        }
    }
    any.then_some(total)
}

/// `GET /metrics` over HTTP/1.1 with `Connection: close`; the body, or
/// `None` on any failure or a status other than 200.
async fn metrics_text(target: &str) -> Option<String> {
    let mut stream = TcpStream::connect(target).await.ok()?;
    let request = format!("GET /metrics HTTP/1.1\r\nHost: {target}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.ok()?;
    let mut raw = Vec::new();
    stream.take(MAX_ANSWER).read_to_end(&mut raw).await.ok()?;
    let text = String::from_utf8(raw).ok()?;
    let (head, body) = text.split_once("\r\n\r\n")?;
    (head.split_whitespace().nth(1) == Some("200")).then(|| body.to_string())
}

/// Sums the counters of one node's Prometheus text.
pub fn parse(text: &str) -> Counters {
    let mut c = Counters::default();
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let Some((series, value)) = line.rsplit_once(' ') else {
            continue;
        };
        let Ok(value) = value.trim().parse::<f64>() else {
            continue;
        };
        if !value.is_finite() {
            continue;
        }
        let (name, labels) = series.split_once('{').unwrap_or((series, ""));
        match name {
            "kv_hedges_total" if labels.contains("outcome=\"sent\"") => c.hedges_sent += value,
            "kv_hedges_total" if labels.contains("outcome=\"won\"") => c.hedges_won += value,
            "kv_hedges_total" if labels.contains("outcome=\"denied\"") => {
                c.hedges_denied += value;
            }
            "kv_requests_total" if labels.contains("op=\"get\"") => c.reads += value,
            "kv_cache_hits_total" => c.cache_hits += value,
            "kv_cache_misses_total" => c.cache_misses += value,
            _ => {}
        }
    }
    c
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_are_summed_and_differenced() {
        let text = "# HELP kv_hedges_total x\n\
            kv_hedges_total{outcome=\"sent\"} 4\n\
            kv_hedges_total{outcome=\"won\"} 1\n\
            kv_hedges_total{outcome=\"denied\"} 2\n\
            kv_requests_total{door=\"quic\",op=\"get\",outcome=\"ok\"} 90\n\
            kv_requests_total{door=\"resp\",op=\"get\",outcome=\"not_found\"} 10\n\
            kv_requests_total{door=\"quic\",op=\"put\",outcome=\"ok\"} 50\n\
            kv_cache_hits_total 30\n\
            kv_cache_misses_total 10\n\
            kv_cache_hit_ratio 0.75\n\
            garbage line\n\
            kv_cache_hits_total NaN\n";
        let after = parse(text);
        assert_eq!(after.reads, 100.0);
        assert_eq!(after.hedges_sent, 4.0);
        assert_eq!(after.hit_ratio(), Some(0.75));
        let before = Counters {
            reads: 50.0,
            hedges_sent: 3.0,
            cache_hits: 40.0,
            ..Counters::default()
        };
        let run = run_delta(&[Some(before), None], &[Some(after.clone()), Some(after)]);
        let run = run.expect("one node answered both times");
        assert_eq!(run.reads, 50.0);
        assert_eq!(run.hedges_sent, 1.0);
        // A restarted node's counters went down: counted from zero, not negative.
        assert_eq!(run.cache_hits, 0.0);
        assert_eq!(run_delta(&[None], &[Some(Counters::default())]), None);
    }

    #[test]
    fn unspecified_admin_hosts_take_the_node_address() {
        assert_eq!(
            admin_target("0.0.0.0:9190", "10.0.0.5:7000").as_deref(),
            Some("10.0.0.5:9190")
        );
        assert_eq!(
            admin_target("127.0.0.1:9191", "127.0.0.1:7001").as_deref(),
            Some("127.0.0.1:9191")
        );
        assert_eq!(admin_target("", "127.0.0.1:7001"), None);
    }
}
