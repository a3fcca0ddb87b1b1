//! Routing decisions as kvctl shows them: the record a node logs (its
//! router settings, every candidate's inputs, the draw, the decision),
//! parsed with the router's own types, and printed for people.

use kv_router::{CandidateInputs, Scored};
use kv_types::NodeId;

/// One decision with everything it was made from, as a node (or kvctl
/// itself, with `--log-decisions`) logs it.
pub type Record = kv_client::DecisionRecord;

/// Parses a record a node sent (or a line of a client decision log).
///
/// # Errors
/// When the JSON is not a decision record.
pub fn parse(json: &str) -> anyhow::Result<Record> {
    serde_json::from_str(json).map_err(|e| anyhow::anyhow!("an unreadable decision record: {e}"))
}

fn opt(v: Option<f64>, unit: &str, scale: f64) -> String {
    v.map_or_else(|| "-".into(), |x| format!("{:.2}{unit}", x / scale))
}

/// One candidate's inputs, for people.
fn inputs_line(c: &CandidateInputs) -> String {
    let report = c.report.as_ref().map_or_else(
        || "no report".to_string(),
        |r| {
            format!(
                "report {} ms old: cpu {:.0}% queue {} backlog {} hit {:.0}%{}{}",
                r.age_ms,
                r.cpu * 100.0,
                r.queue,
                r.backlog,
                r.hit_ratio * 100.0,
                if r.hot { " hot" } else { "" },
                if r.repair { " repairing" } else { "" }
            )
        },
    );
    format!(
        "in-flight {} (oldest {}), latency {} ({} samples), service {}, queue {}, failures {}/{}, breaker {:?}, {}{}{}{}{}",
        c.in_flight,
        opt(c.oldest_us, " ms", 1000.0),
        opt(c.latency_us, " ms", 1000.0),
        c.latency_samples,
        opt(c.service_us, " ms", 1000.0),
        c.queue.map_or_else(|| "-".into(), |q| format!("{q:.1}")),
        c.window_failures,
        c.window_requests,
        c.breaker,
        report,
        if c.affinity { ", affinity" } else { "" },
        if c.ramp < 1.0 {
            format!(", slow start {:.2}", c.ramp)
        } else {
            String::new()
        },
        if c.hints_pending > 0 {
            format!(", {} hints pending", c.hints_pending)
        } else {
            String::new()
        },
        if c.kept_out {
            format!(
                ", kept out (slowest answer since {}{})",
                opt(c.peak_us, " ms", 1000.0),
                if c.probe_due { ", probe due" } else { "" }
            )
        } else {
            String::new()
        },
    )
}

/// One candidate's scoring, for people.
fn score_line(s: &Scored) -> String {
    let dims = s.dimensions.map_or_else(String::new, |d| {
        format!(
            "load {:.2} latency {:.2} hit {:.2} availability {:.2}; ",
            d.load, d.latency, d.hit, d.availability
        )
    });
    let penalties: Vec<String> = s
        .penalties
        .iter()
        .map(|a| format!("{:?} x{:.2}", a.rule, a.factor))
        .collect();
    let penalties = if penalties.is_empty() {
        String::new()
    } else {
        format!("penalties {}; ", penalties.join(", "))
    };
    let excluded = s
        .excluded
        .as_ref()
        .map_or_else(String::new, |e| format!("; filtered out: {e}"));
    format!("{dims}{penalties}score {:.4}{excluded}", s.score)
}

/// The decision of `record`, one block per candidate, for people.
pub fn text(record: &Record) -> String {
    let d = &record.decision;
    let mut out = format!(
        "mode {}, {:?} of key {} at {} (draw {:016x})\n",
        d.mode,
        record.inputs.op,
        String::from_utf8_lossy(&record.key),
        record.node,
        record.draw
    );
    for (c, s) in record.inputs.candidates.iter().zip(&d.scored) {
        out.push_str(&format!(
            "  {}{} [{}]\n    inputs: {}\n    {}\n",
            c.id,
            if c.local { " (this node)" } else { "" },
            c.zone,
            inputs_line(c),
            score_line(s)
        ));
    }
    if let Some(fallback) = &d.fallback {
        out.push_str(&format!("  fallback: {fallback}\n"));
    }
    if !d.probes.is_empty() {
        let probes: Vec<&str> = d.probes.iter().map(NodeId::as_str).collect();
        out.push_str(&format!("  probes: {}\n", probes.join(", ")));
    }
    if let Some(probe) = &d.latency_probe {
        out.push_str(&format!("  latency probe: {probe}\n"));
    }
    let order: Vec<&str> = d.order.iter().map(NodeId::as_str).collect();
    out.push_str(&format!("  order: {}\n", order.join(", ")));
    out
}
